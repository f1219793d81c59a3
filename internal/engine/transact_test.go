package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// txBundle is an engine on a real SQLite store, with a clock the test
// moves and the run times the engine handed to the scheduler.
type txBundle struct {
	t     *testing.T
	ctx   context.Context
	e     *Engine
	clock *clock

	mu        sync.Mutex
	scheduled []time.Time
}

func setupTransact(t *testing.T, cfg Config) *txBundle {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := &txBundle{t: t, ctx: context.Background(), clock: &clock{now: t0}}
	cfg.Clock = b.clock
	cfg.OnScheduled = func(at time.Time) {
		b.mu.Lock()
		b.scheduled = append(b.scheduled, at)
		b.mu.Unlock()
	}
	b.e = New(st, cfg)
	return b
}

// active enqueues a job into q and leases it.
func (b *txBundle) active(q string) *job.Job {
	b.t.Helper()
	res, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: q, Kind: "k", Priority: MaxPriority})
	if err != nil {
		b.t.Fatal(err)
	}
	js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{q}})
	if err != nil || len(js) != 1 || js[0].ID != res.ID {
		b.t.Fatalf("fetch from %s: %d jobs, %v", q, len(js), err)
	}
	return js[0]
}

func (b *txBundle) state(id string) job.State {
	b.t.Helper()
	j, err := b.e.Get(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return j.State
}

// Invalid transactions are refused before the store sees them, naming the
// field; the jobs they name stay as they were.
func TestTransactRefusesInvalidInputNamingTheField(t *testing.T) {
	t.Parallel()
	b := setupTransact(t, Config{MaxBatch: 3, MaxPayloadBytes: 64})
	a, f := b.active("q"), b.active("q")
	ack := func(j *job.Job) job.CompleteItem { return job.CompleteItem{ID: j.ID, Token: j.LeaseToken} }
	fail := func(j *job.Job) job.FailItem {
		return job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x"}
	}
	for _, tc := range []struct {
		name  string
		req   TransactRequest
		field string
	}{
		{"nothing", TransactRequest{}, ""},
		{"a job acked and failed", TransactRequest{Ack: []job.CompleteItem{ack(a)}, Fail: []job.FailItem{fail(f), fail(a)}}, "fail[1].id"},
		{"a job acked twice", TransactRequest{Ack: []job.CompleteItem{ack(a), ack(f), ack(a)}}, "ack[2].id"},
		{"a job failed twice", TransactRequest{Fail: []job.FailItem{fail(f), fail(f)}}, "fail[1].id"},
		{"a bad kind", TransactRequest{Ack: []job.CompleteItem{ack(a)}, Enqueue: []EnqueueRequest{{Kind: "k"}, {Kind: "no spaces"}}}, "enqueue[1].kind"},
		{"a bad queue", TransactRequest{Enqueue: []EnqueueRequest{{Kind: "k", Queue: "a b"}}}, "enqueue[0].queue"},
		{"a bad retry delay", TransactRequest{Fail: []job.FailItem{{ID: f.ID, Token: f.LeaseToken, RetryAfter: -time.Second}}}, "fail[0].retry_after_ms"},
		{"a result not JSON", TransactRequest{Ack: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken, Result: json.RawMessage(`{`)}}}, "ack[0].result"},
	} {
		_, err := b.e.Transact(b.ctx, tc.req)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != tc.field {
			t.Errorf("%s: %v, want an input error on %q", tc.name, err, tc.field)
		}
	}
	_, err := b.e.Transact(b.ctx, TransactRequest{Enqueue: make([]EnqueueRequest, 4)})
	var tooMany *BatchTooLargeError
	if !errors.As(err, &tooMany) || tooMany.Field != "enqueue" {
		t.Errorf("4 jobs with a batch of 3: %v, want batch too large on enqueue", err)
	}
	_, err = b.e.Transact(b.ctx, TransactRequest{Ack: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken, Result: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)}}})
	var tooLarge *PayloadTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Field != "ack[0].result" {
		t.Errorf("a result over the limit: %v, want payload too large on ack[0].result", err)
	}
	for _, j := range []*job.Job{a, f} {
		if st := b.state(j.ID); st != job.StateActive {
			t.Errorf("job %s is %s after refused transactions, want active", j.ID, st)
		}
	}
}

