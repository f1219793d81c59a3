package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// op is one store call waiting for the writer. fn runs on the writer
// goroutine inside the batch transaction. It must refuse (with a sentinel
// of package job or an *job.InputError) before it writes anything; any
// other error makes the writer roll back and rerun the batch's operations
// one transaction each (see writer.commit).
type op struct {
	ctx     context.Context
	fn      func(*writer) error
	relaxed func(*writer) bool // nil: the commit must be fsynced
	weight  int
	done    chan error
	err     error
	// queued is set when the operation went through ops, where
	// writer.waiting counts it until it joins a batch.
	queued bool
}

// wqueue is the writer's working view of one known queue.
type wqueue struct {
	name   string
	paused bool
	win    *window
	// limits are the queue's flow control; grouped is set once its jobs
	// have groups, when claims go by group (see flow.go) and win is not
	// kept.
	limits  job.Limits
	grouped bool
	flow    flowState
	// settings are the queue's settings (settings.go).
	settings job.QueueSettings
}

// flowControlled reports whether claims of q go through its limits and
// groups rather than straight from its window.
func (q *wqueue) flowControlled() bool { return q.grouped || !q.limits.IsZero() }

// writer owns the write connection and every piece of in-memory state
// derived from the database (ready windows, paused flags, leases); only the
// holder of its turn changes them. Callers reach it through Store.do.
type writer struct {
	conn   *sql.Conn
	st     statements
	cfg    Config
	logger *slog.Logger
	cat    *catalog

	ops  chan *op
	done chan struct{}
	// waiting counts the operations handed to ops that have not joined a
	// batch yet, including one the writer's goroutine took and holds
	// while it waits for the turn.
	waiting atomic.Int64
	// turn is held by whoever runs a batch: the writer's goroutine, or a
	// caller that found the writer idle and commits its operation itself
	// (see Store.doRelaxed). The fields below belong to its holder, but
	// for those that are atomic or have a lock of their own.
	turn sync.Mutex
	// shared is set when the last batch had more than one operation.
	shared bool
	// gathered is the batch being run, kept to reuse its array.
	gathered []*op

	queues map[string]*wqueue
	// fx collects the catalog changes of the running operation, batch those
	// of the batch's successful operations.
	fx, batch *delta
	// touched is set when the running operation changed queues or windows,
	// which must then be rebuilt if it fails.
	touched bool

	// leases are the active jobs; undo records the running batch's changes
	// to them so that a batch that does not commit can be taken back.
	leases *leaseTable
	undo   undo
	tokens *tokenSource
	// cache bounds the memory windows spend on cached jobs.
	cache *bodyCache
	// stale are the seqs of rows of grouped queues that left the
	// available state since the last sweep (flow.go).
	stale []int64
	// lanes are the consumer groups of each queue (see lanes.go).
	lanes map[string][]laneGroup
	// nextSeq is the seq of the next inserted job: inserts assign seqs
	// themselves.
	nextSeq int64
	// fsync is whether the running batch's commit must reach the disk
	// before its answers (see chooseSync).
	fsync bool
	// sync fsyncs the commits behind the writer in the store's full mode;
	// nil when no commit waits for the disk.
	sync *syncer

	commits atomic.Int64 // successful group commits, for tests and metrics
	// unsynced counts the commits that did not wait for the disk.
	unsynced atomic.Int64
	// full is set when a write failed for a full disk; readiness reports
	// it until the disk has room again (see Store.Ping).
	full atomic.Bool

	// ckpt copies the WAL into the database file beside the writer.
	ckpt *checkpointer

	failMu sync.Mutex
	failed error // set when the database can no longer be trusted
}

func newWriter(ctx context.Context, conn *sql.Conn, cfg Config, cat *catalog, leases *leaseTable, tokens *tokenSource) (*writer, error) {
	w := &writer{
		conn:   conn,
		cfg:    cfg,
		logger: cfg.Logger,
		cat:    cat,
		ops:    make(chan *op, cfg.MaxBatchOps),
		done:   make(chan struct{}),
		fx:     newDelta(),
		batch:  newDelta(),
		leases: leases,
		tokens: tokens,
		cache:  &bodyCache{limit: cfg.CacheBytes},
	}
	// Temporary tables stay in memory, the WAL file shrinks back after a
	// burst, and commits leave checkpoints to the checkpointer.
	for _, pragma := range []string{`PRAGMA temp_store = MEMORY`, fmt.Sprintf(`PRAGMA journal_size_limit = %d`, walSizeLimit),
		`PRAGMA wal_autocheckpoint = 0`} {
		if _, err := conn.ExecContext(ctx, pragma); err != nil {
			return nil, fmt.Errorf("configure write connection: %w", err)
		}
	}
	if err := conn.QueryRowContext(ctx, sqlMaxSeq).Scan(&w.nextSeq); err != nil {
		return nil, fmt.Errorf("read the last seq: %w", err)
	}
	w.nextSeq++
	if err := w.st.prepare(ctx, conn); err != nil {
		w.st.close()
		return nil, err
	}
	if err := w.resync(); err != nil {
		w.st.close()
		return nil, err
	}
	if err := w.loadRateLogs(); err != nil {
		w.st.close()
		return nil, err
	}
	return w, nil
}

