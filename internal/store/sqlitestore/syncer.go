package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// syncer makes the writer's commits durable behind it, so that the writer
// builds and commits the next batch while the disk syncs the last one. In
// the store's full mode the write connection commits without syncing
// (synchronous = NORMAL, which keeps the database consistent across a
// crash) and the syncer fsyncs the write-ahead log itself: once for every
// batch handed to it since its last fsync, then answers their operations
// in commit order. An answer therefore never comes before the fsync of its
// commit and of every commit before it, which is what synchronous = FULL
// gives. Checkpoints sync the log before they copy it (their connection
// syncs fully), so a frame that was not fsynced here never reaches the
// database file first.
type syncer struct {
	w    *writer
	in   chan syncBatch
	done chan struct{}
	// pending counts the batches handed over and not answered yet: while
	// it is zero, every commit before is answered.
	pending atomic.Int64
	// answered gets a signal whenever the syncer answered batches.
	answered chan struct{}
	// syncs counts the fsyncs of the log, for tests.
	syncs atomic.Int64

	mu  sync.Mutex // serialises fsyncs
	wal *os.File   // the write-ahead log, opened for its fsyncs only
	// beforeSync, set by tests under mu, runs before each fsync.
	beforeSync func()
}

// syncBatch is a committed batch whose answers wait for the syncer.
type syncBatch struct {
	ops   []*op
	start time.Time // when its commit began, for Config.OnCommit
	sync  bool      // its commit must be fsynced before the answers
}

// syncQueue bounds the batches waiting for the syncer before the writer
// waits too.
const syncQueue = 256

// newSyncer opens the write-ahead log of the database at path for w's
// fsyncs, makes what is written so far durable (the schema, the token
// epoch just taken) together with the data folder's entries, and starts
// the syncer.
func newSyncer(w *writer, path string) (*syncer, error) {
	wal, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the write-ahead log for fsyncs: %w", err)
	}
	s := &syncer{w: w, in: make(chan syncBatch, syncQueue), done: make(chan struct{}), answered: make(chan struct{}, 1), wal: wal}
	if err := s.syncNow(); err != nil {
		_ = wal.Close()
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = wal.Close()
		return nil, err
	}
	go s.run()
	return s, nil
}

// syncDir makes the entries of dir durable: the database's files.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open data folder for fsync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: fsync data folder: %w", job.ErrUnavailable, err)
	}
	return nil
}

// waitTurn waits while a batch already waits for the fsync after the one
// under way: the next commit can be answered no sooner than that one, so
// the writer gathers operations until then and commits them as one batch,
// which writes fewer pages than several small ones.
func (s *syncer) waitTurn() {
	for s.pending.Load() >= 2 {
		<-s.answered
	}
}

// idle reports whether every batch handed over has been answered.
func (s *syncer) idle() bool { return s.pending.Load() == 0 }

// hand queues the committed batch ops for its answers; sync says whether
// its commit must be fsynced first. ops is copied: the writer reuses it.
func (s *syncer) hand(ops []*op, start time.Time, sync bool) {
	s.pending.Add(1)
	s.in <- syncBatch{ops: slices.Clone(ops), start: start, sync: sync}
}

// syncNow fsyncs the write-ahead log. A failure puts the writer in its
// failed state, since what the disk holds is then unknown, and returns
// that state's error.
func (s *syncer) syncNow() error {
	s.mu.Lock()
	if s.beforeSync != nil {
		s.beforeSync()
	}
	err := syncData(s.wal)
	s.mu.Unlock()
	if err != nil {
		s.w.fail(fmt.Errorf("%w: fsync the write-ahead log: %w", job.ErrUnavailable, err))
		return s.w.failure()
	}
	s.syncs.Add(1)
	return nil
}

// run answers the batches handed over, with one fsync for all those
// waiting whenever one of them needs it, until stop.
func (s *syncer) run() {
	defer close(s.done)
	var group []syncBatch
	for b := range s.in {
		group = append(group[:0], b)
		group = s.takeWaiting(group)
		err := s.w.failure()
		if err == nil && slices.ContainsFunc(group, func(b syncBatch) bool { return b.sync }) {
			err = s.syncNow()
		}
		for _, b := range group {
			s.w.answer(b.ops, b.start, err)
		}
		s.pending.Add(-int64(len(group)))
		clear(group)
		select {
		case s.answered <- struct{}{}:
		default:
		}
	}
}

// takeWaiting appends every batch already handed over to group.
func (s *syncer) takeWaiting(group []syncBatch) []syncBatch {
	for {
		select {
		case b, ok := <-s.in:
			if !ok {
				return group
			}
			group = append(group, b)
		default:
			return group
		}
	}
}

// stop answers what was handed over and closes the log's file. The
// writer calls it once, after its last commit.
func (s *syncer) stop() error {
	close(s.in)
	<-s.done
	if err := s.wal.Close(); err != nil {
		return fmt.Errorf("close the write-ahead log: %w", err)
	}
	return nil
}
