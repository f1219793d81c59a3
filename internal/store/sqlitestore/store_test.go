package sqlitestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)

// bundle is one open store on a fresh data folder.
type bundle struct {
	t   testing.TB
	s   *Store
	dir string
	ctx context.Context
}

func setup(t testing.TB, change ...func(*Config)) *bundle {
	t.Helper()
	dir := t.TempDir()
	b := &bundle{t: t, dir: dir, ctx: context.Background()}
	b.open(change...)
	t.Cleanup(func() { _ = b.s.Close() })
	return b
}

func (b *bundle) open(change ...func(*Config)) {
	b.t.Helper()
	cfg := Config{Dir: b.dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range change {
		c(&cfg)
	}
	s, err := Open(b.ctx, cfg)
	if err != nil {
		b.t.Fatalf("open store: %v", err)
	}
	b.s = s
}

// reopen closes the store and opens it again on the same folder.
func (b *bundle) reopen(change ...func(*Config)) {
	b.t.Helper()
	if err := b.s.Close(); err != nil {
		b.t.Fatalf("close store: %v", err)
	}
	b.open(change...)
}

func params(queue string, n int, mod ...func(i int, p *store.JobInsertParams)) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			ID: job.NewID(t0), Queue: queue, Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			State: job.StateAvailable, RunAt: t0, MaxAttempts: 3, LeaseDuration: 30 * time.Second,
			Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour},
		}
		for _, m := range mod {
			m(i, &ps[i])
		}
	}
	return ps
}

func (b *bundle) insert(ps ...store.JobInsertParams) []store.InsertResult {
	b.t.Helper()
	res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0})
	if err != nil {
		b.t.Fatalf("insert: %v", err)
	}
	return res
}

func (b *bundle) claim(max int, queues ...string) []*job.Job {
	b.t.Helper()
	jobs, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: max, Now: t0})
	if err != nil {
		b.t.Fatalf("claim: %v", err)
	}
	return jobs
}

func (b *bundle) get(id string) *job.Job {
	b.t.Helper()
	j, err := b.s.JobGet(b.ctx, id)
	if err != nil {
		b.t.Fatalf("get %s: %v", id, err)
	}
	return j
}

func (b *bundle) counts(queue string) map[job.State]int64 {
	b.t.Helper()
	q, err := b.s.QueueGet(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("queue %s: %v", queue, err)
	}
	return q.Counts
}

// checkCounts compares the in-memory counts of queue with a count query.
func (b *bundle) checkCounts(queue string) {
	b.t.Helper()
	got := b.counts(queue)
	for _, st := range job.States {
		var n int64
		if err := b.s.rdb.QueryRow(`SELECT COUNT(*) FROM jobs WHERE queue = ? AND state = ?`, queue, string(st)).Scan(&n); err != nil {
			b.t.Fatal(err)
		}
		if got[st] != n {
			b.t.Fatalf("queue %s: %s count %d in memory, %d in the database", queue, st, got[st], n)
		}
	}
}

func TestInsertGetRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := params("q", 1, func(_ int, p *store.JobInsertParams) {
		p.Priority, p.Tags, p.UniqueKey, p.UniqueFor = 7, []string{"a", "b"}, "u", time.Hour
		p.Backoff = job.Backoff{Kind: job.BackoffExponential, Base: 2 * time.Second, Max: time.Minute, Jitter: 0.25}
		p.Payload = json.RawMessage(`{ "spaced" : [1, 2] }`)
	})[0]
	res := b.insert(p)
	if res[0].Duplicate || res[0].Job.ID != p.ID || !res[0].Job.CreatedAt.Equal(t0) {
		t.Fatalf("insert result %+v", res[0])
	}
	got := b.get(p.ID)
	want := *res[0].Job
	if string(got.Payload) != string(p.Payload) {
		t.Fatalf("payload %s, want byte for byte %s", got.Payload, p.Payload)
	}
	got.Payload, want.Payload = nil, nil
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", *got, want)
	}
	if got.RunAt.Location() != time.UTC || got.RunAt.Nanosecond() != t0.Nanosecond() {
		t.Fatalf("run_at %v lost UTC or nanoseconds", got.RunAt)
	}
	if _, err := b.s.JobGet(b.ctx, "nope"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}

func TestInsertDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.insert(params("q", 1)...)[0].Job
	again := params("q", 1, func(_ int, p *store.JobInsertParams) { p.ID = first.ID; p.Kind = "other" })
	res := b.insert(again...)
	if !res[0].Duplicate || res[0].Job.Kind != "k" || string(res[0].Job.Payload) != `{"n":0}` {
		t.Fatalf("id duplicate: %+v", res[0])
	}
	// Same unique key twice in one batch, then again later: all resolve to the first.
	uniq := params("q", 3, func(i int, p *store.JobInsertParams) { p.UniqueKey = "key" })
	res = b.insert(uniq...)
	if res[0].Duplicate || !res[1].Duplicate || res[1].Job.ID != uniq[0].ID || !res[2].Duplicate {
		t.Fatalf("unique in batch: %+v", res)
	}
	// Unique while pending: once the first is completed, the key is free.
	j := b.claim(10, "q")
	for _, c := range j {
		if _, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []store.JobCompleteItem{{ID: c.ID, Token: c.LeaseToken}}, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	res = b.insert(params("q", 1, func(_ int, p *store.JobInsertParams) { p.UniqueKey = "key" })...)
	if res[0].Duplicate {
		t.Fatal("a completed job still blocked its unique key")
	}
	// A unique window counts completed jobs too, but not cancelled ones.
	win := func(_ int, p *store.JobInsertParams) { p.UniqueKey, p.UniqueFor = "w", time.Minute }
	w1 := b.insert(params("q", 1, win)...)[0].Job
	if res := b.insert(params("q", 1, win)...); !res[0].Duplicate || res[0].Job.ID != w1.ID {
		t.Fatalf("unique window: %+v", res[0])
	}
	if _, err := b.s.JobCancel(b.ctx, w1.ID, t0); err != nil {
		t.Fatal(err)
	}
	if res := b.insert(params("q", 1, win)...); res[0].Duplicate {
		t.Fatal("a cancelled job blocked its unique window")
	}
	b.checkCounts("q")
}

func TestInsertBatchIsAtomic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 2)...)
	ps := params("q", 5, func(i int, p *store.JobInsertParams) {
		if i == 3 {
			p.State = job.StateActive // refused: the whole batch must fail
		}
	})
	if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err == nil {
		t.Fatal("a batch with a bad job was accepted")
	}
	if _, err := b.s.JobGet(b.ctx, ps[0].ID); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("first job of a failed batch was stored: %v", err)
	}
	if got := b.counts("q")[job.StateAvailable]; got != 2 {
		t.Fatalf("available %d after a failed batch, want 2", got)
	}
	if got := len(b.claim(100, "q")); got != 2 {
		t.Fatalf("claimed %d after a failed batch, want 2", got)
	}
	b.checkCounts("q")
}

func TestClaimOrderAndLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := params("a", 6, func(i int, p *store.JobInsertParams) {
		p.Priority = i % 3
		p.RunAt = t0.Add(-time.Duration(i) * time.Second)
	})
	b.insert(ps...)
	b.insert(params("b", 2, func(_ int, p *store.JobInsertParams) { p.Priority = 5 })...)
	got := b.claim(4, "a", "b", "a")
	// b's two (priority 5) first, then a's priority 2 by run_at: i=5, then i=2.
	if len(got) != 4 || got[0].Queue != "b" || got[1].Queue != "b" || got[2].ID != ps[5].ID || got[3].ID != ps[2].ID {
		t.Fatalf("claim order: %v", ids(got))
	}
	j := got[2]
	if j.State != job.StateActive || j.Attempt != 1 || j.LeaseToken != 1 || !j.StartedAt.Equal(t0) ||
		!j.LeaseExpiresAt.Equal(t0.Add(30*time.Second)) || string(j.Payload) != `{"n":5}` {
		t.Fatalf("claimed job %+v", j)
	}
	over, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"a"}, Max: 1, LeaseDuration: time.Minute, Now: t0})
	if err != nil || len(over) != 1 || !over[0].LeaseExpiresAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("lease override: %v %v", over, err)
	}
	if err := b.s.QueueSetPaused(b.ctx, "a", true); err != nil {
		t.Fatal(err)
	}
	if got := b.claim(10, "a"); len(got) != 0 {
		t.Fatalf("paused queue handed out %d jobs", len(got))
	}
	if err := b.s.QueueSetPaused(b.ctx, "a", false); err != nil {
		t.Fatal(err)
	}
	if got := b.claim(10, "a", "nosuch"); len(got) != 3 {
		t.Fatalf("resumed queue handed out %d jobs, want 3", len(got))
	}
	b.checkCounts("a")
	b.checkCounts("b")
}

