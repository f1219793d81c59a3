package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// op is one store call waiting for the writer. fn runs on the writer
// inside the batch transaction. It must refuse (with a sentinel of
// package job or an *job.InputError) before it writes anything; any other
// error makes the committer roll back and rerun the batch's operations one
// transaction each (see committer.commit).
type op struct {
	ctx     context.Context
	fn      func(*writer) error
	relaxed func(*writer) bool // nil: the commit must be fsynced
	weight  int
	done    chan error
	err     error
	// queued is set when the operation went through ops, where
	// committer.waiting counts it until it joins a batch.
	queued bool
}

// committer runs the writer's operations in group commits. Callers hand
// it operations (do); whoever holds its turn, its own goroutine or a
// caller that found it idle, runs every operation waiting in one
// transaction of the writer, commits once, and answers each caller once
// the commit is as durable as its operations need (the syncer fsyncs
// behind it).
type committer struct {
	w      *writer
	cfg    Config
	logger *slog.Logger
	failState

	ops  chan *op
	done chan struct{}
	// waiting counts the operations handed to ops that have not joined a
	// batch yet, including one the committer's goroutine took and holds
	// while it waits for the turn.
	waiting atomic.Int64
	// turn is held by whoever runs a batch: the committer's goroutine, or
	// a caller that found it idle and commits its operation itself (see
	// do). The fields below belong to its holder, but for those that are
	// atomic or have a lock of their own.
	turn sync.Mutex
	// shared is set when the last batch had more than one operation.
	shared bool
	// gathered is the batch being run, kept to reuse its array.
	gathered []*op
	// fsync is whether the running batch's commit must reach the disk
	// before its answers (see chooseSync).
	fsync bool
	// sync fsyncs the commits in the store's full mode; nil when no
	// commit waits for the disk.
	sync *syncer
	// ckpt copies the WAL into the database file beside the writer.
	ckpt *checkpointer
	// tokensFrom is the committer of the store whose fencing tokens the
	// writer hands out (Config.TokensFrom); nil for its own.
	tokensFrom *committer

	commits atomic.Int64 // successful group commits, for tests and metrics
	// unsynced counts the commits that did not wait for the disk.
	unsynced atomic.Int64
	// full is set when a write failed for a full disk; readiness reports
	// it until the disk has room again (see Store.Ping).
	full atomic.Bool

	// mu guards closed; callers hold it shared while they hand an
	// operation over, so that stop never races a send.
	mu     sync.RWMutex
	closed bool
}

func newCommitter(w *writer, cfg Config) *committer {
	return &committer{w: w, cfg: cfg, logger: cfg.Logger, failState: failState{logger: cfg.Logger},
		ops: make(chan *op, cfg.MaxBatchOps), done: make(chan struct{})}
}

var errClosed = fmt.Errorf("store closed: %w", job.ErrUnavailable)

// check reports errClosed once stop began.
func (c *committer) check() error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return errClosed
	}
	return nil
}

