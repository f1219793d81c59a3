package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// sqlWriteJobs stores jobs whole (wholeJobs), skipping ids that exist, in
// array order, which their seqs keep across both tables: pending ones in
// spool_jobs, active ones with their leases, finished ones in
// spool_jobs_done. A job without a group gets the empty group in a queue
// with flow control, as an insert gives it. It creates the queues and
// returns how many jobs it stored.
const sqlWriteJobs = `WITH flow AS (
	SELECT ARRAY(SELECT name FROM spool_queues WHERE name = ANY($2::text[]) AND flow) AS names
), u AS (
	SELECT u.*, nextval(pg_get_serial_sequence('spool_jobs', 'seq')) AS seq
	FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::int4[], $6::text[], $7::timestamptz[],
		$8::int4[], $9::text[], $10::int8[], $11::int8[], $12::float8[], $13::int8[], $14::text[], $15::int8[],
		$16::text[], $17::text[], $18::int4[], $19::bytea[], $20::text[], $21::bytea[], $22::int8[], $23::bool[],
		$24::timestamptz[], $25::timestamptz[], $26::timestamptz[], $27::timestamptz[], $28::text[], $29::text[],
		$30::text[], $31::text[], $32::text[], $33::timestamptz[])
		WITH ORDINALITY AS u(id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, durability, attempt,
		result, errors, progress, lease_token, cancel_requested, created_at, started_at, finished_at,
		lease_expires_at, grp, letter_queue, letter_id, worker, traceparent, wait_until, ord)
	WHERE NOT EXISTS (SELECT 1 FROM spool_jobs j WHERE j.id = u.id)
		AND NOT EXISTS (SELECT 1 FROM spool_jobs_done d WHERE d.id = u.id)
	ORDER BY ord
), src AS (
	SELECT seq, id, queue, kind, payload, priority, state, run_at, attempt, max_attempts, backoff_kind, backoff_base,
		backoff_max, backoff_jitter, lease_ns, NULLIF(unique_key, ''), unique_for, NULLIF(tags, '')::jsonb, result,
		NULLIF(errors, '')::jsonb, progress, lease_token, cancel_requested, created_at, started_at, finished_at,
		durability, CASE WHEN grp <> '' THEN grp WHEN queue = ANY(flow.names) THEN '' END,
		NULLIF(letter_queue, ''), NULLIF(letter_id, ''), NULLIF(worker, ''), NULLIF(traceparent, ''), lease_expires_at,
		wait_until
	FROM u CROSS JOIN flow
), hot AS (
	INSERT INTO spool_jobs (` + jobColumns + `, wait_until)
	SELECT ` + jobColumns + `, wait_until FROM src AS r(` + jobColumns + `, lease_expires_at, wait_until)
	WHERE state NOT IN ('completed', 'dead', 'cancelled')
	RETURNING seq
), done AS (
	` + doneInsert + `
	SELECT ` + jobColumns + ` FROM src AS r(` + jobColumns + `, lease_expires_at, wait_until)
	WHERE state IN ('completed', 'dead', 'cancelled')
	RETURNING seq
), lease AS (
	INSERT INTO spool_leases (seq, expires_at)
	SELECT seq, lease_expires_at FROM src AS r(` + jobColumns + `, lease_expires_at, wait_until)
	WHERE state = 'active'
), q AS (
	INSERT INTO spool_queues (name) SELECT DISTINCT queue FROM u ON CONFLICT (name) DO NOTHING
)
SELECT (SELECT count(*) FROM hot) + (SELECT count(*) FROM done)`

// sqlTokensAbove moves the token sequence past every token of $1, so that
// the next hand-out of an imported job gets a higher one.
const sqlTokensAbove = `SELECT setval('spool_lease_tokens', GREATEST(
	(SELECT last_value FROM spool_lease_tokens), (SELECT COALESCE(max(t), 0) FROM unnest($1::int8[]) AS t)))`

