package sqlitestore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/spoolq/spool/internal/job"
)

// syncer makes the writer's commits durable behind it, so that the writer
// builds and commits the next batch while the disk syncs the last one. In
// the store's full mode the write connection commits without syncing
// (synchronous = NORMAL, which keeps the database consistent across a
// crash) and the syncer fsyncs the write-ahead log itself, then answers
// the batches that fsync covers. An answer therefore never comes before
// an fsync that began after its commit and after every commit before it,
// which is what synchronous = FULL gives. Checkpoints sync the log before
// they copy it (their connection syncs fully), so a frame that was not
// fsynced here never reaches the database file first.
//
// Up to maxSyncs fsyncs run at once: a batch committed while the last one
// syncs starts its own fsync at once rather than after that one, and the
// disk overlaps the two. Each fsync covers every batch committed before it
// began. Their outcomes are taken in the order they began, so that a batch
// is answered only once every fsync begun before the one that covers it
// succeeded too. Each fsync under way has a descriptor of the log to
// itself: Linux reports a failed write-back once to each open file, so a
// failure that one fsync met is never hidden from another.
//
// The fsync of a batch begins once the holder of the committer's turn has
// let the turn go (dispatch): the next batch commits meanwhile. A caller
// that committed its own batch (committer.commitHere) runs the fsync
// itself (committer.syncHere), as it waits anyway, which saves waking
// another goroutine; the committer's goroutine hands it to an fsyncer and
// goes on. Until
// then the fsync has not begun, and a batch committed before it does
// joins it.
type syncer struct {
	// fails is the store's failed state, which a failed fsync enters.
	fails *failState
	// pending counts the batches handed over and not answered yet: while
	// it is zero, every commit before is answered.
	pending atomic.Int64
	// answered gets a signal whenever the syncer answered batches.
	answered chan struct{}
	// syncs counts the fsyncs of the log, for tests.
	syncs atomic.Int64

	// own is the log's descriptor for syncNow, the writer's own fsyncs.
	own *os.File
	// all are every descriptor of the log the syncer opened.
	all []*os.File
	// starts takes fsyncs to the fsyncers, goroutines that run them.
	starts   chan *syncRun
	fsyncers sync.WaitGroup

	mu sync.Mutex // guards the fields below
	// queue holds the batches handed over and not answered, in commit
	// order.
	queue []syncBatch
	// handed is the number of the last batch handed over, needed that of
	// the last one handed that must be fsynced, covered that of the last
	// batch an fsync begun or about to begin covers.
	handed, needed, covered int64
	// running are the fsyncs about to begin, under way, or done and not
	// taken yet, in the order they began; unclaimed is the last of them
	// when it waits for dispatch.
	running   []*syncRun
	unclaimed *syncRun
	// free are the descriptors no fsync holds.
	free []*os.File
	// durable is the number of the last batch known to be on disk.
	durable int64
	// drained is closed by the answer that empties the queue after stop
	// began; nil until then.
	drained chan struct{}
	// beforeSync, set by tests under mu, runs before each fsync with the
	// number of the last batch it covers (0 for the writer's own).
	beforeSync func(covers int64)
}

// maxSyncs bounds the fsyncs of the log under way at once. Two overlap
// a commit's fsync with the one before it; on a virtual disk measured
// (BENCHMARKS.md) two threads each fsyncing a file gave 1.5 times the
// fsyncs of one, and a third added little.
const maxSyncs = 2

// syncBatch is a committed batch whose answers wait for the syncer.
type syncBatch struct {
	// answer answers the batch's operations, each with its own outcome,
	// or all with the error given (the store failed).
	answer func(error)
	sync   bool  // its commit must be fsynced before the answers
	n      int64 // its number, in commit order
}

// syncRun is one fsync through file: it covers the batches up to covers,
// and err is its outcome once done is set.
type syncRun struct {
	file   *os.File
	covers int64
	done   bool
	err    error
}

