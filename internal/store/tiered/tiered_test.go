package tiered

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlitestore"
	"github.com/spoolq/spool/internal/store/storetest"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// dirs remembers the folder of every store open opened, for reopening.
var dirs sync.Map

// open returns a tiered store over real SQLite stores in dir.
func open(tb testing.TB, dir string) *Store {
	tb.Helper()
	disk, mem := openTiers(tb, dir)
	s, err := New(context.Background(), disk, mem)
	if err != nil {
		tb.Fatal(err)
	}
	dirs.Store(s, dir)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// openTiers opens the durable and the memory SQLite stores of a tiered
// store in dir.
func openTiers(tb testing.TB, dir string) (disk, mem *sqlitestore.Store) {
	tb.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	disk, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: filepath.Join(dir, "disk"), Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	mem, err = sqlitestore.Open(ctx, sqlitestore.Config{Dir: filepath.Join(dir, "mem"), Memory: true, TokensFrom: disk, Logger: logger})
	if err != nil {
		tb.Fatal(err)
	}
	return disk, mem
}

func reopen(tb testing.TB, s store.Store) store.Store {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	dir, _ := dirs.Load(s)
	return open(tb, dir.(string))
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open:         func(tb testing.TB) store.Store { return open(tb, tb.TempDir()) },
		Reopen:       reopen,
		Durabilities: []job.Durability{job.DurabilityFull, job.DurabilityProcess, job.DurabilityMemory},
	})
}

func memJobs(queue string, n int, d job.Durability) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			ID: job.NewID(t0), Queue: queue, Kind: "k", State: job.StateAvailable, RunAt: t0, MaxAttempts: 3,
			LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Second},
			Durability: d,
		}
	}
	return ps
}

func insert(t *testing.T, s *Store, ps ...store.JobInsertParams) []string {
	t.Helper()
	res, err := s.JobInsertMany(t.Context(), &store.JobInsertManyParams{Jobs: ps, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(res))
	for i, r := range res {
		ids[i] = r.Job.ID
	}
	return ids
}

// Memory jobs live in the memory tier: they are handed out first, acked
// there, listed after the durable ones, counted with them, and gone after
// a restart, while the durable ones stay.
func TestMemoryJobsRouteToTheMemoryTier(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := t.Context()
	durable := insert(t, s, memJobs("q", 2, job.DurabilityFull)...)
	memory := insert(t, s, memJobs("q", 2, job.DurabilityMemory)...)
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: append(memJobs("q", 1, job.DurabilityFull), memJobs("q", 1, job.DurabilityMemory)...), Now: t0}); err == nil {
		t.Fatal("a batch mixing memory and full jobs was accepted")
	}
	q, err := s.QueueGet(ctx, "q")
	if err != nil || q.Counts[job.StateAvailable] != 4 {
		t.Fatalf("queue: %+v %v", q, err)
	}
	page, err := s.JobList(ctx, &job.ListParams{Queue: "q", Limit: 3})
	if err != nil || len(page.Jobs) != 3 || page.Next == "" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	rest, err := s.JobList(ctx, &job.ListParams{Queue: "q", Limit: 3, Cursor: page.Next})
	if err != nil || len(rest.Jobs) != 1 || rest.Next != "" {
		t.Fatalf("second page: %+v %v", rest, err)
	}
	listed := []string{page.Jobs[0].ID, page.Jobs[1].ID, page.Jobs[2].ID, rest.Jobs[0].ID}
	for i, want := range append(append([]string{}, durable...), memory...) {
		if listed[i] != want {
			t.Fatalf("listing order %v, want durable %v then memory %v", listed, durable, memory)
		}
	}
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 3, Now: t0}))
	if err != nil || len(js) != 3 || js[0].Durability != job.DurabilityMemory || js[1].Durability != job.DurabilityMemory || js[2].Durability != job.DurabilityFull {
		t.Fatalf("claim: %v %+v", err, js)
	}
	items := make([]job.CompleteItem, len(js))
	for i, j := range js {
		items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
	}
	out, err := s.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.State != job.StateCompleted {
			t.Fatalf("ack %d: %+v", i, o)
		}
	}
	if got, err := s.JobGet(ctx, memory[0]); err != nil || got.State != job.StateCompleted {
		t.Fatalf("memory job after ack: %+v %v", got, err)
	}
	if err := s.QueueSetPaused(ctx, "q", true); err != nil {
		t.Fatal(err)
	}
	insert(t, s, memJobs("q", 1, job.DurabilityMemory)...)
	s2 := reopen(t, s)
	if _, err := s2.JobGet(ctx, memory[0]); !errors.Is(err, job.ErrNotFound) {
		t.Fatalf("a memory job outlived the restart: %v", err)
	}
	if _, err := s2.JobGet(ctx, durable[0]); err != nil {
		t.Fatalf("a durable job was lost in the restart: %v", err)
	}
	insert(t, s2.(*Store), memJobs("q", 1, job.DurabilityMemory)...)
	if js, err := store.ClaimedJobs(s2.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 5, Now: t0})); err != nil || len(js) != 0 {
		t.Fatalf("a paused queue handed out %d jobs after the restart (%v)", len(js), err)
	}
}

// A worker's active jobs count, and list, across both tiers: its memory
// jobs after its durable ones.
func TestWorkerJobsSpanTheTiers(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := t.Context()
	durable := insert(t, s, memJobs("q", 2, job.DurabilityFull)...)
	memory := insert(t, s, memJobs("q", 1, job.DurabilityMemory)...)
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 3, Worker: "w", Now: t0}))
	if err != nil || len(js) != 3 {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	n, err := s.JobCountActiveByWorker(ctx, &store.JobCountActiveByWorkerParams{Workers: []string{"w", "v"}})
	if err != nil || len(n) != 1 || n["w"] != 3 {
		t.Fatalf("active jobs of w across the tiers: %v, %v", n, err)
	}
	page, err := s.JobList(ctx, &job.ListParams{State: job.StateActive, Worker: "w", Limit: 2})
	if err != nil || len(page.Jobs) != 2 || page.Next == "" {
		t.Fatalf("first page of w's jobs: %+v, %v", page, err)
	}
	rest, err := s.JobList(ctx, &job.ListParams{State: job.StateActive, Worker: "w", Limit: 2, Cursor: page.Next})
	if err != nil || len(rest.Jobs) != 1 || rest.Next != "" {
		t.Fatalf("second page of w's jobs: %+v, %v", rest, err)
	}
	got := []string{page.Jobs[0].ID, page.Jobs[1].ID, rest.Jobs[0].ID}
	if want := append(append([]string{}, durable...), memory...); got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("w's jobs %v, want the durable %v then the memory %v", got, durable, memory)
	}
}