// ImportJobs stores jobs exactly as another store holds them, in order,
// skipping ids that exist (storecopy.Importer); a level of durability
// this store does not keep fails it whole with a *job.InputError. A job
// waiting unstarted gets the wait deadline of its queue here. Meant for
// an idle database (spool migrate-store), it takes no unique-key locks,
// sends no notifications and makes no consumer-group copies: a source's
// copies are jobs of its lanes, which come along.
func (a *admin) ImportJobs(ctx context.Context, jobs []*job.Job) (int, error) {
	w, err := newWholeJobs(jobs)
	if err != nil {
		return 0, fmt.Errorf("import jobs: %w", err)
	}
	count := 0
	err = a.tx(ctx, func(tx pgx.Tx) error {
		var waits map[string]time.Duration
		batch := &pgx.Batch{}
		lockWaits(batch, w.queues, &waits)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		batch = &pgx.Batch{}
		w.queue(batch, waits, &count)
		batch.Queue(sqlTokensAbove, w.tokens)
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return 0, wrap("import jobs", err)
	}
	return count, nil
}

// wholeJobs are sqlWriteJobs' arguments for some jobs but their wait
// deadlines: jobArrays' and the columns only a job that ran has.
type wholeJobs struct {
	*jobArrays
	tokens []int64
	args   []any // sqlWriteJobs' $1 to $32
}

// newWholeJobs builds the arguments that store jobs whole. It refuses an
// active job without a lease expiry and a level of durability this store
// does not keep.
func newWholeJobs(jobs []*job.Job) (*wholeJobs, error) {
	a, err := newJobArrays(jobs, time.Time{})
	if err != nil {
		return nil, err
	}
	n := len(jobs)
	var (
		errs, letterQueues, letterIDs, workers = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		results, progress                      = make([][]byte, n), make([][]byte, n)
		attempts                               = make([]int32, n)
		tokens                                 = make([]int64, n)
		cancels                                = make([]bool, n)
		started, finished, expires             = make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
	)
	for i, j := range jobs {
		if j.State == job.StateActive && j.LeaseExpiresAt.IsZero() {
			return nil, fmt.Errorf("active job %s has no lease expiry", j.ID)
		}
		attempts[i], tokens[i], cancels[i] = int32(j.Attempt), j.LeaseToken, j.CancelRequested
		results[i], progress[i] = bytesOrNil(j.Result), bytesOrNil(j.Progress)
		// As the engine keeps them: a NUL, which text cannot hold, as U+FFFD.
		letterQueues[i], letterIDs[i], workers[i] = j.DeadLetterOf.Queue, j.DeadLetterOf.ID, job.WorkerName(j.Worker)
		started[i], finished[i], expires[i] = tstz(j.StartedAt), tstz(j.FinishedAt), tstz(j.LeaseExpiresAt)
		if len(j.Errors) > 0 {
			kept := make([]job.AttemptError, len(j.Errors))
			for k, e := range j.Errors {
				kept[k] = job.AttemptError{Attempt: e.Attempt, Message: job.ErrorMessage(e.Message), At: e.At}
			}
			b, err := store.EncodeErrors(kept, j.ErrorsDropped)
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", j.ID, err)
			}
			errs[i] = string(b)
		}
	}
	return &wholeJobs{jobArrays: a, tokens: tokens, args: append(a.common, attempts, results, errs, progress, tokens, cancels,
		a.created, started, finished, expires, a.groups, letterQueues, letterIDs, workers, a.traces)}, nil
}

// queue adds to batch the statement that stores the jobs, with the wait
// deadlines of the maximum waits waits, and sets count to how many.
func (w *wholeJobs) queue(batch *pgx.Batch, waits map[string]time.Duration, count *int) {
	batch.Queue(sqlWriteJobs, append(w.args, w.deadlines(waits))...).QueryRow(func(row pgx.Row) error { return row.Scan(count) })
}
