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

// The fast insert writes and commits plain jobs in one round trip: one
// pipeline, which PostgreSQL runs as one implicit transaction. Its first
// statement, sqlFastBegin, takes the locks; the insert (sqlInsertJobFast
// for one job, given as values, else sqlInsertJobsFast) reads, in a
// snapshot taken under them, what only the full insert handles (an id
// that exists, consumer groups, a maximum wait the node did not believe,
// see deadline.go), writes its count deltas itself (countedSetting) and
// reads whether another node listens; a third, sqlNoneDone, looks for
// finished jobs of ids the engine did not make. Where the full insert
// would decide something, a statement fails on purpose with
// notFastMarker in its error, the transaction rolls back whole, and the
// full insert runs.
const (
	// notFastMarker starts the text whose cast to int fails a fast
	// insert: PostgreSQL's error quotes it. The text depends on the rows
	// read, so that the planner never folds the cast into a constant that
	// fails every time.
	notFastMarker = "spool:not-fast:"
	// sqlFastBegin takes the listeners' lock ($1, $2) and the flow locks
	// of the queues $3 (see sqlLockFlowShared) shared, marks the
	// transaction's inserts as counted by themselves, and when $4 is set
	// lets it commit without waiting for the WAL flush (sqlRelaxCommit).
	// No other lock is taken in the same transaction in another order: a
	// joining node takes the listeners' lock alone.
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
	// sqlInsertJobFast is sqlInsertJobsFast for one job, given as values:
	// $1 to $17 as sqlInsertJobs has them for each job, its creation time
	// $18, its group $19 ('' for none), its traceparent $20 ('' for
	// none), its wait deadline $22 (NULL for none) and the maximum wait of
	// its queue that the deadline believes, $23; $21 is the node.
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
	// sqlNoneDone fails when one of the ids $1 belongs to a finished job.
	// It runs as a statement of its own after the insert for the reason
	// sqlDoneByIDs does.
	sqlNoneDone = `SELECT ('` + notFastMarker + `done:' || id)::int FROM spool_jobs_done WHERE id = ANY($1)`
	// countedSetting names the setting by which a transaction tells the
	// insert trigger of spool_jobs that its statements write their own
	// count deltas (see migration 11).
	countedSetting = "spool.counted"
	// maxFastInsert bounds the jobs of a fast insert, alone or combined.
	maxFastInsert = 128
)

// errNotFast is a fast insert that found what only the full insert
// handles; nothing was written.
var errNotFast = errors.New("pgstore: the insert takes the full path")

// canInsertFast reports whether jobs may try the fast insert: at most
// maxFastInsert of them, no unique keys, no id twice, no queue that this
// node knows to have consumer groups, and no group in a queue not known to
// be grouped already (the full insert marks it). The test hook
// beforeCommit needs the full path.
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
	return inserted(jobs), nil
}

// sendFast sends batch, a whole implicit transaction that starts with
// sqlFastBegin and an insert, on one connection, reads every result and
// sets heard to what the insert read.
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

// notFastError is a fast insert that found what only the full insert
// handles (its reason: "laned:" and a queue with consumer groups,
// "wait:" and a queue whose maximum wait the node did not know, "taken:"
// or "done:" for an id that exists); nothing was written. It is
// errNotFast.
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

// inserted are the results of jobs, each inserted.
func inserted(jobs []*job.Job) []store.InsertResult {
	out := make([]store.InsertResult, len(jobs))
	for i, j := range jobs {
		out[i] = store.InsertResult{Job: j}
	}
	return out
}