// do runs fn in the next group commit and waits for the commit. weight is
// how much of a batch fn uses (jobs or items, at least one). relaxed, when
// set, run before the batch begins, reports whether everything fn will
// write is of process durability (or nothing at all): a batch made only of
// such operations commits without waiting for the disk.
func (c *committer) do(ctx context.Context, weight int, relaxed func(*writer) bool, fn func(*writer) error) error {
	o := &op{ctx: ctx, fn: fn, relaxed: relaxed, weight: max(weight, 1), done: make(chan error, 1)}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return errClosed
	}
	if c.waiting.Load() == 0 && c.turn.TryLock() {
		if !c.shared {
			c.commitHere(o)
			c.mu.RUnlock()
			c.syncHere(ctx)
			return <-o.done
		}
		c.turn.Unlock()
	}
	o.queued = true
	c.waiting.Add(1)
	select {
	case c.ops <- o:
	case <-ctx.Done():
		c.waiting.Add(-1)
		c.mu.RUnlock()
		return ctx.Err()
	}
	c.mu.RUnlock()
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitHere runs o's batch on the caller's goroutine, which found the
// committer idle and holds its turn: a lone caller then saves two
// hand-overs between goroutines, to the committer's and back, each a
// thread woken on a machine with an idle core. Operations queued meanwhile
// join the batch, as they would the committer's. It is not used right
// after a shared batch: under load the committer's goroutine, which lets
// callers join before it gathers (letCallersJoin), makes larger batches
// (at 50 producers, about 8 jobs a commit against 6, and 4 % more
// enqueues a second at full durability). The caller holds mu shared, so
// ops stays open. It releases the turn; the caller then runs the fsync
// its batch waits for (syncHere), so that the next batch commits
// meanwhile. o is answered once the batch is durable, which, when both
// fsyncs are under way, may be after syncHere returns.
func (c *committer) commitHere(o *op) {
	for next := o; next != nil; {
		next, _ = c.runBatch(next)
	}
	c.turn.Unlock()
}

// syncHere runs the fsync that waits for dispatch, if any, on the caller's
// goroutine, after commitHere. When one waits, it first calls the join
// function of ctx (store.WithSyncJoin): the writes made there commit
// before the fsync begins, and share it. The caller holds mu no more, so
// that join may write through the store; a stop meanwhile hands the fsync
// to an fsyncer (syncer.stop), and dispatch then finds none.
func (c *committer) syncHere(ctx context.Context) {
	if c.sync == nil {
		return
	}
	if join := store.SyncJoin(ctx); join != nil && c.sync.awaitsDispatch() {
		join()
	}
	c.sync.dispatch(true)
}

// stop refuses every later operation, runs last after the operations
// already handed over, and ends the committer's goroutine once they are
// all answered. It returns last's outcome.
func (c *committer) stop(last func(*writer) error) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	o := &op{ctx: context.Background(), fn: last, weight: 1, done: make(chan error, 1)}
	c.ops <- o
	err := <-o.done
	close(c.ops)
	<-c.done
	return err
}

// run is the committer's goroutine: it takes every operation waiting (up
// to MaxBatchOps of weight) and commits them together, until ops is
// closed and drained.
func (c *committer) run() {
	defer close(c.done)
	defer c.stopSync()
	var next *op
	open := true
	for open {
		if next == nil {
			o, ok := <-c.ops
			if !ok {
				return
			}
			next = o
		}
		c.turn.Lock()
		next, open = c.runBatch(next)
		c.turn.Unlock()
		if c.sync != nil {
			c.sync.dispatch(false)
		}
	}
}

// runBatch commits first together with the operations waiting behind it,
// up to MaxBatchOps of weight. It returns the operation that did not fit,
// if any, and whether ops is still open. The caller holds turn.
func (c *committer) runBatch(first *op) (next *op, open bool) {
	if c.sync != nil {
		c.sync.waitTurn()
	}
	if c.shared {
		c.letCallersJoin()
	}
	batch, next, open := c.gather(c.gathered[:0], first)
	c.shared = len(batch) > 1
	c.commit(batch)
	clear(batch)
	c.gathered = batch
	if c.ckpt.behind.Load() {
		c.catchUpWAL()
	}
	return next, open
}

// Bounds of letCallersJoin.
const (
	joinYields = 4  // yields at most
	joinEnough = 64 // operations waiting that make a batch without them
)

// letCallersJoin yields to the scheduler while more operations keep
// arriving, a few times at most. Under concurrent load the handlers the
// last commit answered are about to queue their next operations; letting
// them run first puts those in this batch rather than the next, so that a
// commit carries more operations (measured at 50 producers over the
// stream, process durability: about 4.6 operations a commit without it,
// 10 with it, and 5–9 % more enqueues a second). A lone caller never
// waits for it: it follows only a shared batch.
func (c *committer) letCallersJoin() {
	for i, n := 0, -1; i < joinYields && len(c.ops) > n && len(c.ops) < joinEnough; i++ {
		n = len(c.ops)
		runtime.Gosched()
	}
}

