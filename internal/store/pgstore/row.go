package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// jobColumns are the columns of spool_jobs and spool_jobs_done in the
// order scanJob reads them (after which comes the lease expiry).
const jobColumns = `seq, id, queue, kind, payload, priority, state, run_at, attempt, max_attempts,
	backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags,
	result, errors, progress, lease_token, cancel_requested, created_at, started_at, finished_at,
	durability, grp, dead_letter_of_queue, dead_letter_of_id, worker, traceparent`

// jobColumns qualified by the aliases the queries use.
const (
	hotColumns = `j.seq, j.id, j.queue, j.kind, j.payload, j.priority, j.state, j.run_at, j.attempt, j.max_attempts,
	j.backoff_kind, j.backoff_base, j.backoff_max, j.backoff_jitter, j.lease_ns, j.unique_key, j.unique_for, j.tags,
	j.result, j.errors, j.progress, j.lease_token, j.cancel_requested, j.created_at, j.started_at, j.finished_at,
	j.durability, j.grp, j.dead_letter_of_queue, j.dead_letter_of_id, j.worker, j.traceparent`
	doneColumns = `d.seq, d.id, d.queue, d.kind, d.payload, d.priority, d.state, d.run_at, d.attempt, d.max_attempts,
	d.backoff_kind, d.backoff_base, d.backoff_max, d.backoff_jitter, d.lease_ns, d.unique_key, d.unique_for, d.tags,
	d.result, d.errors, d.progress, d.lease_token, d.cancel_requested, d.created_at, d.started_at, d.finished_at,
	d.durability, d.grp, d.dead_letter_of_queue, d.dead_letter_of_id, d.worker, d.traceparent`
	leasedColumns = `leased.seq, leased.id, leased.queue, leased.kind, leased.payload, leased.priority, leased.state, leased.run_at, leased.attempt, leased.max_attempts,
	leased.backoff_kind, leased.backoff_base, leased.backoff_max, leased.backoff_jitter, leased.lease_ns, leased.unique_key, leased.unique_for, leased.tags,
	leased.result, leased.errors, leased.progress, leased.lease_token, leased.cancel_requested, leased.created_at, leased.started_at, leased.finished_at,
	leased.durability, leased.grp, leased.dead_letter_of_queue, leased.dead_letter_of_id, leased.worker, leased.traceparent`
)

// doneInsert is the column list of a move into spool_jobs_done.
const doneInsert = `INSERT INTO spool_jobs_done (` + jobColumns + `)`

// sqlFinish moves jobs to spool_jobs_done in a final state with a new
// attempt count and, unless empty, error history, ending their leases.
const sqlFinish = `WITH u AS (
	SELECT * FROM unnest($1::int8[], $2::text[], $3::int4[], $4::text[]) AS u(seq, state, attempt, err)
), gone AS (
	DELETE FROM spool_jobs j USING u WHERE j.seq = u.seq
	RETURNING ` + hotColumns + `, u.state AS new_state, u.attempt AS new_attempt, u.err
), lease AS (
	DELETE FROM spool_leases WHERE seq = ANY (ARRAY(SELECT seq FROM gone))
), moved AS (
	` + doneInsert + `
	SELECT seq, id, queue, kind, payload, priority, new_state, run_at, new_attempt, max_attempts, backoff_kind,
		backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags, result,
		CASE WHEN err = '' THEN errors ELSE err::jsonb END,
		progress, lease_token, cancel_requested, created_at, started_at, $5::timestamptz, durability, grp,
		dead_letter_of_queue, dead_letter_of_id, worker, traceparent
	FROM gone
	RETURNING seq
)
SELECT count(*) FROM moved`

const (
	// hotSelect reads pending jobs with their lease expiry.
	hotSelect = `SELECT ` + hotColumns + `, l.expires_at FROM spool_jobs j LEFT JOIN spool_leases l ON l.seq = j.seq`
	// doneSelect reads finished jobs, which have no lease.
	doneSelect = `SELECT ` + doneColumns + `, NULL::timestamptz FROM spool_jobs_done d`
)

