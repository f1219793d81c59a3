package engine

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

// countingStore is a real store that counts the claims reaching it.
type countingStore struct {
	store.Store
	claims atomic.Int64
}

func (s *countingStore) JobClaim(ctx context.Context, p *store.JobClaimParams) (*store.ClaimResult, error) {
	s.claims.Add(1)
	return s.Store.JobClaim(ctx, p)
}

// groupFetchBundle is an engine on a real SQLite store whose claims are
// counted.
type groupFetchBundle struct {
	t   *testing.T
	ctx context.Context
	e   *Engine
	st  *countingStore
}

func setupGroupFetch(t *testing.T) *groupFetchBundle {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cs := &countingStore{Store: st}
	return &groupFetchBundle{t: t, ctx: ctx, e: New(cs, Config{}), st: cs}
}

func (b *groupFetchBundle) enqueue(queue, group string) string {
	b.t.Helper()
	res, err := b.e.Enqueue(b.ctx, EnqueueRequest{Queue: queue, Kind: "k", Group: group})
	if err != nil {
		b.t.Fatal(err)
	}
	return res.ID
}

// park starts a long poll of req and waits until it is parked.
func (b *groupFetchBundle) park(req FetchRequest) <-chan []*job.Job {
	b.t.Helper()
	got := make(chan []*job.Job, 1)
	go func() {
		js, err := b.e.Fetch(b.ctx, req)
		if err != nil {
			b.t.Errorf("fetch: %v", err)
		}
		got <- js
	}()
	deadline := time.Now().Add(5 * time.Second)
	for b.e.Waiting() != 1 {
		if time.Now().After(deadline) {
			b.t.Fatal("the fetch did not park")
		}
		time.Sleep(time.Millisecond)
	}
	return got
}

// stillParked fails unless the fetch behind got stays parked for a while,
// looking at the store no more than a few times meanwhile.
func (b *groupFetchBundle) stillParked(got <-chan []*job.Job, what string) {
	b.t.Helper()
	before := b.st.claims.Load()
	select {
	case js := <-got:
		b.t.Fatalf("%s: the fetch returned %d jobs", what, len(js))
	case <-time.After(300 * time.Millisecond):
	}
	if n := b.st.claims.Load() - before; n > 4 {
		b.t.Fatalf("%s: the parked fetch claimed %d times in 300ms, want it asleep", what, n)
	}
	if b.e.Waiting() != 1 {
		b.t.Fatalf("%s: %d fetches parked, want the one parked again", what, b.e.Waiting())
	}
}

// woken fails unless the fetch behind got returns the job id soon.
func (b *groupFetchBundle) woken(got <-chan []*job.Job, id, what string) *job.Job {
	b.t.Helper()
	start := time.Now()
	select {
	case js := <-got:
		if len(js) != 1 || js[0].ID != id {
			b.t.Fatalf("%s: the fetch got %v, want job %s", what, js, id)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			b.t.Fatalf("%s: the fetch woke %v late", what, d)
		}
		return js[0]
	case <-time.After(5 * time.Second):
		b.t.Fatalf("%s: the fetch never woke", what)
	}
	return nil
}

// A long poll of one group sleeps through the enqueues of other groups
// (woken, it looks once and parks again) and returns as soon as a job of
// its group is enqueued.
func TestFetchOfAGroupWakesForItsGroup(t *testing.T) {
	t.Parallel()
	b := setupGroupFetch(t)
	got := b.park(FetchRequest{Queues: []string{"q", "other"}, Group: "tenant-1", Wait: 10 * time.Second})
	b.enqueue("q", "tenant-2")
	b.enqueue("q", "")
	b.enqueue("other", "")
	b.stillParked(got, "after jobs of other groups")
	id := b.enqueue("q", "tenant-1")
	if j := b.woken(got, id, "after a job of its group"); j.Group != "tenant-1" {
		t.Fatalf("the fetch got a job of group %q", j.Group)
	}
}

// A long poll of a group of an ordered queue held by its active job
// sleeps until that job is acked, whatever else is enqueued, then gets the
// group's next job.
func TestFetchOfAHeldGroupWakesWhenItFrees(t *testing.T) {
	t.Parallel()
	b := setupGroupFetch(t)
	if _, err := b.e.SetLimits(b.ctx, "events", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	first := b.enqueue("events", "order-1")
	js, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"events"}, Group: "order-1"})
	if err != nil || len(js) != 1 || js[0].ID != first {
		t.Fatalf("first fetch of the group: %v, %v", js, err)
	}
	got := b.park(FetchRequest{Queues: []string{"events"}, Group: "order-1", Wait: 10 * time.Second})
	second := b.enqueue("events", "order-1")
	b.enqueue("events", "order-2")
	b.stillParked(got, "while the group's job runs")
	if _, err := b.e.Ack(b.ctx, []job.CompleteItem{{ID: first, Token: js[0].LeaseToken}}); err != nil {
		t.Fatal(err)
	}
	b.woken(got, second, "after the group's job was acked")
}

// A fetch's worker name is what the jobs it leases show, until the next
// fetch of them; a name a store cannot keep as sent is kept in its
// job.WorkerName form.
func TestFetchRecordsItsWorker(t *testing.T) {
	t.Parallel()
	b := setupGroupFetch(t)
	id := b.enqueue("q", "")
	jobs, err := b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"q"}, Worker: "host-1\x00"})
	if err != nil || len(jobs) != 1 || jobs[0].ID != id || jobs[0].Worker != "host-1\uFFFD" {
		t.Fatalf("fetch: %+v, %v", jobs, err)
	}
	if out, err := b.e.Release(b.ctx, []job.ReleaseItem{{ID: id, Token: jobs[0].LeaseToken}}); err != nil || out[0].Err != nil {
		t.Fatalf("release: %+v, %v", out, err)
	}
	if j, err := b.e.Get(b.ctx, id); err != nil || j.State != job.StateAvailable || j.Worker != "host-1\uFFFD" {
		t.Fatalf("released job: %+v, %v; want it available, still naming its last worker", j, err)
	}
	jobs, err = b.e.Fetch(b.ctx, FetchRequest{Queues: []string{"q"}, Worker: "host-2"})
	if err != nil || len(jobs) != 1 || jobs[0].Worker != "host-2" {
		t.Fatalf("second fetch: %+v, %v", jobs, err)
	}
}
