package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `seq, id, queue, kind, payload, priority, state, run_at, attempt, max_attempts,
	backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, unique_key, unique_for, tags,
	result, errors, progress, lease_token, lease_expires_at, cancel_requested, created_at, started_at, finished_at,
	durability`

const (
	sqlJobByID  = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
	sqlJobBySeq = `SELECT ` + jobColumns + ` FROM jobs WHERE seq = ?`
)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads one row of jobColumns. It returns the job and its seq.
func scanJob(sc scanner) (*job.Job, int64, error) {
	var (
		j                                          job.Job
		seq, priority, runAt, attempt, maxAttempts int64
		backoffBase, backoffMax, lease, unique     int64
		token, cancel, created                     int64
		state, backoffKind, durability             string
		payload, result, progress                  []byte
		uniqueKey, tags, errs                      sql.NullString
		leaseExpires, started, finished            sql.NullInt64
	)
	err := sc.Scan(&seq, &j.ID, &j.Queue, &j.Kind, &payload, &priority, &state, &runAt, &attempt, &maxAttempts,
		&backoffKind, &backoffBase, &backoffMax, &j.Backoff.Jitter, &lease, &uniqueKey, &unique, &tags,
		&result, &errs, &progress, &token, &leaseExpires, &cancel, &created, &started, &finished, &durability)
	if err != nil {
		return nil, 0, err
	}
	j.Payload, j.Result, j.Progress = payload, result, progress
	j.Priority = int(priority)
	j.State = job.State(state)
	j.RunAt = fromNanos(runAt)
	j.Attempt, j.MaxAttempts = int(attempt), int(maxAttempts)
	j.Backoff.Kind = job.BackoffKind(backoffKind)
	j.Backoff.Base = time.Duration(backoffBase)
	j.Backoff.Max = time.Duration(backoffMax)
	j.LeaseDuration = time.Duration(lease)
	j.UniqueKey = uniqueKey.String
	j.UniqueFor = time.Duration(unique)
	j.LeaseToken = token
	j.LeaseExpiresAt = nullTime(leaseExpires)
	j.CancelRequested = cancel != 0
	j.CreatedAt = fromNanos(created)
	j.StartedAt = nullTime(started)
	j.FinishedAt = nullTime(finished)
	j.Durability = job.Durability(durability)
	if tags.Valid {
		if err := json.Unmarshal([]byte(tags.String), &j.Tags); err != nil {
			return nil, 0, fmt.Errorf("decode tags of job %s: %w", j.ID, err)
		}
	}
	if errs.Valid {
		if err := json.Unmarshal([]byte(errs.String), &j.Errors); err != nil {
			return nil, 0, fmt.Errorf("decode errors of job %s: %w", j.ID, err)
		}
	}
	return &j, seq, nil
}

// scanJobs reads every row of rows and closes it.
func scanJobs(rows *sql.Rows) ([]*job.Job, []int64, error) {
	var jobs []*job.Job
	var seqs []int64
	for rows.Next() {
		j, seq, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		jobs = append(jobs, j)
		seqs = append(seqs, seq)
	}
	if err := closeRows(rows); err != nil {
		return nil, nil, err
	}
	return jobs, seqs, nil
}

// closeRows closes rows and reports any error met while iterating.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// fromNanos turns unix nanoseconds into a UTC time.
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// nullTime turns a nullable unix-nanosecond column into a time; NULL is the
// zero time.
func nullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

// nanosOrNull is the column value of t: unix nanoseconds, NULL when zero.
func nanosOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// stringOrNull is the column value of s: NULL when empty.
func stringOrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// blobOrNull is the column value of raw JSON: NULL when absent.
func blobOrNull(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}

// encodeTags is the column value of tags: a JSON array, NULL when empty.
func encodeTags(tags []string) (any, error) {
	if len(tags) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(tags)
	if err != nil {
		return nil, fmt.Errorf("encode tags: %w", err)
	}
	return string(b), nil
}

// encodeAttemptError is one element of the errors column.
func encodeAttemptError(attempt int, message string, at time.Time) (string, error) {
	b, err := json.Marshal(job.AttemptError{Attempt: attempt, Message: message, At: at})
	if err != nil {
		return "", fmt.Errorf("encode attempt error: %w", err)
	}
	return string(b), nil
}

// entryOf is the window entry of j.
func entryOf(j *job.Job, seq int64) entry {
	return entry{priority: j.Priority, runAt: j.RunAt.UnixNano(), seq: seq}
}