func ids(jobs []*job.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = fmt.Sprintf("%s/%d", j.Queue, j.Priority)
	}
	return out
}

func TestCompleteFailExtendTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 4)...)
	js := b.claim(4, "q")
	out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Now: t0.Add(time.Second), Items: []store.JobCompleteItem{
		{ID: js[0].ID, Token: js[0].LeaseToken, Result: json.RawMessage(`{"ok":true}`)},
		{ID: js[1].ID, Token: js[1].LeaseToken + 1},
		{ID: "unknown", Token: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Err != nil || out[0].State != job.StateCompleted || !errors.Is(out[1].Err, job.ErrLeaseLost) || !errors.Is(out[2].Err, job.ErrNotFound) {
		t.Fatalf("complete outcomes %+v", out)
	}
	done := b.get(js[0].ID)
	if string(done.Result) != `{"ok":true}` || !done.FinishedAt.Equal(t0.Add(time.Second)) || !done.LeaseExpiresAt.IsZero() {
		t.Fatalf("completed job %+v", done)
	}
	// A second ack of a finished job is a lost lease.
	out, _ = b.s.JobComplete(b.ctx, &store.JobCompleteParams{Now: t0, Items: []store.JobCompleteItem{{ID: js[0].ID, Token: js[0].LeaseToken}}})
	if !errors.Is(out[0].Err, job.ErrLeaseLost) {
		t.Fatalf("second ack: %+v", out[0])
	}
	ext, err := b.s.JobExtend(b.ctx, &store.JobExtendParams{Now: t0.Add(time.Minute), Items: []store.JobExtendItem{
		{ID: js[1].ID, Token: js[1].LeaseToken}, {ID: js[2].ID, Token: js[2].LeaseToken, Lease: time.Hour},
	}})
	if err != nil || !ext[0].LeaseExpiresAt.Equal(t0.Add(time.Minute+30*time.Second)) || !ext[1].LeaseExpiresAt.Equal(t0.Add(time.Minute+time.Hour)) {
		t.Fatalf("extend %+v %v", ext, err)
	}
	fail, err := b.s.JobFail(b.ctx, &store.JobFailParams{Now: t0, Items: []store.JobFailItem{
		{ID: js[1].ID, Token: js[1].LeaseToken, Message: "boom"},
		{ID: js[2].ID, Token: js[2].LeaseToken, Message: "fatal", NoRetry: true},
		{ID: js[3].ID, Token: js[3].LeaseToken, Message: "later", RetryAfter: time.Hour},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if fail[0].State != job.StateRetrying || !fail[0].RunAt.Equal(t0.Add(time.Second)) || fail[1].State != job.StateDead ||
		fail[2].State != job.StateRetrying || !fail[2].RunAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("fail outcomes %+v", fail)
	}
	r := b.get(js[1].ID)
	if len(r.Errors) != 1 || r.Errors[0].Message != "boom" || r.Errors[0].Attempt != 1 || !r.Errors[0].At.Equal(t0) {
		t.Fatalf("errors %+v", r.Errors)
	}
	if err := b.s.JobProgress(b.ctx, &store.JobProgressParams{ID: js[1].ID, Token: js[1].LeaseToken, Progress: json.RawMessage(`1`)}); !errors.Is(err, job.ErrLeaseLost) {
		t.Fatalf("progress on a retrying job: %v", err)
	}
	b.checkCounts("q")
}

func TestCancelRequestedWhileActive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 3)...)
	js := b.claim(3, "q")
	for _, j := range js {
		c, err := b.s.JobCancel(b.ctx, j.ID, t0)
		if err != nil || c.State != job.StateActive || !c.CancelRequested {
			t.Fatalf("cancel active: %+v %v", c, err)
		}
	}
	ext, _ := b.s.JobExtend(b.ctx, &store.JobExtendParams{Now: t0, Items: []store.JobExtendItem{{ID: js[0].ID, Token: js[0].LeaseToken}}})
	if !ext[0].CancelRequested {
		t.Fatal("extend did not report the cancel")
	}
	ack, _ := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Now: t0, Items: []store.JobCompleteItem{{ID: js[0].ID, Token: js[0].LeaseToken}}})
	fail, _ := b.s.JobFail(b.ctx, &store.JobFailParams{Now: t0, Items: []store.JobFailItem{{ID: js[1].ID, Token: js[1].LeaseToken}}})
	res, err := b.s.JobRescueExpired(b.ctx, t0.Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if ack[0].State != job.StateCancelled || fail[0].State != job.StateCancelled || b.get(js[2].ID).State != job.StateCancelled || res.Count != 1 {
		t.Fatalf("ack %+v fail %+v rescue %+v", ack[0], fail[0], res)
	}
	if c, err := b.s.JobCancel(b.ctx, js[0].ID, t0); err != nil || c.State != job.StateCancelled {
		t.Fatalf("cancelling a cancelled job: %v", err)
	}
	b.checkCounts("q")
}

func TestAdminOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ps := b.insert(params("q", 6)...)
	id := func(i int) string { return ps[i].Job.ID }
	if c, err := b.s.JobCancel(b.ctx, id(0), t0); err != nil || c.State != job.StateCancelled || !c.FinishedAt.Equal(t0) {
		t.Fatalf("cancel available: %+v %v", c, err)
	}
	if err := b.s.JobDelete(b.ctx, id(1)); err != nil {
		t.Fatal(err)
	}
	js := b.claim(1, "q")
	if js[0].ID != id(2) {
		t.Fatalf("claim after cancel/delete gave %s, want %s", js[0].ID, id(2))
	}
	if err := b.s.JobDelete(b.ctx, id(2)); !errors.Is(err, job.ErrInvalidState) {
		t.Fatalf("delete active: %v", err)
	}
	if _, err := b.s.JobRetry(b.ctx, id(3), t0); !errors.Is(err, job.ErrInvalidState) {
		t.Fatalf("retry available: %v", err)
	}
	r, err := b.s.JobRetry(b.ctx, id(0), t0.Add(time.Second))
	if err != nil || r.State != job.StateAvailable || r.Attempt != 0 || !r.FinishedAt.IsZero() || !r.RunAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("retry cancelled: %+v %v", r, err)
	}
	b.s.JobFail(b.ctx, &store.JobFailParams{Now: t0, Items: []store.JobFailItem{{ID: js[0].ID, Token: js[0].LeaseToken, NoRetry: true}}})
	if _, err := b.s.JobCancel(b.ctx, id(2), t0); !errors.Is(err, job.ErrInvalidState) {
		t.Fatalf("cancel dead: %v", err)
	}
	if n, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateDead, Now: t0}); n != 1 || err != nil {
		t.Fatalf("retry many: %d %v", n, err)
	}
	if n, err := b.s.QueuePurge(b.ctx, "q"); n != 5 || err != nil {
		t.Fatalf("purge: %d %v", n, err)
	}
	if got := b.claim(10, "q"); len(got) != 0 {
		t.Fatalf("claimed %d after purge", len(got))
	}
	if _, err := b.s.QueueGet(b.ctx, "nosuch"); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("unknown queue: %v", err)
	}
	if err := b.s.QueueSetPaused(b.ctx, "fresh", true); err != nil {
		t.Fatal(err)
	}
	qs, _ := b.s.QueueList(b.ctx)
	if len(qs) != 2 || qs[0].Name != "fresh" || !qs[0].Paused || qs[1].Name != "q" || len(qs[1].Counts) != numStates {
		t.Fatalf("queues %+v", qs)
	}
	b.insert(params("q", 3, func(_ int, p *store.JobInsertParams) { p.State, p.RunAt = job.StateScheduled, t0.Add(time.Hour) })...)
	if n, err := b.s.JobDeleteMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateScheduled}); n != 3 || err != nil {
		t.Fatalf("delete many: %d %v", n, err)
	}
	b.checkCounts("q")
}

