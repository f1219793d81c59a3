package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store/adminkit"
)

// writer owns the write connection and every piece of in-memory state
// derived from the database; the committer (commit.go) runs the store's
// operations on it, one batch at a time, and only the holder of the
// committer's turn touches it. It is made of parts with one job each: the
// queues with their ready windows and flow state (queues.go, window.go,
// flowstate.go, ordered.go), the leases with the batch's undo log
// (lease.go), the consumer groups (lanes.go) and the pending changes
// to the counts (counts.go). The operations are its methods, in the files of
// the store's calls.
type writer struct {
	conn   *sql.Conn
	st     statements
	cfg    Config
	logger *slog.Logger
	// counts is the committed view of the queues that readers see; each
	// committed batch applies its changes to it.
	counts *counts

	// queues are the known queues; cache bounds the memory their windows
	// spend on cached jobs.
	queues map[string]*wqueue
	cache  *bodyCache
	// leases are the active jobs.
	leases *leaseTable
	// lanes are the consumer groups of each queue.
	lanes laneSet
	// fx collects the count and queue changes of the running operation, batch those
	// of the batch's successful operations.
	fx, batch *delta
	// touched is set when the running operation changed queues or windows,
	// or wrote: a refusal after that must roll the batch back.
	touched bool
	// stale are the seqs of rows of grouped queues that left the
	// available state since the last sweep (see sweepStale).
	stale  []int64
	tokens *tokenSource
	// nextSeq is the seq of the next inserted job: inserts assign seqs
	// themselves.
	nextSeq int64
}

const (
	sqlInsertQueue = `INSERT INTO queues (name) VALUES (?) ON CONFLICT (name) DO NOTHING`
	sqlMaxSeq      = `SELECT COALESCE(MAX(seq), 0) FROM jobs`
	// sqlPersistLease writes a lease held in memory to the job's row.
	sqlPersistLease = `UPDATE jobs SET state = 'active', attempt = ?1, lease_token = ?2, started_at = ?3,
	lease_expires_at = ?4, cancel_requested = ?5, progress = ?6, worker = ?7 WHERE seq = ?8`
)

var (
	stBegin        = prepared(`BEGIN IMMEDIATE`)
	stCommit       = prepared(`COMMIT`)
	stInsertQueue  = prepared(sqlInsertQueue)
	stPersistLease = prepared(sqlPersistLease)
	stSweepStale   = prepared(sqlSweepStale)
)

