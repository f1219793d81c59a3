package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// readCounter is a real store that counts the engine's reads of queues'
// defaults and, once failGets is set, fails them.
type readCounter struct {
	store.Store
	gets     atomic.Int64
	failGets atomic.Bool

	failShared atomic.Bool // once set, every insert of more than one job fails

	mu       sync.Mutex
	inserted []store.JobInsertParams // every job the engine asked to insert
	inserts  []int                   // the number of jobs of each insert asked for
}

func (r *readCounter) JobInsertMany(ctx context.Context, p *store.JobInsertManyParams) ([]store.InsertResult, error) {
	r.mu.Lock()
	r.inserted = append(r.inserted, p.Jobs...)
	r.inserts = append(r.inserts, len(p.Jobs))
	r.mu.Unlock()
	if len(p.Jobs) > 1 && r.failShared.Load() {
		return nil, errSharedInsert
	}
	return r.Store.JobInsertMany(ctx, p)
}

var errSharedInsert = errors.New("shared insert failed")

var errQueueRead = errors.New("queue read failed")

func (r *readCounter) QueueDefaults(ctx context.Context, name string) (store.QueueDefaults, error) {
	r.gets.Add(1)
	if r.failGets.Load() {
		return store.QueueDefaults{}, errQueueRead
	}
	return r.Store.QueueDefaults(ctx, name)
}

// defaultsBundle is an engine on a real embedded store with a clock the
// test moves, the run times the engine handed to the scheduler, and a
// queue "orders" whose jobs default to a 5-minute lease, 3 attempts and
// a 10-second delay.
type defaultsBundle struct {
	t     *testing.T
	ctx   context.Context
	st    *readCounter
	e     *Engine
	clock *clock

	mu        sync.Mutex
	scheduled []time.Time
}

// ordersDefaults are the settings of the queue "orders".
var ordersDefaults = job.QueueSettings{DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: 10 * time.Second}

func setupDefaults(t *testing.T) *defaultsBundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := &defaultsBundle{t: t, ctx: context.Background(), st: &readCounter{Store: st}, clock: &clock{now: t0}}
	b.e = New(b.st, Config{Clock: b.clock, DecodeJob: decodeTemplate, OnScheduled: func(at time.Time) {
		b.mu.Lock()
		b.scheduled = append(b.scheduled, at)
		b.mu.Unlock()
	}})
	if q, err := b.e.SetSettings(b.ctx, "orders", ordersDefaults); err != nil || q.Settings != ordersDefaults {
		t.Fatalf("set settings: %+v, %v", q, err)
	}
	return b
}

func (b *defaultsBundle) get(id string) *job.Job {
	b.t.Helper()
	j, err := b.e.Get(b.ctx, id)
	if err != nil {
		b.t.Fatalf("get %s: %v", id, err)
	}
	return j
}

// want fails unless job id has the lease, the maximum attempts, the state
// and the run time given.
func (b *defaultsBundle) want(id string, lease time.Duration, attempts int, state job.State, runAt time.Time) {
	b.t.Helper()
	j := b.get(id)
	if j.LeaseDuration != lease || j.MaxAttempts != attempts || j.State != state || !j.RunAt.Equal(runAt) {
		b.t.Fatalf("job %s: lease %v, max attempts %d, %s at %v; want lease %v, max attempts %d, %s at %v",
			id, j.LeaseDuration, j.MaxAttempts, j.State, j.RunAt, lease, attempts, state, runAt)
	}
}

// wantScheduled fails unless the engine told the scheduler of exactly the
// run times given since the last call.
func (b *defaultsBundle) wantScheduled(runAts ...time.Time) {
	b.t.Helper()
	b.mu.Lock()
	got := b.scheduled
	b.scheduled = nil
	b.mu.Unlock()
	if len(got) != len(runAts) {
		b.t.Fatalf("the scheduler was told %v, want %v", got, runAts)
	}
	for i := range got {
		if !got[i].Equal(runAts[i]) {
			b.t.Fatalf("the scheduler was told %v, want %v", got, runAts)
		}
	}
}

func (b *defaultsBundle) enqueue(req EnqueueRequest) string {
	b.t.Helper()
	res, err := b.e.Enqueue(b.ctx, req)
	if err != nil {
		b.t.Fatalf("enqueue %+v: %v", req, err)
	}
	return res.ID
}