// scanJob reads one row of jobColumns plus the lease expiry. It returns
// the job and its seq.
func scanJob(row pgx.Row) (*job.Job, int64, error) {
	var (
		j                              job.Job
		seq, backoffBase, backoffMax   int64
		lease, uniqueFor               int64
		priority, attempt, maxAttempts int32
		state, backoffKind             string
		uniqueKey                      *string
		tags, errs                     []byte
		payload, result, progress      []byte
		started, finished, leaseExpiry *time.Time
		durability                     string
		group, letterQueue, letterID   *string
		worker, traceParent            *string
	)
	err := row.Scan(&seq, &j.ID, &j.Queue, &j.Kind, &payload, &priority, &state, &j.RunAt, &attempt, &maxAttempts,
		&backoffKind, &backoffBase, &backoffMax, &j.Backoff.Jitter, &lease, &uniqueKey, &uniqueFor, &tags,
		&result, &errs, &progress, &j.LeaseToken, &j.CancelRequested, &j.CreatedAt, &started, &finished,
		&durability, &group, &letterQueue, &letterID, &worker, &traceParent, &leaseExpiry)
	if err != nil {
		return nil, 0, err
	}
	j.Payload, j.Result, j.Progress = rawOrNil(payload), rawOrNil(result), rawOrNil(progress)
	j.Priority, j.Attempt, j.MaxAttempts = int(priority), int(attempt), int(maxAttempts)
	j.State = job.State(state)
	j.Durability = job.Durability(durability)
	j.Group, j.Worker, j.TraceParent, j.UniqueKey = deref(group), deref(worker), deref(traceParent), deref(uniqueKey)
	if letterQueue != nil && letterID != nil {
		j.DeadLetterOf = job.JobRef{Queue: *letterQueue, ID: *letterID}
	}
	j.RunAt = j.RunAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	j.Backoff.Kind = job.BackoffKind(backoffKind)
	j.Backoff.Base, j.Backoff.Max = time.Duration(backoffBase), time.Duration(backoffMax)
	j.LeaseDuration = time.Duration(lease)
	j.UniqueFor = time.Duration(uniqueFor)
	j.StartedAt, j.FinishedAt, j.LeaseExpiresAt = utc(started), utc(finished), utc(leaseExpiry)
	if len(tags) > 0 {
		if err := json.Unmarshal(tags, &j.Tags); err != nil {
			return nil, 0, fmt.Errorf("decode tags of job %s: %w", j.ID, err)
		}
	}
	if len(errs) > 0 {
		if j.Errors, j.ErrorsDropped, err = store.DecodeErrors(errs); err != nil {
			return nil, 0, fmt.Errorf("read job %s: %w", j.ID, err)
		}
	}
	return &j, seq, nil
}

// scanJobs reads every row of rows and closes it.
func scanJobs(rows pgx.Rows) ([]*job.Job, []int64, error) {
	defer rows.Close()
	var jobs []*job.Job
	var seqs []int64
	for rows.Next() {
		j, seq, err := scanJob(rows)
		if err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, j)
		seqs = append(seqs, seq)
	}
	return jobs, seqs, rows.Err()
}

// utc is *t in UTC, the zero time for nil.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// deref is *p, the zero value for nil.
func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}

func rawOrNil(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

// bytesOrNil is the column value of raw JSON: NULL when absent.
func bytesOrNil(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

// micro is t in UTC at timestamptz's microsecond precision, so that times
// computed here equal the ones read back.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// appendError is, as text, the errors column stored once it records e
// (store.AppendStoredError, which keeps out the NUL jsonb cannot hold).
func appendError(stored []byte, e job.AttemptError) (string, error) {
	b, err := store.AppendStoredError(stored, e)
	if err != nil {
		return "", fmt.Errorf("record attempt error: %w", err)
	}
	return string(b), nil
}

// tstz is the column value of t: NULL for the zero time.
func tstz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: micro(t), Valid: !t.IsZero()}
}

// scanNullTime reads one nullable timestamptz; NULL is the zero time.
func scanNullTime(row pgx.Row, t *time.Time) error {
	var v *time.Time
	if err := row.Scan(&v); err != nil {
		return err
	}
	*t = utc(v)
	return nil
}

// appendOnce appends s to list unless list holds it.
func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// collect runs query through q and reads the one column of its rows.
func collect[T any](ctx context.Context, q querier, query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[T])
}