// close releases the statements and the connection. The run loop must have
// ended.
func (w *writer) close() error {
	w.st.close()
	if err := w.conn.Close(); err != nil {
		return fmt.Errorf("close write connection: %w", err)
	}
	return nil
}

// run is the writer goroutine: it takes every operation waiting (up to
// MaxBatchOps of weight) and commits them together, until ops is closed and
// drained.
func (w *writer) run() {
	defer close(w.done)
	defer w.stopSync()
	var next *op
	open := true
	for open {
		if next == nil {
			o, ok := <-w.ops
			if !ok {
				return
			}
			next = o
		}
		w.turn.Lock()
		next, open = w.runBatch(next)
		w.turn.Unlock()
		if w.sync != nil {
			w.sync.dispatch(false)
		}
	}
}

// runBatch commits first together with the operations waiting behind it,
// up to MaxBatchOps of weight. It returns the operation that did not fit,
// if any, and whether ops is still open. The caller holds turn.
func (w *writer) runBatch(first *op) (next *op, open bool) {
	if w.sync != nil {
		w.sync.waitTurn()
	}
	if w.shared {
		w.letCallersJoin()
	}
	batch, next, open := w.gather(w.gathered[:0], first)
	w.shared = len(batch) > 1
	w.commit(batch)
	clear(batch)
	w.gathered = batch
	if w.ckpt.behind.Load() {
		w.catchUpWAL()
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
func (w *writer) letCallersJoin() {
	for i, n := 0, -1; i < joinYields && len(w.ops) > n && len(w.ops) < joinEnough; i++ {
		n = len(w.ops)
		runtime.Gosched()
	}
}

// gather appends first and then every operation already waiting to batch,
// up to MaxBatchOps of weight. It returns the operation that did not fit,
// if any, and whether ops is still open. It never waits.
func (w *writer) gather(batch []*op, first *op) (_ []*op, next *op, open bool) {
	batch = append(batch, w.joined(first))
	weight := first.weight
	for weight < w.cfg.MaxBatchOps {
		select {
		case o, ok := <-w.ops:
			if !ok {
				return batch, nil, false
			}
			if weight+o.weight > w.cfg.MaxBatchOps {
				return batch, o, true
			}
			batch = append(batch, w.joined(o))
			weight += o.weight
		default:
			return batch, nil, true
		}
	}
	return batch, nil, true
}

// joined notes that o joins a batch and returns it.
func (w *writer) joined(o *op) *op {
	if o.queued {
		w.waiting.Add(-1)
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
func (w *writer) commit(batch []*op) {
	if err := w.failure(); err != nil {
		w.answerAll(batch, err)
		return
	}
	if err := w.renewTokens(); err != nil {
		w.abort(batch, err)
		return
	}
	w.chooseSync(batch)
	split, err := w.commitTogether(batch)
	if err != nil {
		w.abort(batch, err)
		return
	}
	if !split {
		return
	}
	for _, o := range batch {
		if err := w.failure(); err != nil {
			o.done <- err
			continue
		}
		if _, err := w.commitTogether([]*op{o}); err != nil {
			w.abort([]*op{o}, err)
		}
	}
}

// commitTogether runs ops in one transaction. When an operation fails in a
// way that may have left partial writes, it rolls back, resynchronises the
// in-memory state and reports split (with a single operation it answers
// that operation with its error instead). It answers the operations once
// they are committed. err means the transaction itself broke and nobody
// was answered.
func (w *writer) commitTogether(ops []*op) (split bool, err error) {
	var start time.Time
	if w.cfg.OnCommit != nil {
		start = time.Now()
	}
	if _, err := w.st.begin.Exec(); err != nil {
		return false, fmt.Errorf("begin batch: %w", err)
	}
	w.batch.reset()
	for _, o := range ops {
		if err := o.ctx.Err(); err != nil {
			o.err = err
			continue
		}
		if w.apply(o) {
			continue
		}
		if _, err := w.conn.ExecContext(context.Background(), `ROLLBACK`); err != nil {
			return false, fmt.Errorf("roll back batch: %w", err)
		}
		w.undo.revert()
		if err := w.resync(); err != nil {
			return false, fmt.Errorf("roll back batch: %w", err)
		}
		if len(ops) > 1 {
			return true, nil
		}
		if fatal(o.err) {
			w.fail(mapErr(o.err))
		}
		w.noteFull(o.err)
		o.done <- mapErr(o.err)
		return false, nil
	}
	if err := w.sweepStale(staleSweep); err != nil {
		return false, err
	}
	if _, err := w.st.commit.Exec(); err != nil {
		return false, fmt.Errorf("commit batch: %w", err)
	}
	w.commits.Add(1)
	if !w.fsync {
		w.unsynced.Add(1)
	}
	w.undo.reset()
	if !w.batch.empty() {
		w.cat.apply(w.batch)
	}
	w.settle(ops, start)
	return false, nil
}

// settle answers the operations of a committed batch once the commit is as
// durable as they need. A batch that needs no fsync, with no earlier batch
// waiting for one, is answered at once; otherwise the syncer takes it, and
// its fsync begins once the turn's holder lets the turn go (see
// syncer.dispatch), while the next batch commits.
func (w *writer) settle(ops []*op, start time.Time) {
	if w.sync == nil || (!w.fsync && w.sync.idle()) {
		w.answer(ops, start, w.failure())
		return
	}
	w.sync.hand(ops, start, w.fsync)
}

// answer answers the operations of a batch whose commit began at start
// and is now durable: each with its own outcome, or all with err when
// the store failed before the commit could be made durable. It runs on
// the writer's goroutine or the syncer's.
func (w *writer) answer(ops []*op, start time.Time, err error) {
	// The checkpointer copies the commit now, not while its fsync runs.
	w.ckpt.nudge()
	if w.cfg.OnCommit != nil && err == nil {
		jobs := 0
		for _, o := range ops {
			jobs += o.weight
		}
		w.cfg.OnCommit(store.CommitStats{Elapsed: time.Since(start), Calls: len(ops), Jobs: jobs})
	}
	for _, o := range ops {
		if err != nil {
			o.done <- err
		} else {
			o.done <- o.err
		}
	}
}

// stopSync answers every batch the syncer holds and stops it.
func (w *writer) stopSync() {
	if w.sync == nil {
		return
	}
	if err := w.sync.stop(); err != nil {
		w.logger.Error("sqlitestore: stop syncing", "err", err)
	}
}

// apply runs one operation and reports whether the transaction is still
// clean: true when it succeeded or refused before writing.
func (w *writer) apply(o *op) bool {
	w.fx.reset()
	w.touched = false
	o.err = o.fn(w)
	if o.err == nil {
		w.batch.merge(w.fx)
		return true
	}
	return refusal(o.err) && !w.touched
}

// refusal reports whether err is an operation declining the call for the
// caller's reason, which by contract happens before any write.
func refusal(err error) bool {
	var in *job.InputError
	return errors.Is(err, job.ErrNotFound) || errors.Is(err, job.ErrLeaseLost) ||
		errors.Is(err, job.ErrInvalidState) || errors.Is(err, store.ErrScheduleMoved) || errors.As(err, &in)
}

// abort rolls the batch back and answers every operation with err. The
// in-memory state is rebuilt from the database; an I/O failure makes the
// store refuse further writes, since what reached the disk is unknown.
func (w *writer) abort(batch []*op, err error) {
	_, _ = w.conn.ExecContext(context.Background(), `ROLLBACK`)
	w.undo.revert()
	mapped := mapErr(err)
	w.noteFull(err)
	if fatal(err) {
		w.fail(mapped)
	} else if rerr := w.resync(); rerr != nil {
		w.fail(mapErr(rerr))
	}
	w.logger.Error("sqlitestore: batch not committed", "ops", len(batch), "err", err)
	w.answerAll(batch, mapped)
}

func (w *writer) answerAll(batch []*op, err error) {
	for _, o := range batch {
		o.done <- err
	}
}

// resync rebuilds the queue view from the database as the connection sees
// it now and empties every window (they refill lazily). The rate logs of
// flow control stay: they may hold starts of a batch rolled back, which
// only makes a rate stricter for one period.
func (w *writer) resync() error {
	rows, err := w.conn.QueryContext(context.Background(), `SELECT name, paused, limits, grouped, settings FROM queues`)
	if err != nil {
		return fmt.Errorf("reload queues: %w", err)
	}
	var qs []*wqueue
	for rows.Next() {
		q := &wqueue{}
		var limits, settings []byte
		if err := rows.Scan(&q.name, &q.paused, &limits, &q.grouped, &settings); err != nil {
			rows.Close()
			return fmt.Errorf("reload queues: %w", err)
		}
		if q.limits, err = decodeLimits(limits); err != nil {
			rows.Close()
			return fmt.Errorf("reload queue %s: %w", q.name, err)
		}
		if q.settings, err = decodeSettings(settings); err != nil {
			rows.Close()
			return fmt.Errorf("reload queue %s: %w", q.name, err)
		}
		qs = append(qs, q)
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("reload queues: %w", err)
	}
	if err := w.loadLanes(); err != nil {
		return err
	}
	old := w.queues
	w.queues = make(map[string]*wqueue, len(qs))
	w.cache.used = 0
	for _, q := range qs {
		q.win = newWindow(w.cfg.ReadyWindow, false, w.cache)
		if o := old[q.name]; o != nil {
			q.flow.keepRates(&o.flow, q.limits.GroupRate)
		}
		w.queues[q.name] = q
	}
	return nil
}

// fail puts the writer in its failed state: every later write gets err.
func (w *writer) fail(err error) {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	if w.failed == nil {
		w.failed = fmt.Errorf("store failed, restart needed: %w", err)
		w.logger.Error("sqlitestore: refusing writes after a storage failure", "err", err)
	}
}

// failure returns the error of the failed state, or nil.
func (w *writer) failure() error {
	w.failMu.Lock()
	defer w.failMu.Unlock()
	return w.failed
}

// ensureQueue returns the queue named name, recording it as known first if
// needed. A new queue has no available job, so its window starts complete.
func (w *writer) ensureQueue(name string) (*wqueue, error) {
	if q := w.queues[name]; q != nil {
		return q, nil
	}
	if _, err := w.st.insertQueue.Exec(name); err != nil {
		return nil, fmt.Errorf("record queue: %w", err)
	}
	q := &wqueue{name: name, win: newWindow(w.cfg.ReadyWindow, true, w.cache)}
	w.queues[name] = q
	w.fx.queues[name] = struct{}{}
	w.touched = true
	return q, nil
}

// madeAvailable records that a job of queue (and group) became
// available.
func (w *writer) madeAvailable(queue, group string, e entry) {
	if q := w.queues[queue]; q != nil {
		if q.grouped {
			w.groupAvailable(q, group, e)
			q.holdAvailable(group, e)
		} else {
			q.win.add(e)
		}
		w.touched = true
	}
}

// madeUnavailable records that an available job of queue (and group) left
// that state without a claim.
func (w *writer) madeUnavailable(queue, group string, e entry) {
	if q := w.queues[queue]; q != nil {
		if q.grouped {
			w.stale = append(w.stale, e.seq)
			if gs := q.flow.groups[group]; gs != nil && gs.win != nil {
				gs.win.remove(e)
			}
		} else {
			q.win.remove(e)
		}
		w.touched = true
	}
}

// resetWindow forgets the window of queue; the next claim refills it.
func (w *writer) resetWindow(queue string) {
	if q := w.queues[queue]; q != nil {
		q.win.reset()
		q.flow.forget()
		q.flow.holds = nil
		w.touched = true
	}
}

// grant records a new lease as part of the running batch.
func (w *writer) grant(l *lease) {
	w.leases.add(l)
	w.undo.add(func() { w.leases.remove(l) })
}

// drop forgets a lease as part of the running batch.
func (w *writer) drop(l *lease) {
	w.leases.remove(l)
	w.undo.add(func() { w.leases.add(l) })
}

// change alters a lease as part of the running batch.
func (w *writer) change(l *lease, fn func(l *lease)) {
	before := *l
	w.leases.update(l, fn)
	w.undo.add(func() {
		w.leases.update(l, func(l *lease) {
			index := l.index
			*l = before
			l.index = index
		})
	})
}

// chooseSync sets whether the batch's commit must reach the disk before
// its answers: it must in the store's full mode unless every operation of
// the batch is relaxed.
func (w *writer) chooseSync(batch []*op) {
	w.fsync = false
	if w.sync == nil {
		return
	}
	for _, o := range batch {
		if o.relaxed == nil || !o.relaxed(w) {
			w.fsync = true
			return
		}
	}
}

// noteFull records a write that failed for a full disk.
func (w *writer) noteFull(err error) {
	if errors.Is(mapErr(err), job.ErrStorageFull) {
		w.full.Store(true)
	}
}

// catchUpWAL checkpoints the WAL on the writer's connection, so that the
// next commit can start it over; the checkpointer found it too long.
func (w *writer) catchUpWAL() {
	frames, copied, err := checkpoint(context.Background(), w.conn.QueryRowContext)
	if err != nil {
		w.logger.Warn("sqlitestore: checkpoint failed", "err", err)
		return
	}
	if copied == frames {
		w.ckpt.behind.Store(false)
	}
}