// gather appends first and then every operation already waiting to batch,
// up to MaxBatchOps of weight. It returns the operation that did not fit,
// if any, and whether ops is still open. It never waits.
func (c *committer) gather(batch []*op, first *op) (_ []*op, next *op, open bool) {
	batch = append(batch, c.joined(first))
	weight := first.weight
	for weight < c.cfg.MaxBatchOps {
		select {
		case o, ok := <-c.ops:
			if !ok {
				return batch, nil, false
			}
			if weight+o.weight > c.cfg.MaxBatchOps {
				return batch, o, true
			}
			batch = append(batch, c.joined(o))
			weight += o.weight
		default:
			return batch, nil, true
		}
	}
	return batch, nil, true
}

// joined notes that o joins a batch and returns it.
func (c *committer) joined(o *op) *op {
	if o.queued {
		c.waiting.Add(-1)
	}
	return o
}

// commit runs batch in one transaction and answers every operation after
// COMMIT returned.
//
// Operations run without savepoints: an operation that refuses (not found,
// lease lost, invalid state, bad input) must do so before it writes
// anything, so its refusal leaves the transaction clean. Any other error
// may have left partial writes behind: the whole transaction is rolled back
// and every operation of the batch runs again in a transaction of its own,
// so that the failure stays with the operation that caused it.
func (c *committer) commit(batch []*op) {
	if err := c.failure(); err != nil {
		answerAll(batch, err)
		return
	}
	if err := c.renewTokens(); err != nil {
		c.abort(batch, err)
		return
	}
	c.chooseSync(batch)
	split, err := c.commitTogether(batch)
	if err != nil {
		c.abort(batch, err)
		return
	}
	if !split {
		return
	}
	for _, o := range batch {
		if err := c.failure(); err != nil {
			o.done <- err
			continue
		}
		if _, err := c.commitTogether([]*op{o}); err != nil {
			c.abort([]*op{o}, err)
		}
	}
}

// commitTogether runs ops in one transaction. When an operation fails in a
// way that may have left partial writes, it rolls back, resynchronises the
// in-memory state and reports split (with a single operation it answers
// that operation with its error instead). It answers the operations once
// they are committed. err means the transaction itself broke and nobody
// was answered.
func (c *committer) commitTogether(ops []*op) (split bool, err error) {
	var start time.Time
	if c.cfg.OnCommit != nil {
		start = time.Now()
	}
	if err := c.w.begin(); err != nil {
		return false, err
	}
	for _, o := range ops {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		var clean bool
		if clean, o.err = c.w.apply(o.fn); clean {
			continue
		}
		if err := c.w.abandon(); err != nil {
			return false, err
		}
		if err := c.w.resync(); err != nil {
			return false, fmt.Errorf("roll back batch: %w", err)
		}
		if len(ops) > 1 {
			return true, nil
		}
		if fatal(o.err) {
			c.fail(mapErr(o.err))
		}
		c.noteFull(o.err)
		o.done <- mapErr(o.err)
		return false, nil
	}
	if err := c.w.commit(); err != nil {
		return false, err
	}
	c.commits.Add(1)
	if !c.fsync {
		c.unsynced.Add(1)
	}
	c.settle(ops, start)
	return false, nil
}

// settle answers the operations of a committed batch once the commit is as
// durable as they need. A batch that needs no fsync, with no earlier batch
// waiting for one, is answered at once; otherwise the syncer takes it, and
// its fsync begins once the turn's holder lets the turn go (see
// syncer.dispatch), while the next batch commits.
func (c *committer) settle(ops []*op, start time.Time) {
	if c.sync == nil || (!c.fsync && c.sync.idle()) {
		c.answer(ops, start, c.failure())
		return
	}
	ops = slices.Clone(ops) // the batch's array is reused
	c.sync.hand(func(err error) { c.answer(ops, start, err) }, c.fsync)
}

