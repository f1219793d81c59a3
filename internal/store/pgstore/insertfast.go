package pgstore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The fast insert writes and commits plain jobs in one round trip: a
// pipeline that PostgreSQL runs as one implicit transaction. sqlFastBegin
// takes the locks; the insert then reads, in a snapshot taken under them,
// what only the full insert handles (an id that exists, consumer groups,
// a maximum wait the node did not believe) and whether another node
// listens, and writes its count deltas itself; sqlNoneDone looks for
// finished jobs of ids the engine did not make. Where the full insert
// would decide something, a statement fails on purpose (notFastMarker),
// the transaction rolls back whole, and the full insert runs.
const (
	// notFastMarker starts the text whose cast to int fails a fast
	// insert. The text depends on the rows read, so that the planner
	// never folds the cast into a constant that fails every time.
	notFastMarker = "spool:not-fast:"
	// sqlFastBegin takes the listeners' lock ($1, $2) and the flow locks
	// of the queues $3 shared, marks the transaction's inserts as counted
	// by themselves, and with $4 relaxes its commit (sqlRelaxCommit). A
	// joining node takes the listeners' lock alone, so no lock is taken
	// in another order.
	sqlFastBegin = `SELECT pg_advisory_xact_lock_shared($1, $2), set_config('` + countedSetting + `', 'on', true),
	CASE WHEN $4::bool THEN set_config('synchronous_commit', 'off', true) END,
	(SELECT count(pg_advisory_xact_lock_shared($1, k)) FROM (
		SELECT DISTINCT ` + flowLockKey + ` AS k FROM unnest($3::text[]) AS q ORDER BY k) x)`
	// sqlInsertJobsFast inserts like sqlInsertJobs, counts what it
	// inserted, and returns whether a node other than $27 listens; it
	// fails when the queues $22 have consumer groups or maximum waits
	// other than $25, or when it inserted fewer jobs than $26.
	sqlInsertJobsFast = sqlInsertJobsWith + `queue, state
), counted AS (
	INSERT INTO spool_count_deltas (queue, state, n) SELECT queue, state, count(*) FROM ins GROUP BY queue, state
), q AS (
	INSERT INTO spool_queues (name) SELECT DISTINCT queue FROM ins ON CONFLICT (name) DO NOTHING
)
SELECT EXISTS (SELECT FROM spool_listeners WHERE node <> $27)
WHERE (SELECT ('` + notFastMarker + `laned:' || queue)::int FROM spool_consumer_groups
		WHERE queue = ANY($22::text[]) LIMIT 1) IS NULL
	AND (SELECT ('` + notFastMarker + `wait:' || name)::int FROM (` + waitMismatch + `) w LIMIT 1) IS NULL
	AND (SELECT ('` + notFastMarker + `taken:' || count(*))::int FROM ins HAVING count(*) <> $26) IS NULL`
	// sqlInsertJobFast is sqlInsertJobsFast for one job given as values:
	// $1 to $17 as in the arrays, then its creation time, group ('' for
	// none), traceparent ('' for none), the node, its wait deadline and
	// the maximum wait the deadline believes.
	sqlInsertJobFast = `WITH ins AS (
	INSERT INTO spool_jobs (id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, durability, grp, created_at,
		traceparent, wait_until)
	SELECT $1::text, $2::text, $3::text, $4::bytea, $5::int4, $6::text, $7::timestamptz, $8::int4, $9::text,
		$10::int8, $11::int8, $12::float8, $13::int8, NULLIF($14::text, ''), $15::int8, NULLIF($16::text, '')::jsonb,
		$17::text, CASE WHEN $19::text <> '' THEN $19::text
			WHEN EXISTS (SELECT FROM spool_queues WHERE name = $2::text AND flow) THEN '' END,
		$18::timestamptz, NULLIF($20::text, ''), $22::timestamptz
	ON CONFLICT (id) DO NOTHING
	RETURNING queue, state
), counted AS (
	INSERT INTO spool_count_deltas (queue, state, n) SELECT queue, state, 1 FROM ins
), q AS (
	INSERT INTO spool_queues (name) SELECT queue FROM ins ON CONFLICT (name) DO NOTHING
)
SELECT EXISTS (SELECT FROM spool_listeners WHERE node <> $21)
WHERE (SELECT ('` + notFastMarker + `laned:' || queue)::int FROM spool_consumer_groups
		WHERE queue = $2::text LIMIT 1) IS NULL
	AND (SELECT ('` + notFastMarker + `wait:' || name)::int FROM spool_queues
		WHERE name = $2::text AND max_wait_ns <> $23::int8) IS NULL
	AND (SELECT ('` + notFastMarker + `taken:' || count(*))::int FROM ins HAVING count(*) <> 1) IS NULL`
	// sqlNoneDone fails when one of the ids $1 belongs to a finished job;
	// it follows the insert for the reason sqlDoneByIDs does.
	sqlNoneDone = `SELECT ('` + notFastMarker + `done:' || id)::int FROM spool_jobs_done WHERE id = ANY($1)`
	// countedSetting tells the insert trigger of spool_jobs that the
	// transaction's statements write their own count deltas.
	countedSetting = "spool.counted"
	// maxFastInsert bounds the jobs of a fast insert, alone or combined.
	maxFastInsert = 128
)

