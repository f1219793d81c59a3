package pgstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/internal/store"
)

// The fast insert writes and commits plain jobs in one round trip: the
// statements go out as one pipeline, which PostgreSQL runs as one
// implicit transaction that commits at its end, with nothing for the node
// to decide between them. Where the full insert (insert) would decide
// something (an id that exists, a queue with consumer groups), a
// statement of the pipeline fails on purpose with notFastMarker in its
// error, the transaction rolls back whole, and the full insert runs.
const (
	// notFastMarker starts the text whose cast to int fails a fast
	// insert: PostgreSQL's error quotes it. The text depends on the rows
	// read, so that the planner never folds the cast into a constant that
	// fails every time.
	notFastMarker = "spool:not-fast:"
	// sqlInsertJobsFast inserts like sqlInsertJobs and returns the ids it
	// inserted; it fails when the queues $22 have consumer groups or when
	// it inserted fewer jobs than $24 (an id existed).
	sqlInsertJobsFast = sqlInsertCTEs + `SELECT id FROM ins
UNION ALL
SELECT ('` + notFastMarker + `laned:' || queue)::int::text FROM spool_consumer_groups WHERE queue = ANY($22::text[])
UNION ALL
SELECT ('` + notFastMarker + `taken:' || count(*))::int::text FROM ins HAVING count(*) <> $24`
	// sqlNoneDone fails when one of the ids $1 belongs to a finished job.
	// It runs as a statement of its own after the insert for the reason
	// sqlDoneByIDs does, and not at all for ids the engine made (allFresh).
	sqlNoneDone = `SELECT ('` + notFastMarker + `done:' || id)::int FROM spool_jobs_done WHERE id = ANY($1)`
)

// errNotFast is a fast insert that found what only the full insert
// handles; nothing was written.
var errNotFast = errors.New("pgstore: the insert takes the full path")

// canInsertFast reports whether jobs may try the fast insert: at most
// maxFastInsert of them, no unique keys, no id twice, no queue that this
// node knows to have consumer groups, and no group in a queue not known to
// be grouped already (the full insert marks it). The test hook
// beforeCommit needs the full path.
func (s *Store) canInsertFast(jobs []store.JobInsertParams) bool {
	if s.beforeCommit != nil || len(jobs) == 0 || len(jobs) > maxFastInsert {
		return false
	}
	ids := make(map[string]struct{}, len(jobs))
	for i := range jobs {
		jp := &jobs[i]
		if jp.UniqueKey != "" {
			return false
		}
		if _, ok := s.lanedQueues.Load(jp.Queue); ok {
			return false
		}
		if jp.Group != "" {
			if _, ok := s.groupedQueues.Load(jp.Queue); !ok {
				return false
			}
		}
		if _, ok := ids[jp.ID]; ok {
			return false
		}
		ids[jp.ID] = struct{}{}
	}
	return true
}

// maxFastInsert bounds the jobs of a fast insert, alone or combined (see
// combiner).
const maxFastInsert = 128

// insertFast inserts jobs, which canInsertFast accepted, in one round
// trip, or returns errNotFast having written nothing. It announces their
// queues only when another node listens (listeners.go).
func (s *Store) insertFast(ctx context.Context, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	a, err := newInsertArgs(jobs, idx, now)
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	batch.Queue(sqlHoldListeners, lockClass, s.lockKey(listenersLock))
	batch.Queue(sqlOthersListen, s.node)
	if a.allProcess {
		batch.Queue(sqlRelaxCommit)
	}
	if len(a.ungrouped) > 0 {
		batch.Queue(sqlLockFlowShared, a.ungrouped, lockClass)
	}
	batch.Queue(sqlInsertJobsFast, append(a.args, int64(len(jobs)))...)
	if !allFresh(jobs) {
		batch.Queue(sqlNoneDone, a.ids)
	}
	var heard bool
	err = s.retry(ctx, func() error {
		return s.timed(func() error { return s.sendFast(ctx, batch, &heard) })
	})
	if err != nil {
		var nf *notFastError
		if errors.As(err, &nf) {
			if q, ok := strings.CutPrefix(nf.reason, "laned:"); ok {
				s.lanedQueues.Store(q, struct{}{})
			}
		}
		return nil, err
	}
	if heard {
		s.ann.add(a.available)
	}
	out := make([]store.InsertResult, len(jobs))
	for i := range jobs {
		out[i] = store.InsertResult{Job: newJob(&jobs[i], a.runAts[i], now)}
	}
	return out, nil
}

// sendFast sends batch, a whole implicit transaction that starts with
// sqlHoldListeners and sqlOthersListen, on one connection, reads every
// result and sets heard to what sqlOthersListen read.
func (s *Store) sendFast(ctx context.Context, batch *pgx.Batch, heard *bool) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	br := c.Conn().SendBatch(ctx, batch)
	if _, err = br.Exec(); err == nil {
		err = br.QueryRow().Scan(heard)
	}
	for i := 2; i < batch.Len() && err == nil; i++ {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22P02" {
		if _, reason, ok := strings.Cut(pgErr.Message, notFastMarker); ok {
			return &notFastError{reason: strings.TrimSuffix(reason, `"`)}
		}
	}
	return err
}

// notFastError is a fast insert that found what only the full insert
// handles (its reason: "laned:" and a queue with consumer groups,
// "taken:" or "done:" for an id that exists); nothing was written. It
// is errNotFast.
type notFastError struct{ reason string }

func (e *notFastError) Error() string        { return "pgstore: the insert takes the full path: " + e.reason }
func (e *notFastError) Is(target error) bool { return target == errNotFast }

// allFresh reports whether the engine made every job's id just now
// (store.JobInsertParams.FreshID): no finished job can have one, and the
// insert needs no look for them.
func allFresh(jobs []store.JobInsertParams) bool {
	for i := range jobs {
		if !jobs[i].FreshID {
			return false
		}
	}
	return true
}