func newWriter(ctx context.Context, conn *sql.Conn, cfg Config, qc *counts, leases *leaseTable, tokens *tokenSource) (*writer, error) {
	w := &writer{
		conn:   conn,
		cfg:    cfg,
		logger: cfg.Logger,
		counts: qc,
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
	err := w.st.prepare(ctx, conn)
	if err == nil {
		err = w.resync()
	}
	if err == nil {
		err = loadRateLogs(conn, w.queues)
	}
	if err != nil {
		w.st.close()
		return nil, err
	}
	return w, nil
}

// close releases the statements and the connection. The committer must
// have stopped.
func (w *writer) close() error {
	w.st.close()
	if err := w.conn.Close(); err != nil {
		return fmt.Errorf("close write connection: %w", err)
	}
	return nil
}

// begin opens a batch's transaction.
func (w *writer) begin() error {
	if _, err := w.st.get(stBegin).Exec(); err != nil {
		return fmt.Errorf("begin batch: %w", err)
	}
	w.batch.reset()
	return nil
}

// apply runs fn, one operation, in the batch's transaction, and reports
// whether the transaction is still clean: fn succeeded, or refused (see
// refusal) before it touched anything.
func (w *writer) apply(fn func(*writer) error) (clean bool, err error) {
	w.fx.reset()
	w.touched = false
	if err = fn(w); err == nil {
		w.batch.merge(w.fx)
		return true, nil
	}
	return refusal(err) && !w.touched, err
}

// commit commits the batch's transaction, with the sweep of stale rows
// when enough wait, and hands the batch's changes to the counts.
func (w *writer) commit() error {
	if err := w.sweepStale(staleSweep); err != nil {
		return err
	}
	if _, err := w.st.get(stCommit).Exec(); err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	w.leases.keep()
	if !w.batch.empty() {
		w.counts.apply(w.batch)
	}
	return nil
}

// abandon rolls the batch's transaction back and takes back the batch's
// changes to the leases; the rest of the memory must then be rebuilt
// (resync).
func (w *writer) abandon() error {
	_, err := w.conn.ExecContext(context.Background(), `ROLLBACK`)
	w.leases.revert()
	if err != nil {
		return fmt.Errorf("roll back batch: %w", err)
	}
	return nil
}

// resync rebuilds the queue view from the database as the connection sees
// it now and empties every window (they refill lazily). The rate logs of
// flow control stay: they may hold starts of a batch rolled back, which
// only makes a rate stricter for one period.
func (w *writer) resync() error {
	rows, err := readQueues(context.Background(), w.conn)
	if err != nil {
		return fmt.Errorf("reload queues: %w", err)
	}
	lanes, err := loadLanes(w.conn)
	if err != nil {
		return err
	}
	old := w.queues
	w.lanes = lanes
	w.queues = make(map[string]*wqueue, len(rows))
	w.cache.reset()
	for _, r := range rows {
		q := newQueue(r.name, w.cfg.ReadyWindow, false, w.cache)
		q.paused, q.limits, q.grouped, q.settings = r.Paused, r.Limits, r.grouped, r.Settings
		if o := old[q.name]; o != nil {
			q.flow.keepRates(&o.flow, q.limits.GroupRate)
		}
		w.queues[q.name] = q
	}
	return nil
}

// ensureQueue returns the queue named name, recording it as known first if
// needed. A new queue has no available job, so its window starts complete.
func (w *writer) ensureQueue(name string) (*wqueue, error) {
	if q := w.queues[name]; q != nil {
		return q, nil
	}
	if _, err := w.st.get(stInsertQueue).Exec(name); err != nil {
		return nil, fmt.Errorf("record queue: %w", err)
	}
	q := newQueue(name, w.cfg.ReadyWindow, true, w.cache)
	w.queues[name] = q
	w.fx.know(name)
	w.touched = true
	return q, nil
}

// added records that j was inserted with seq: in the counts and, when
// available, in its window, which may keep j as its cached body.
func (w *writer) added(j *job.Job, seq int64) {
	w.fx.move(j.Queue, "", j.State, 1)
	if j.State == job.StateAvailable {
		w.madeAvailable(j.Queue, j.Group, entry{priority: j.Priority, runAt: j.RunAt.UnixNano(), seq: seq, body: j})
	} else {
		w.leftAvailable(j.Queue, seq) // marked ready by default
	}
}

// madeAvailable records that a job of queue (and group) became
// available.
func (w *writer) madeAvailable(queue, group string, e entry) {
	if q := w.queues[queue]; q != nil {
		q.available(group, e)
		w.touched = true
	}
}

// madeUnavailable records that an available job of queue (and group) left
// that state without a claim.
func (w *writer) madeUnavailable(queue, group string, e entry) {
	if q := w.queues[queue]; q != nil {
		q.unavailable(group, e)
		w.leftAvailable(queue, e.seq)
		w.touched = true
	}
}

// resetWindow forgets the windows and holds of queue; the next claim
// reads them again.
func (w *writer) resetWindow(queue string) {
	if q := w.queues[queue]; q != nil {
		q.reset()
		w.touched = true
	}
}

// unhold records that the job seq of group g of queue finished or was
// deleted: in an ordered queue, the group is free again if it held it.
func (w *writer) unhold(queue, g string, seq int64) {
	if q := w.queues[queue]; q != nil {
		q.unhold(g, seq, w.leases.inGroup(queue, g))
	}
}

// availableIn is how many jobs of queue are available and not leased, as
// the running batch leaves them.
func (w *writer) availableIn(queue string) int64 {
	i := adminkit.Index(job.StateAvailable)
	n := int64(0)
	if info, ok := w.counts.info(queue); ok {
		n = info.Counts[job.StateAvailable]
	}
	for _, d := range []*delta{w.batch, w.fx} {
		if cs := d.counts[queue]; cs != nil {
			n += cs[i]
		}
	}
	return n
}

// Rows of grouped queues that leave the available state stay in the
// claim index by group (jobs_group_claim, over the rows marked gready)
// until a sweep unmarks them, many at once: an ack then writes only its
// row, not a page of the index in each group it touches, which is what a
// partial index on the state would cost, a group's jobs being apart in
// it. Claims skip the rows a sweep has not reached yet; a trigger marks
// every row that becomes available again.
const (
	// staleSweep is how many such rows wait for a sweep, which runs in
	// the commit that reaches it and at close. A row left unswept by a
	// crash stays until it is pruned. Small sweeps keep the index that a
	// steady flow reads small (a lifecycle run with 1,000 groups: 4,096
	// gives 47k jobs/s, 32,768 gives 40k); a deep backlog prefers large
	// ones, but gains under 5 % from them.
	staleSweep    = 4096
	sqlSweepStale = `UPDATE jobs NOT INDEXED SET gready = NULL
WHERE seq IN (SELECT value FROM json_each(?)) AND gready = 1 AND state != 'available'`
)

// leftAvailable records that the row seq of queue left the available
// state, or was inserted in another.
func (w *writer) leftAvailable(queue string, seq int64) {
	if q := w.queues[queue]; q != nil && q.grouped {
		w.stale = append(w.stale, seq)
	}
}

// sweepStale unmarks the rows of stale once at least atLeast of them
// wait.
func (w *writer) sweepStale(atLeast int) error {
	if len(w.stale) == 0 || len(w.stale) < atLeast {
		return nil
	}
	if _, err := w.st.get(stSweepStale).Exec(seqList(w.stale)); err != nil {
		return fmt.Errorf("sweep the claim index of groups: %w", err)
	}
	w.stale = w.stale[:0]
	return nil
}

// persist writes lease l to its job's row, so that it survives a restart.
func (w *writer) persist(l *lease, cancel bool) error {
	if _, err := w.st.get(stPersistLease).Exec(l.attempt, l.token, l.startedAt.UnixNano(), l.expiresAt.UnixNano(),
		cancel, blobOrNull(l.progress), stringOrNull(l.worker), l.seq); err != nil {
		return fmt.Errorf("write lease of job %s: %w", l.id, err)
	}
	return nil
}

// persistAll writes every lease to its job's row, sweeps the stale rows,
// and writes the rate logs of flow control; the store runs it last, at
// close.
func (w *writer) persistAll() error {
	for _, l := range w.leases.all() {
		if err := w.persist(l, l.cancel); err != nil {
			return err
		}
		w.leases.change(l, func(l *lease) { l.persisted = true })
	}
	if err := w.sweepStale(1); err != nil {
		return err
	}
	w.touched = true
	return saveRateLogs(w.conn, w.queues)
}
