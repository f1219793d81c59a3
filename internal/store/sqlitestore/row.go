package sqlitestore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// jobColumns are the columns scanJob reads, in its order.
const jobColumns = `seq, id, queue, payload, priority, state, run_at, attempt, unique_key,
	result, errors, progress, lease_token, lease_expires_at, cancel_requested, started_at, finished_at, spec, grp, worker`

const (
	sqlJobByID   = `SELECT ` + jobColumns + ` FROM jobs WHERE id = ?`
	sqlJobsByIDs = `SELECT ` + jobColumns + ` FROM jobs WHERE id IN (SELECT value FROM json_each(?))`
	sqlJobBySeq  = `SELECT ` + jobColumns + ` FROM jobs WHERE seq = ?`
)

var stJobBySeq = prepared(sqlJobBySeq)

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// scanJob reads one row of jobColumns. It returns the job and its seq.
func scanJob(sc scanner) (*job.Job, int64, error) {
	var (
		j                               job.Job
		seq, priority, runAt, attempt   int64
		token, cancel                   int64
		state                           string
		payload, result, progress, spec []byte
		uniqueKey, errs, group, worker  sql.NullString
		leaseExpires, started, finished sql.NullInt64
	)
	err := sc.Scan(&seq, &j.ID, &j.Queue, &payload, &priority, &state, &runAt, &attempt, &uniqueKey,
		&result, &errs, &progress, &token, &leaseExpires, &cancel, &started, &finished, &spec, &group, &worker)
	if err != nil {
		return nil, 0, err
	}
	if err := decodeSpec(spec, &j); err != nil {
		return nil, 0, fmt.Errorf("read job %s: %w", j.ID, err)
	}
	j.Payload, j.Result, j.Progress = payload, result, progress
	j.Priority = int(priority)
	j.State = job.State(state)
	j.RunAt = fromNanos(runAt)
	j.Attempt = int(attempt)
	j.UniqueKey = uniqueKey.String
	j.Group = group.String
	j.Worker = worker.String
	j.LeaseToken = token
	j.LeaseExpiresAt = nullTime(leaseExpires)
	j.CancelRequested = cancel != 0
	j.StartedAt = nullTime(started)
	j.FinishedAt = nullTime(finished)
	if errs.Valid {
		if j.Errors, j.ErrorsDropped, err = store.DecodeErrors([]byte(errs.String)); err != nil {
			return nil, 0, fmt.Errorf("read job %s: %w", j.ID, err)
		}
	}
	return &j, seq, nil
}

// scanJobs reads every row of rows (unless err) with scanJob and closes
// rows.
func scanJobs(rows *sql.Rows, err error) ([]*job.Job, []int64, error) {
	if err != nil {
		return nil, nil, err
	}
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

// scanAll reads every row of rows (unless err) with scan and closes rows.
func scanAll[T any](rows *sql.Rows, err error, scan func(r *sql.Rows, v *T) error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, v)
	}
	return out, closeRows(rows)
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

// nullTime turns a nullable unix-nanosecond column into a time, NULL zero.
func nullTime(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
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

// entryOf is the window entry of j.
func entryOf(j *job.Job, seq int64) entry {
	return entry{priority: j.Priority, runAt: j.RunAt.UnixNano(), seq: seq}
}

// seqList is seqs as a JSON array, for json_each.
func seqList(seqs []int64) string {
	buf := make([]byte, 0, len(seqs)*8+2)
	buf = append(buf, '[')
	for i, seq := range seqs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, seq, 10)
	}
	return string(append(buf, ']'))
}