// The jobs a transaction enqueues get what an enqueue gives them: the
// defaults and their queue's durability.
func TestTransactEnqueuesAsEnqueueDoes(t *testing.T) {
	t.Parallel()
	b := setupTransact(t, Config{})
	if _, err := b.e.SetDurability(b.ctx, "fast", job.DurabilityProcess); err != nil {
		t.Fatal(err)
	}
	a := b.active("q")
	res, err := b.e.Transact(b.ctx, TransactRequest{
		Ack:     []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken, Result: json.RawMessage(` {"ok": true} `)}},
		Enqueue: []EnqueueRequest{{Kind: "k"}, {Queue: "fast", Kind: "k", Delay: time.Minute}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Acked) != 1 || res.Acked[0].State != job.StateCompleted || len(res.Jobs) != 2 || len(res.Failed) != 0 {
		t.Fatalf("result %+v", res)
	}
	plain, err := b.e.Get(b.ctx, res.Jobs[0].ID)
	if err != nil || plain.Queue != DefaultQueue || plain.MaxAttempts != DefaultMaxAttempts || plain.LeaseDuration != DefaultLease ||
		plain.Durability != job.DurabilityFull || plain.State != job.StateAvailable {
		t.Fatalf("job enqueued without options: %+v %v", plain, err)
	}
	fast, err := b.e.Get(b.ctx, res.Jobs[1].ID)
	if err != nil || fast.Durability != job.DurabilityProcess || fast.State != job.StateScheduled || !fast.RunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("job enqueued into a process queue with a delay: %+v %v", fast, err)
	}
	if j, err := b.e.Get(b.ctx, a.ID); err != nil || string(j.Result) != `{"ok": true}` {
		t.Fatalf("acked job's result: %s %v", j.Result, err)
	}
}

// A stale token fails the whole transaction with an item error naming it,
// and nothing of it is applied.
func TestTransactIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setupTransact(t, Config{})
	a, f := b.active("q"), b.active("q")
	_, err := b.e.Transact(b.ctx, TransactRequest{
		Ack:     []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
		Fail:    []job.FailItem{{ID: f.ID, Token: f.LeaseToken + 1}},
		Enqueue: []EnqueueRequest{{ID: "follow-up", Queue: "next", Kind: "k"}},
	})
	var item *job.ItemError
	if !errors.Is(err, job.ErrLeaseLost) || !errors.As(err, &item) || item.Field != "fail[0].token" {
		t.Fatalf("a stale token: %v, want lease lost on fail[0].token", err)
	}
	if st := b.state(a.ID); st != job.StateActive {
		t.Fatalf("the acked job of a refused transaction is %s", st)
	}
	if _, err := b.e.Get(b.ctx, "follow-up"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("the job a refused transaction enqueued: %v, want not found", err)
	}
}

// A committed transaction wakes the fetches parked on the queues it made
// jobs available in, those parked on a capped queue in which it freed a
// place, and the scheduler for its retrying and scheduled jobs.
func TestTransactWakesWhatItChanged(t *testing.T) {
	t.Parallel()
	b := setupTransact(t, Config{})
	if _, err := b.e.SetLimits(b.ctx, "capped", job.Limits{MaxActive: 1}); err != nil {
		t.Fatal(err)
	}
	held := b.active("capped")
	if _, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: "capped", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	f := b.active("q")
	parked := func(q string) <-chan []*job.Job {
		got := make(chan []*job.Job, 1)
		go func() {
			js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{q}, Wait: 10 * time.Second})
			if err != nil {
				t.Errorf("fetch from %s: %v", q, err)
			}
			got <- js
		}()
		return got
	}
	next, capped := parked("next"), parked("capped")
	deadline := time.Now().Add(5 * time.Second)
	for b.e.Waiting() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the fetches did not park")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	_, err := b.e.Transact(b.ctx, TransactRequest{
		Ack:     []job.CompleteItem{{ID: held.ID, Token: held.LeaseToken}},
		Fail:    []job.FailItem{{ID: f.ID, Token: f.LeaseToken, Message: "again", RetryAfter: time.Minute}},
		Enqueue: []EnqueueRequest{{Queue: "next", Kind: "k"}, {Queue: "later", Kind: "k", Delay: time.Hour}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]<-chan []*job.Job{"next": next, "capped": capped} {
		select {
		case js := <-got:
			if len(js) != 1 {
				t.Fatalf("the fetch parked on %s got %d jobs", name, len(js))
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("the fetch parked on %s woke %v after the transaction", name, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the fetch parked on %s never woke", name)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	want := map[time.Time]bool{t0.Add(time.Minute): false, t0.Add(time.Hour): false}
	for _, at := range b.scheduled {
		if _, ok := want[at]; ok {
			want[at] = true
		}
	}
	for at, seen := range want {
		if !seen {
			t.Errorf("the scheduler was not told of %v (told %v)", at, b.scheduled)
		}
	}
}