// A job enqueued without a lease, maximum attempts or delay takes its
// queue's, and the scheduler hears of its run time; a job with its own
// keeps them; a job of a queue without defaults takes the engine's.
func TestQueueDefaultsApply(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	id := b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k"})
	b.want(id, 5*time.Minute, 3, job.StateScheduled, t0.Add(10*time.Second))
	b.wantScheduled(t0.Add(10 * time.Second))

	own := b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k", LeaseDuration: time.Minute, MaxAttempts: 7, Delay: time.Second})
	b.want(own, time.Minute, 7, job.StateScheduled, t0.Add(time.Second))
	b.wantScheduled(t0.Add(time.Second))
	// A run time of its own, even one passed, wins over the default delay.
	now := b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k", RunAt: t0.Add(-time.Hour)})
	b.want(now, 5*time.Minute, 3, job.StateAvailable, t0)
	later := b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k", RunAt: t0.Add(time.Hour)})
	b.want(later, 5*time.Minute, 3, job.StateScheduled, t0.Add(time.Hour))
	b.wantScheduled(t0.Add(time.Hour))

	plain := b.enqueue(EnqueueRequest{Queue: "plain", Kind: "k"})
	b.want(plain, DefaultLease, DefaultMaxAttempts, job.StateAvailable, t0)
	b.wantScheduled()

	// New defaults hold for the jobs enqueued after them only; cleared
	// defaults give the engine's again.
	if _, err := b.e.SetSettings(b.ctx, "orders", job.QueueSettings{DefaultMaxAttempts: 9}); err != nil {
		t.Fatal(err)
	}
	b.want(id, 5*time.Minute, 3, job.StateScheduled, t0.Add(10*time.Second))
	b.want(b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k"}), DefaultLease, 9, job.StateAvailable, t0)
	if _, err := b.e.SetSettings(b.ctx, "orders", job.QueueSettings{}); err != nil {
		t.Fatal(err)
	}
	b.want(b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k"}), DefaultLease, DefaultMaxAttempts, job.StateAvailable, t0)
}

// A job that takes its queue's default delay waits, scheduled, until the
// delay has passed, and is handed out after it.
func TestQueueDefaultDelayMakesAJobAvailableAfterIt(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	id := b.enqueue(EnqueueRequest{Queue: "orders", Kind: "k"})
	promote := func() {
		t.Helper()
		if _, err := b.st.JobPromoteDue(b.ctx, b.e.Now(), 100); err != nil {
			t.Fatalf("promote: %v", err)
		}
	}
	fetch := func() []*job.Job {
		t.Helper()
		js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"orders"}})
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		return js
	}
	b.clock.set(t0.Add(10*time.Second - time.Millisecond))
	promote()
	if js := fetch(); len(js) != 0 {
		t.Fatalf("a fetch before the default delay passed got %d jobs", len(js))
	}
	b.want(id, 5*time.Minute, 3, job.StateScheduled, t0.Add(10*time.Second))
	b.clock.set(t0.Add(10 * time.Second))
	promote()
	js := fetch()
	if len(js) != 1 || js[0].ID != id || js[0].LeaseExpiresAt.Sub(t0.Add(10*time.Second)) != 5*time.Minute {
		t.Fatalf("a fetch after the default delay got %+v, want %s leased for the default lease", js, id)
	}
}

