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

// While the write-ahead log syncs, the writer commits the next batches;
// none of them is answered before an fsync that began after its commit.
func TestCommitsGoOnWhileTheLogSyncs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s.w.sync
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before the store closes, on a failure too
	first := true
	s.mu.Lock()
	s.beforeSync = func() {
		if first {
			first = false
			close(entered)
			<-release
		}
	}
	s.mu.Unlock()

	// An operation that holds the writer until A and B wait behind it, so
	// that its commit is handed to the syncer rather than synced in place.
	gate, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.s.do(b.ctx, 1, func(*writer) error { close(running); <-gate; return nil })
	}()
	<-running
	commits := b.s.w.commits.Load()
	answers := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
			answers <- err
		}()
	}
	waitFor(t, func() bool { return b.s.w.waiting.Load() == 2 })
	close(gate)
	select { // the first batch's fsync is under way and held
	case <-entered:
	case err := <-held:
		t.Fatalf("the first batch was answered (%v) with no fsync", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no fsync began in 10 s")
	}

	// The inserts commit while that fsync is held, and stay unanswered.
	waitFor(t, func() bool { return b.s.w.commits.Load() >= commits+2 })
	select {
	case err := <-held:
		t.Fatalf("the first batch was answered (%v) before its fsync", err)
	case err := <-answers:
		t.Fatalf("an insert was answered (%v) before an fsync after its commit", err)
	case <-time.After(50 * time.Millisecond):
	}
	syncs := s.syncs.Load()
	free()
	for _, ch := range []chan error{held, answers, answers} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if got := s.syncs.Load(); got <= syncs {
		t.Fatalf("answers came with %d fsyncs after the held one, want at least one", got-syncs)
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
	s := b.s.w.sync
	s.mu.Lock()
	_ = s.wal.Close() // every later fsync fails
	s.mu.Unlock()
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