func TestPromoteRescuePrune(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 3, func(i int, p *store.JobInsertParams) {
		p.State, p.RunAt = job.StateScheduled, t0.Add(time.Duration(i+1)*time.Minute)
	})...)
	res, err := b.s.JobPromoteDue(b.ctx, t0.Add(2*time.Minute), 10)
	if err != nil || res.Count != 2 || len(res.Available) != 1 || !res.Next.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("promote: %+v %v", res, err)
	}
	js := b.claim(10, "q")
	if len(js) != 2 {
		t.Fatalf("claimed %d promoted jobs", len(js))
	}
	res, err = b.s.JobRescueExpired(b.ctx, t0.Add(31*time.Second), 10)
	if err != nil || res.Count != 2 || !res.Next.IsZero() {
		t.Fatalf("rescue: %+v %v", res, err)
	}
	j := b.get(js[0].ID)
	if j.State != job.StateAvailable || len(j.Errors) != 1 || j.Errors[0].Message != "lease expired" || !j.LeaseExpiresAt.IsZero() {
		t.Fatalf("rescued job %+v", j)
	}
	// Run both jobs to the end: attempts 2 and 3, the last one dies.
	for attempt := 2; attempt <= 3; attempt++ {
		js = b.claim(10, "q")
		if len(js) != 2 || js[0].Attempt != attempt {
			t.Fatalf("attempt %d: %d jobs", attempt, len(js))
		}
		b.s.JobRescueExpired(b.ctx, t0.Add(time.Hour), 10)
	}
	if c := b.counts("q"); c[job.StateDead] != 2 {
		t.Fatalf("counts %v, want 2 dead", c)
	}
	n, err := b.s.JobPrune(b.ctx, &store.JobPruneParams{KeepDead: 1, Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("prune by count: %d %v", n, err)
	}
	n, err = b.s.JobPrune(b.ctx, &store.JobPruneParams{DeadBefore: t0.Add(2 * time.Hour), Limit: 10})
	if err != nil || n != 1 {
		t.Fatalf("prune by age: %d %v", n, err)
	}
	b.checkCounts("q")
}

func TestListPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var all []string
	for i := 0; i < 5; i++ {
		for _, r := range b.insert(params(fmt.Sprintf("q%d", i%2), 3)...) {
			all = append(all, r.Job.ID)
		}
	}
	b.claim(2, "q1")
	for _, tc := range []struct {
		queue string
		state job.State
		want  int
	}{{"", "", 15}, {"q1", "", 6}, {"q1", job.StateAvailable, 4}, {"", job.StateActive, 2}} {
		var got []string
		cursor := ""
		for {
			page, err := b.s.JobList(b.ctx, &store.JobListParams{Queue: tc.queue, State: tc.state, Cursor: cursor, Limit: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range page.Jobs {
				got = append(got, j.ID)
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if len(got) != tc.want {
			t.Fatalf("list %q/%q: %d jobs, want %d", tc.queue, tc.state, len(got), tc.want)
		}
		for i := 1; i < len(got); i++ {
			if indexOf(all, got[i]) < indexOf(all, got[i-1]) {
				t.Fatalf("list %q/%q is not in enqueue order", tc.queue, tc.state)
			}
		}
	}
	var in *job.InputError
	if _, err := b.s.JobList(b.ctx, &store.JobListParams{Cursor: "garbage!", Limit: 1}); !errors.As(err, &in) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 1)...)
	if err := b.s.Ping(b.ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
	if !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("insert after close: %v", err)
	}
	if _, err := b.s.JobGet(b.ctx, "x"); !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("get after close: %v", err)
	}
	if err := b.s.Ping(b.ctx); !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("ping after close: %v", err)
	}
}