// answer answers the operations of a batch whose commit began at start
// and is now durable: each with its own outcome, or all with err when
// the store failed before the commit could be made durable. It runs on
// the goroutine of the turn's holder or of the syncer.
func (c *committer) answer(ops []*op, start time.Time, err error) {
	// The checkpointer copies the commit now, not while its fsync runs.
	c.ckpt.nudge()
	if c.cfg.OnCommit != nil && err == nil {
		jobs := 0
		for _, o := range ops {
			jobs += o.weight
		}
		c.cfg.OnCommit(store.CommitStats{Elapsed: time.Since(start), Calls: len(ops), Jobs: jobs})
	}
	for _, o := range ops {
		if err != nil {
			o.done <- err
		} else {
			o.done <- o.err
		}
	}
}

func answerAll(batch []*op, err error) {
	for _, o := range batch {
		o.done <- err
	}
}

// stopSync answers every batch the syncer holds and stops it.
func (c *committer) stopSync() {
	if c.sync == nil {
		return
	}
	if err := c.sync.stop(); err != nil {
		c.logger.Error("sqlitestore: stop syncing", "err", err)
	}
}

// abort rolls the batch back and answers every operation with err. The
// in-memory state is rebuilt from the database; an I/O failure makes the
// store refuse further writes, since what reached the disk is unknown.
func (c *committer) abort(batch []*op, err error) {
	_ = c.w.abandon()
	mapped := mapErr(err)
	c.noteFull(err)
	if fatal(err) {
		c.fail(mapped)
	} else if rerr := c.w.resync(); rerr != nil {
		c.fail(mapErr(rerr))
	}
	c.logger.Error("sqlitestore: batch not committed", "ops", len(batch), "err", err)
	answerAll(batch, mapped)
}

// chooseSync sets whether the batch's commit must reach the disk before
// its answers: it must in the store's full mode unless every operation of
// the batch is relaxed.
func (c *committer) chooseSync(batch []*op) {
	c.fsync = false
	if c.sync == nil {
		return
	}
	for _, o := range batch {
		if o.relaxed == nil || !o.relaxed(c.w) {
			c.fsync = true
			return
		}
	}
}

// noteFull records a write that failed for a full disk.
func (c *committer) noteFull(err error) {
	if errors.Is(mapErr(err), job.ErrStorageFull) {
		c.full.Store(true)
	}
}

// catchUpWAL checkpoints the WAL on the writer's connection, so that the
// next commit can start it over; the checkpointer found it too long.
func (c *committer) catchUpWAL() {
	frames, copied, err := checkpoint(context.Background(), c.w.conn.QueryRowContext)
	if err != nil {
		c.logger.Warn("sqlitestore: checkpoint failed", "err", err)
		return
	}
	if copied == frames {
		c.ckpt.behind.Store(false)
	}
}

// renewTokens moves the writer's tokens to a new epoch, in a transaction
// of its own, once the current one is half used. A store that takes
// another store's tokens has that store's committer do it, by a call of
// its own.
func (c *committer) renewTokens() error {
	if !c.w.tokens.due() {
		return nil
	}
	if c.tokensFrom != nil {
		if err := c.tokensFrom.do(context.Background(), 1, nil, func(*writer) error { return nil }); err != nil {
			return fmt.Errorf("renew tokens of the durable store: %w", err)
		}
		return nil
	}
	epoch, err := nextEpoch(context.Background(), c.w.conn)
	if err != nil {
		return err
	}
	if c.sync != nil {
		// No token of the new epoch goes out before the epoch is on disk.
		if err := c.sync.syncNow(); err != nil {
			return err
		}
	}
	c.w.tokens.start(epoch)
	return nil
}