// newSyncer opens the write-ahead log of the database at path for the
// writer's fsyncs, makes what is written so far durable (the schema, the
// token epoch just taken) together with the data folder's entries, and
// starts the syncer; a failed fsync enters fails.
func newSyncer(fails *failState, path string) (*syncer, error) {
	s := &syncer{fails: fails, answered: make(chan struct{}, 1), starts: make(chan *syncRun, maxSyncs)}
	for range maxSyncs + 1 {
		f, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
		if err != nil {
			s.closeFiles()
			return nil, fmt.Errorf("open the write-ahead log for fsyncs: %w", err)
		}
		s.all = append(s.all, f)
	}
	s.own, s.free = s.all[0], slices.Clone(s.all[1:])
	if err := s.syncNow(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		s.closeFiles()
		return nil, err
	}
	for range maxSyncs {
		s.fsyncers.Add(1)
		go s.fsyncer()
	}
	return s, nil
}

// closeFiles closes every descriptor of the log and returns the first
// error.
func (s *syncer) closeFiles() error {
	var err error
	for _, f := range s.all {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close the write-ahead log: %w", cerr)
		}
	}
	return err
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

// waitTurn waits while every fsync slot is taken and a batch already
// waits for the next fsync: the next commit can be answered no sooner
// than that batch, so the committer gathers operations until a slot is free
// and commits them as one batch, which writes fewer pages than several
// small ones.
func (s *syncer) waitTurn() {
	for {
		s.mu.Lock()
		busy := len(s.running) >= maxSyncs && s.needed > s.covered && s.fails.failure() == nil
		s.mu.Unlock()
		if !busy {
			return
		}
		<-s.answered
	}
}

// idle reports whether every batch handed over has been answered.
func (s *syncer) idle() bool { return s.pending.Load() == 0 }

// hand queues a committed batch, which answer answers; sync says whether
// its commit must be fsynced first. The batch joins the fsync that waits
// for dispatch, or gets one of its own that does when a slot is free.
// The holder of the committer's turn calls it, and dispatch once it has
// let the turn go.
func (s *syncer) hand(answer func(error), sync bool) {
	s.pending.Add(1)
	s.mu.Lock()
	s.handed++
	if sync {
		s.needed = s.handed
	}
	s.queue = append(s.queue, syncBatch{answer: answer, sync: sync, n: s.handed})
	switch {
	case s.unclaimed != nil:
		s.unclaimed.covers, s.covered = s.handed, s.handed
	case s.canBegin():
		s.unclaimed = s.begin()
	}
	ready := s.takeReady()
	s.mu.Unlock()
	s.answer(ready, nil)
}

// awaitsDispatch reports whether an fsync waits for dispatch.
func (s *syncer) awaitsDispatch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unclaimed != nil
}

// dispatch begins the fsync that waits for it, if any: on the calling
// goroutine, which returns once it is done and its batches answered, when
// inPlace is set, and on an fsyncer otherwise.
func (s *syncer) dispatch(inPlace bool) {
	s.mu.Lock()
	r := s.unclaimed
	s.unclaimed = nil
	s.mu.Unlock()
	switch {
	case r == nil:
	case inPlace:
		s.run(r)
	default:
		s.starts <- r // never blocks: at most maxSyncs runs are under way
	}
}

// canBegin reports whether an fsync should begin: a batch handed over
// waits for one that covers it, and a slot is free. (A run waiting for
// dispatch covers every batch handed over, so then none waits.) The
// caller holds mu.
func (s *syncer) canBegin() bool {
	return s.needed > s.covered && len(s.running) < maxSyncs
}

// begin makes an fsync covering every batch handed over, on a free
// descriptor, and counts it as under way. A slot must be free. The caller
// holds mu.
func (s *syncer) begin() *syncRun {
	s.covered = s.handed
	r := &syncRun{file: s.free[len(s.free)-1], covers: s.covered}
	s.free = s.free[:len(s.free)-1]
	s.running = append(s.running, r)
	return r
}

// fsyncer runs the fsyncs handed to it until stop.
func (s *syncer) fsyncer() {
	defer s.fsyncers.Done()
	for r := range s.starts {
		s.run(r)
	}
}

