package sqlitestore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// While the write-ahead log syncs, the writer commits the next batches
// and their fsync begins at once; none of them is answered before every
// fsync that began before theirs is done too.
func TestCommitsGoOnWhileTheLogSyncs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s.c.sync
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the store closes, on a failure too

	// An operation that holds the writer until A and B wait behind it, so
	// that its commit is handed to the syncer rather than synced in place.
	gate, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.s.do(b.ctx, 1, func(*writer) error { close(running); <-gate; return nil })
	}()
	<-running
	s.mu.Lock()
	first := s.handed + 1 // the held operation's batch
	s.beforeSync = func(covers int64) {
		if covers == first {
			close(entered)
			<-release
		}
	}
	s.mu.Unlock()
	commits := b.s.c.commits.Load()
	syncs := s.syncs.Load()
	answers := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
			answers <- err
		}()
	}
	waitFor(t, func() bool { return b.s.c.waiting.Load() == 2 })
	close(gate)
	select { // the first batch's fsync is under way and held
	case <-entered:
	case err := <-held:
		t.Fatalf("the first batch was answered (%v) with no fsync", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync began in 10 s")
	}

	// The inserts commit while that fsync is held, and their own fsync
	// runs meanwhile, yet they stay unanswered.
	waitFor(t, func() bool { return b.s.c.commits.Load() >= commits+2 })
	waitFor(t, func() bool { return s.syncs.Load() > syncs })
	select {
	case err := <-held:
		t.Fatalf("the first batch was answered (%v) before its fsync", err)
	case err := <-answers:
		t.Fatalf("an insert was answered (%v) before the fsync begun before its own", err)
	case <-time.After(50 * time.Millisecond):
	}
	free()
	for _, ch := range []chan error{held, answers, answers} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if c := b.counts("q"); c[job.StateAvailable] != 2 {
		t.Fatalf("counts %v", c)
	}
}

// A failed fsync fails the batches waiting for it and every later write:
// what the disk holds is then unknown.
func TestFailedSyncFailsTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s.c.sync
	for _, f := range s.all {
		_ = f.Close() // every later fsync fails
	}
	_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
	if !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("insert after a failed fsync: %v, want unavailable", err)
	}
	_, err = b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1, func(_ int, p *store.JobInsertParams) {
		p.Durability = job.DurabilityProcess
	}), Now: t0})
	if !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("a later write: %v, want unavailable", err)
	}
	if err := b.s.Ping(context.Background()); !errors.Is(err, job.ErrUnavailable) {
		t.Fatalf("ping after a failed fsync: %v, want unavailable", err)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A caller that commits its own batch calls the join function of its
// context (store.WithSyncJoin) once, after its commit and before the
// fsync its answer waits for: a write made in it commits before that
// fsync begins and shares it. A write that needs no fsync calls no join.
func TestWritesInTheSyncJoinShareTheFsync(t *testing.T) {
	t.Parallel()
	b := setup(t)
	syncs := b.s.c.sync.syncs.Load()
	var calls, committedBefore int
	var joined []store.InsertResult
	var joinErr error
	ctx := store.WithSyncJoin(b.ctx, func() {
		calls++
		committedBefore = int(b.s.c.sync.syncs.Load() - syncs)
		joined, joinErr = b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 2), Now: t0})
	})
	res, err := b.s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
	if err != nil || joinErr != nil {
		t.Fatalf("insert: %v; insert in the join: %v", err, joinErr)
	}
	if calls != 1 || committedBefore != 0 {
		t.Fatalf("join called %d times, %d fsyncs done before it; want once, before the fsync", calls, committedBefore)
	}
	if n := b.s.c.sync.syncs.Load() - syncs; n != 1 {
		t.Fatalf("%d fsyncs for the two writes, want the one they share", n)
	}
	for _, r := range append(res, joined...) {
		if _, err := b.s.JobGet(b.ctx, r.Job.ID); err != nil {
			t.Fatalf("job %s not stored: %v", r.Job.ID, err)
		}
	}

	relaxed := params("q", 1, func(_ int, p *store.JobInsertParams) { p.Durability = job.DurabilityProcess })
	calls = 0
	ctx = store.WithSyncJoin(b.ctx, func() { calls++ })
	if _, err := b.s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: relaxed, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("join called %d times for a write of process durability, want none", calls)
	}
}