// errNotFast is a fast insert that found what only the full insert
// handles; nothing was written.
var errNotFast = errors.New("pgstore: the insert takes the full path")

// canInsertFast reports whether jobs may try the fast insert: at most
// maxFastInsert, no unique key, no id twice, no queue known to have
// consumer groups, no group in a queue not known to be grouped (the full
// insert marks it), and no test hook beforeCommit.
func (ins *inserter) canInsertFast(jobs []store.JobInsertParams) bool {
	if ins.beforeCommit != nil || len(jobs) == 0 || len(jobs) > maxFastInsert {
		return false
	}
	ids := make(map[string]struct{}, len(jobs))
	for i := range jobs {
		jp := &jobs[i]
		if jp.UniqueKey != "" {
			return false
		}
		if _, ok := ins.lanedQueues.Load(jp.Queue); ok {
			return false
		}
		if jp.Group != "" {
			if _, ok := ins.groupedQueues.Load(jp.Queue); !ok {
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

// insertFast inserts jps, which canInsertFast accepted, in one round
// trip, or returns errNotFast having written nothing. It announces their
// queues only when another node listens (listeners.go).
func (ins *inserter) insertFast(ctx context.Context, jps []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	waits, err := ins.waiting(ctx, ins.pool)
	if err != nil {
		return nil, err
	}
	jobs := newJobs(jps, nil, now)
	batch := &pgx.Batch{}
	var available []string
	if j := jobs[0]; len(jobs) == 1 {
		tags, err := encodeTags(j.ID, j.Tags)
		if err != nil {
			return nil, err
		}
		if j.State == job.StateAvailable {
			available = []string{j.Queue}
		}
		batch.Queue(sqlFastBegin, lockClass, ins.lockKey(listenersLock), []string{j.Queue}, j.Durability == job.DurabilityProcess)
		batch.Queue(sqlInsertJobFast, j.ID, j.Queue, j.Kind, bytesOrNil(j.Payload), int32(j.Priority), string(j.State),
			j.RunAt, int32(j.MaxAttempts), string(j.Backoff.Kind), int64(j.Backoff.Base), int64(j.Backoff.Max),
			j.Backoff.Jitter, int64(j.LeaseDuration), j.UniqueKey, int64(j.UniqueFor), tags, string(j.Durability),
			j.CreatedAt, j.Group, j.TraceParent, ins.node, waitDeadline(0, j.RunAt, waits[j.Queue]), int64(waits[j.Queue]))
		if !jps[0].FreshID {
			batch.Queue(sqlNoneDone, []string{j.ID})
		}
	} else {
		a, err := newJobArrays(jobs, now)
		if err != nil {
			return nil, err
		}
		available = a.available
		batch.Queue(sqlFastBegin, lockClass, ins.lockKey(listenersLock), a.queues, a.allProcess)
		batch.Queue(sqlInsertJobsFast, append(a.insertArgs(now, waits), int64(len(jobs)), ins.node)...)
		if !allFresh(jps) {
			batch.Queue(sqlNoneDone, a.ids)
		}
	}
	var heard bool
	err = ins.retry(ctx, func() error {
		return ins.timed(func() error { return ins.sendFast(ctx, batch, &heard) })
	})
	var nf *notFastError
	if errors.As(err, &nf) {
		if q, ok := strings.CutPrefix(nf.reason, "laned:"); ok {
			ins.lanedQueues.Store(q, struct{}{})
		}
		if strings.HasPrefix(nf.reason, "wait:") {
			ins.forgetWaits()
		}
	}
	if err != nil {
		return nil, err
	}
	if heard {
		ins.ann.add(available)
	}
	out := make([]store.InsertResult, len(jobs))
	for i, j := range jobs {
		out[i] = store.InsertResult{Job: j}
	}
	return out, nil
}

// sendFast sends batch, the whole fast insert, on one connection and sets
// heard to what its insert read.
func (ins *inserter) sendFast(ctx context.Context, batch *pgx.Batch, heard *bool) error {
	c, err := ins.pool.Acquire(ctx)
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

// notFastError is errNotFast with its reason: "laned:" or "wait:" and a
// queue, "taken:" or "done:" for an id that exists.
type notFastError struct{ reason string }

func (e *notFastError) Error() string        { return "pgstore: the insert takes the full path: " + e.reason }
func (e *notFastError) Is(target error) bool { return target == errNotFast }

// allFresh reports whether the engine made every job's id just now
// (store.JobInsertParams.FreshID), so that no finished job has one.
func allFresh(jobs []store.JobInsertParams) bool {
	for i := range jobs {
		if !jobs[i].FreshID {
			return false
		}
	}
	return true
}