// A batch with jobs of two queues gives each job its own queue's
// defaults, reading each queue once; a batch whose jobs need no default
// reads none.
func TestQueueDefaultsInABatch(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	other := job.QueueSettings{DefaultLease: time.Minute, DefaultMaxAttempts: 1}
	if _, err := b.e.SetSettings(b.ctx, "emails", other); err != nil {
		t.Fatal(err)
	}
	b.st.gets.Store(0)
	res, err := b.e.EnqueueBatch(b.ctx, []EnqueueRequest{
		{Queue: "orders", Kind: "k"},
		{Queue: "emails", Kind: "k"},
		{Queue: "orders", Kind: "k", MaxAttempts: 5},
		{Queue: "emails", Kind: "k", LeaseDuration: 2 * time.Second, Delay: time.Minute},
		{Kind: "k"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.st.gets.Load(); n != 3 {
		t.Fatalf("the batch read its queues %d times, want 3 (orders, emails, default)", n)
	}
	b.want(res[0].ID, 5*time.Minute, 3, job.StateScheduled, t0.Add(10*time.Second))
	b.want(res[1].ID, time.Minute, 1, job.StateAvailable, t0)
	b.want(res[2].ID, 5*time.Minute, 5, job.StateScheduled, t0.Add(10*time.Second))
	b.want(res[3].ID, 2*time.Second, 1, job.StateScheduled, t0.Add(time.Minute))
	b.want(res[4].ID, DefaultLease, DefaultMaxAttempts, job.StateAvailable, t0)
	b.wantScheduled(t0.Add(10 * time.Second))

	b.st.gets.Store(0)
	full := EnqueueRequest{Queue: "orders", Kind: "k", LeaseDuration: time.Second, MaxAttempts: 2, Delay: time.Second, Durability: job.DurabilityProcess}
	res, err = b.e.EnqueueBatch(b.ctx, []EnqueueRequest{full, full})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.st.gets.Load(); n != 0 {
		t.Fatalf("a batch that needs no default read its queues %d times", n)
	}
	b.want(res[1].ID, time.Second, 2, job.StateScheduled, t0.Add(time.Second))
}

// A queue that cannot be read fails the enqueue, which stores nothing,
// rather than store jobs without their queue's defaults.
func TestQueueDefaultsUnreadable(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	b.st.failGets.Store(true)
	if _, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: "orders", Kind: "k", ID: "lost"}); !errors.Is(err, errQueueRead) {
		t.Fatalf("enqueue with its queue unreadable: %v, want the read's error", err)
	}
	if _, err := b.e.Transact(b.ctx, TransactRequest{Enqueue: []EnqueueRequest{{Queue: "orders", Kind: "k", ID: "lost"}}}); !errors.Is(err, errQueueRead) {
		t.Fatalf("transaction with its queue unreadable: %v, want the read's error", err)
	}
	b.st.failGets.Store(false)
	if _, err := b.e.Get(b.ctx, "lost"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("a refused enqueue stored its job: %v", err)
	}
}

// The jobs a transaction enqueues take their queues' defaults as an
// enqueue's do.
func TestQueueDefaultsInATransaction(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	active := b.enqueue(EnqueueRequest{Queue: "work", Kind: "k"})
	js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"work"}})
	if err != nil || len(js) != 1 || js[0].ID != active {
		t.Fatalf("fetch: %v, %v", js, err)
	}
	res, err := b.e.Transact(b.ctx, TransactRequest{
		Ack: []job.CompleteItem{{ID: active, Token: js[0].LeaseToken}},
		Enqueue: []EnqueueRequest{
			{Queue: "orders", Kind: "next"},
			{Queue: "orders", Kind: "next", LeaseDuration: time.Second, MaxAttempts: 2, RunAt: t0},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.want(res.Jobs[0].ID, 5*time.Minute, 3, job.StateScheduled, t0.Add(10*time.Second))
	b.want(res.Jobs[1].ID, time.Second, 2, job.StateAvailable, t0)
	b.wantScheduled(t0.Add(10 * time.Second))
}

// The jobs of a cron schedule, fired at a tick or by hand, take their
// queue's defaults, the delay counting from the firing.
func TestQueueDefaultsForScheduledJobs(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	if _, _, err := b.e.PutSchedule(b.ctx, ScheduleRequest{Name: "nightly", Timing: schedule.Timing{Every: time.Minute},
		Job: json.RawMessage(`{"queue":"orders","kind":"tick"}`)}); err != nil {
		t.Fatal(err)
	}
	tick := t0.Add(time.Minute)
	b.clock.set(tick)
	if _, _, err := b.e.FireSchedules(b.ctx, tick); err != nil {
		t.Fatal(err)
	}
	b.want(schedule.JobID("nightly", tick), 5*time.Minute, 3, job.StateScheduled, tick.Add(10*time.Second))
	b.wantScheduled(tick.Add(10 * time.Second))

	fired, err := b.e.TriggerSchedule(b.ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	b.want(fired.Job.ID, 5*time.Minute, 3, job.StateScheduled, tick.Add(10*time.Second))
}

// A job without an id of its own gets one the engine made, which it tells
// the store is fresh; a job with one does not.
func TestFreshIDs(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	made, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: "q", Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.e.EnqueueBatch(b.ctx, []EnqueueRequest{{Queue: "q", Kind: "k", ID: "given"}, {Queue: "q", Kind: "k"}}); err != nil {
		t.Fatal(err)
	}
	b.st.mu.Lock()
	defer b.st.mu.Unlock()
	if len(b.st.inserted) != 3 {
		t.Fatalf("%d jobs inserted, want 3", len(b.st.inserted))
	}
	for i, p := range b.st.inserted {
		if fresh := i != 1; p.FreshID != fresh {
			t.Fatalf("job %d (%s): FreshID %v, want %v", i, p.ID, p.FreshID, fresh)
		}
	}
	if b.st.inserted[0].ID != made.ID || b.st.inserted[1].ID != "given" {
		t.Fatalf("inserted %s and %s, want %s and given", b.st.inserted[0].ID, b.st.inserted[1].ID, made.ID)
	}
}