// run runs the fsync r, takes the outcomes of the fsyncs done in the order
// they began, answers the batches now durable (or all of them, once the
// store failed), and hands an fsyncer the next fsync when a batch waits for
// one.
func (s *syncer) run(r *syncRun) {
	err := s.fsync(r.file, r.covers)
	if err == nil {
		// A store that failed meanwhile answers nothing more as durable:
		// what the disk holds is then unknown.
		err = s.fails.failure()
	}
	s.mu.Lock()
	r.done, r.err = true, err
	s.takeRuns()
	var next *syncRun
	if s.canBegin() {
		next = s.begin()
	}
	ready := s.takeReady()
	failed := s.failedBatches()
	s.mu.Unlock()
	if next != nil {
		s.starts <- next
	}
	s.answer(ready, nil)
	s.answer(failed, s.fails.failure())
}

// takeRuns takes the outcomes of the fsyncs done, in the order they began,
// up to the first not done, and frees their descriptors. The caller holds
// mu.
func (s *syncer) takeRuns() {
	for len(s.running) > 0 && s.running[0].done {
		r := s.running[0]
		s.running = s.running[1:]
		s.free = append(s.free, r.file)
		if r.err == nil {
			s.durable = max(s.durable, r.covers)
		}
	}
}

// takeReady removes from the queue the batches that may be answered now:
// in commit order, each that is durable or needs no fsync. The caller
// holds mu.
func (s *syncer) takeReady() []syncBatch {
	k := 0
	for k < len(s.queue) && (s.queue[k].n <= s.durable || !s.queue[k].sync) {
		k++
	}
	return s.take(k)
}

// failedBatches removes every queued batch once the store has failed,
// with no fsync under way that could still answer one. The caller holds
// mu.
func (s *syncer) failedBatches() []syncBatch {
	if len(s.running) > 0 || s.fails.failure() == nil {
		return nil
	}
	return s.take(len(s.queue))
}

// take removes the first k batches of the queue and returns them. The
// caller holds mu.
func (s *syncer) take(k int) []syncBatch {
	if k == 0 {
		return nil
	}
	out := slices.Clone(s.queue[:k])
	clear(s.queue[:k])
	if k == len(s.queue) {
		s.queue = s.queue[:0] // empty: the next batch starts the array over
	} else {
		s.queue = s.queue[k:]
	}
	s.pending.Add(-int64(k))
	if len(s.queue) == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
	return out
}

// answer answers batches, each with err when that is set (the store
// failed) and with the outcomes of its operations otherwise, and tells
// waitTurn.
func (s *syncer) answer(batches []syncBatch, err error) {
	for _, b := range batches {
		b.answer(err)
	}
	select {
	case s.answered <- struct{}{}:
	default:
	}
}

// syncNow fsyncs the write-ahead log on the writer's own descriptor. A
// failure puts the store in its failed state, since what the disk holds
// is then unknown, and returns that state's error.
func (s *syncer) syncNow() error {
	return s.fsync(s.own, 0)
}

// fsync fsyncs the log through f for the batches up to covers. A failure
// puts the store in its failed state and returns that state's error.
func (s *syncer) fsync(f *os.File, covers int64) error {
	s.mu.Lock()
	before := s.beforeSync
	s.mu.Unlock()
	if before != nil {
		before(covers)
	}
	if err := syncData(f); err != nil {
		s.fails.fail(fmt.Errorf("%w: fsync the write-ahead log: %w", job.ErrUnavailable, err))
		return s.fails.failure()
	}
	s.syncs.Add(1)
	return nil
}

// stop answers what was handed over and closes the log's descriptors. The
// committer calls it once, after its last commit.
func (s *syncer) stop() error {
	s.dispatch(false)
	s.mu.Lock()
	var drained chan struct{}
	if len(s.queue) > 0 {
		drained = make(chan struct{})
		s.drained = drained
	}
	s.mu.Unlock()
	if drained != nil {
		<-drained
	}
	close(s.starts)
	s.fsyncers.Wait()
	return s.closeFiles()
}
