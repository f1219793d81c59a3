package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The outcome of a hand-out is the first time the database hears of it:
// each statement writes the attempt, token, start time and worker of the
// lease together with the outcome.
const (
	sqlJobExists = `SELECT 1 FROM jobs WHERE id = ?`
	sqlComplete  = `UPDATE jobs SET state = ?1, result = ?2, finished_at = ?3, attempt = ?4, lease_token = ?5,
	started_at = ?6, progress = ?7, worker = ?8, lease_expires_at = NULL WHERE seq = ?9`
	// completeValues is one row of sqlCompleteRows, in the order of
	// sqlComplete's parameters.
	completeValues = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlFinishAttempt records a failed, expired or released attempt: ?8
	// is the error history with the attempt's error (appendError), NULL
	// for an attempt that records none.
	sqlFinishAttempt = `UPDATE jobs SET state = ?1, run_at = COALESCE(?2, run_at), finished_at = ?3, attempt = ?4,
	lease_token = ?5, started_at = ?6, progress = ?7, lease_expires_at = NULL, errors = COALESCE(?8, errors),
	worker = ?9
WHERE seq = ?10`
)

var (
	stJobExists     = prepared(sqlJobExists)
	stFinishAttempt = prepared(sqlFinishAttempt)
	stErrorsBySeq   = prepared(`SELECT errors FROM jobs WHERE seq = ?`)
	// stCompleteRows[k] acknowledges 1<<k jobs.
	stCompleteRows = func() (ids [completeChunkShift + 1]rawID) {
		for k := range ids {
			ids[k] = preparedRaw(sqlCompleteRows(1 << k))
		}
		return ids
	}()
)

// completeChunk is how many acks one multi-row UPDATE carries at most: one
// statement for many rows spends less per row on statement overhead than
// one statement each.
const completeChunk = 1 << completeChunkShift

// completeChunkShift is the base-2 logarithm of completeChunk.
const completeChunkShift = 5

// sqlCompleteRows acknowledges n jobs: sqlComplete for one, a multi-row
// UPDATE for more.
func sqlCompleteRows(n int) string {
	if n == 1 {
		return sqlComplete
	}
	return `WITH v(state, result, finished_at, attempt, lease_token, started_at, progress, worker, seq) AS (VALUES ` +
		strings.TrimSuffix(strings.Repeat(completeValues+",", n), ",") + `)
UPDATE jobs SET state = v.state, result = v.result, finished_at = v.finished_at, attempt = v.attempt,
	lease_token = v.lease_token, started_at = v.started_at, progress = v.progress, worker = v.worker,
	lease_expires_at = NULL
FROM v WHERE jobs.seq = v.seq`
}

// holder returns the lease of job id when token is its current one. miss
// is job.ErrNotFound or job.ErrLeaseLost when it is not; err is a database
// failure.
func (w *writer) holder(id string, token int64) (l *lease, miss, err error) {
	if l = w.leases.get(id); l != nil {
		if l.token != token {
			return nil, job.ErrLeaseLost, nil
		}
		return l, nil, nil
	}
	var one int
	err = w.st.get(stJobExists).QueryRow(id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, job.ErrNotFound, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read job %s: %w", id, err)
	}
	return nil, job.ErrLeaseLost, nil
}

// forEachHeld runs apply for every item whose token is its job's current
// lease, with that lease; an item that misses (unknown job, lease lost)
// gets the miss in its outcome instead. An error from apply or from
// reading stops the batch.
func forEachHeld[T any](w *writer, items []T, key func(*T) (string, int64), out []store.Outcome,
	apply func(it *T, l *lease, o *store.Outcome) error) error {
	for i := range items {
		id, token := key(&items[i])
		l, miss, err := w.holder(id, token)
		if err != nil {
			return err
		}
		if miss != nil {
			out[i] = store.Outcome{Err: miss}
			continue
		}
		if err := apply(&items[i], l, &out[i]); err != nil {
			return err
		}
	}
	return nil
}

// JobComplete acknowledges jobs item by item, each where
// job.AfterCompletion sends it; see store.Claimer.
func (s *Store) JobComplete(ctx context.Context, p *store.JobCompleteParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	relaxed := leasesRelaxed(p.Items, func(it *store.JobCompleteItem) string { return it.ID })
	err := s.doRelaxed(ctx, len(p.Items), relaxed, func(w *writer) error {
		now := p.Now.UTC().UnixNano()
		acks := completions{w: w}
		err := forEachHeld(w, p.Items, completeKey, out, func(it *store.JobCompleteItem, l *lease, o *store.Outcome) error {
			return acks.ack(l, it.Result, now, o)
		})
		if err != nil {
			return err
		}
		return acks.flush()
	})
	if err != nil {
		return nil, wrap("complete jobs", err)
	}
	return out, nil
}

func completeKey(it *store.JobCompleteItem) (string, int64) { return it.ID, it.Token }

// completions collects the rows of acknowledged jobs and writes them with
// multi-row statements: completeChunk at a time, and what is left with one
// statement for each power of two in its count.
type completions struct {
	w    *writer
	rows []completeRow
}

// completeRow is the row of an acknowledged job, in the order of
// sqlComplete's parameters.
type completeRow struct {
	state      job.State
	result     json.RawMessage
	finishedAt int64
	attempt    int
	token      int64
	startedAt  int64
	progress   json.RawMessage
	worker     string
	seq        int64
}

// ack acknowledges the job of lease l with result at now (Unix
// nanoseconds), where job.AfterCompletion sends it, and fills in o. Its
// row is written with a chunk's rows, once they fill one, or by flush.
func (c *completions) ack(l *lease, result json.RawMessage, now int64, o *store.Outcome) error {
	*o = l.outcome(job.AfterCompletion(l.cancel))
	c.rows = append(c.rows, completeRow{state: o.State, result: result, finishedAt: now, attempt: l.attempt, token: l.token,
		startedAt: l.startedAt.UnixNano(), progress: l.progress, worker: l.worker, seq: l.seq})
	c.w.finish(l, o.State)
	if len(c.rows) < completeChunk {
		return nil
	}
	return c.flush()
}

// flush writes every collected row, each statement acknowledging the
// largest power of two of rows, up to completeChunk, that is left.
func (c *completions) flush() error {
	err := inSizedRuns(c.rows, completeChunkShift, func(run []completeRow, shift int) error {
		return c.write(run, c.w.st.getRaw(stCompleteRows[shift]))
	})
	c.rows = c.rows[:0]
	return err
}

// write writes rows with stmt, which acknowledges as many jobs.
func (c *completions) write(rows []completeRow, stmt *rawStmt) error {
	args := stmt.args()
	for i := range rows {
		r := &rows[i]
		args.addText(string(r.state))
		args.addBlobOrNull(r.result)
		args.addInt(r.finishedAt)
		args.addInt(int64(r.attempt))
		args.addInt(r.token)
		args.addInt(r.startedAt)
		args.addBlobOrNull(r.progress)
		args.addTextOrNull(r.worker)
		args.addInt(r.seq)
	}
	if _, err := stmt.execArgs(); err != nil {
		return fmt.Errorf("complete %d jobs (seqs %d to %d): %w", len(rows), rows[0].seq, rows[len(rows)-1].seq, err)
	}
	return nil
}

// finish forgets lease l, whose job moved to state in the database, and
// records the move in the counts and, for an available job, its window.
func (w *writer) finish(l *lease, state job.State) {
	w.leases.drop(l)
	w.fx.move(l.queue, job.StateActive, state, 1)
	if state == job.StateAvailable {
		w.madeAvailable(l.queue, l.group, l.key)
	} else {
		w.leftAvailable(l.queue, l.seq)
	}
	if state.Final() {
		w.unhold(l.queue, l.group, l.seq)
	}
}

// endAttempt writes the end of l's attempt with the job moving to state;
// runAt is set for a retrying job, attemptErr is the error to record (or
// empty), and attempt is what the attempt count becomes.
func (w *writer) endAttempt(l *lease, state job.State, runAt time.Time, now time.Time, attempt int, attemptErr string) error {
	var finished, run, msg any
	if state.Final() {
		finished = now.UnixNano()
	}
	if !runAt.IsZero() {
		run = runAt.UnixNano()
	}
	if attemptErr != "" {
		errs, err := w.appendError(l.seq, job.AttemptError{Attempt: l.attempt, Message: attemptErr, At: now})
		if err != nil {
			return err
		}
		msg = errs
	}
	var progress any
	if state == job.StateRetrying || state.Final() {
		progress = blobOrNull(l.progress)
	}
	if _, err := w.st.get(stFinishAttempt).Exec(string(state), run, finished, attempt, l.token, l.startedAt.UnixNano(),
		progress, msg, stringOrNull(l.worker), l.seq); err != nil {
		return fmt.Errorf("end attempt of job %s: %w", l.id, err)
	}
	w.finish(l, state)
	return nil
}

// appendError is the errors column of the row with seq once it records
// e (see store.AppendStoredError).
func (w *writer) appendError(seq int64, e job.AttemptError) (string, error) {
	var stored sql.NullString
	if err := w.st.get(stErrorsBySeq).QueryRow(seq).Scan(&stored); err != nil {
		return "", fmt.Errorf("read the errors of job with seq %d: %w", seq, err)
	}
	b, err := store.AppendStoredError([]byte(stored.String), e)
	if err != nil {
		return "", fmt.Errorf("record an error of job with seq %d: %w", seq, err)
	}
	return string(b), nil
}

// outcome is the outcome of l's attempt ending with its job in state.
func (l *lease) outcome(state job.State) store.Outcome {
	return store.Outcome{Queue: l.queue, State: state, Kind: l.kind, Attempt: l.attempt, StartedAt: l.startedAt}
}

// JobFail records failed attempts item by item, each where
// job.AfterFailure sends it; see store.Claimer.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	relaxed := leasesRelaxed(p.Items, func(it *store.JobFailItem) string { return it.ID })
	err := s.doRelaxed(ctx, len(p.Items), relaxed, func(w *writer) error {
		now := p.Now.UTC()
		return forEachHeld(w, p.Items, failKey, out, func(it *store.JobFailItem, l *lease, o *store.Outcome) error {
			return w.failAttempt(it, l, now, p.Rand, o)
		})
	})
	if err != nil {
		return nil, wrap("fail jobs", err)
	}
	return out, nil
}

func failKey(it *store.JobFailItem) (string, int64) { return it.ID, it.Token }

// failAttempt ends l's attempt as failed by it, where job.AfterFailure
// sends it, leaving a copy in the dead-letter queue of a job that dies.
func (w *writer) failAttempt(it *store.JobFailItem, l *lease, now time.Time, rnd func() float64, o *store.Outcome) error {
	state, runAt := job.AfterFailure(&job.Failure{CancelRequested: l.cancel, Attempt: l.attempt, MaxAttempts: l.maxAttempts,
		NoRetry: it.NoRetry, RetryAfter: it.RetryAfter, Backoff: l.backoff}, now, rnd)
	*o = l.outcome(state)
	o.RunAt = runAt
	if err := w.endAttempt(l, state, runAt, now, l.attempt, it.Message); err != nil {
		return err
	}
	var err error
	o.DeadLetter, err = w.letterOf(l.queue, l.seq, state, now)
	return err
}

// JobExtend moves leases forward item by item; see store.Claimer. A
// heartbeat changes only memory.
func (s *Store) JobExtend(ctx context.Context, p *store.JobExtendParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	err := s.doRelaxed(ctx, len(p.Items), writesNothing, func(w *writer) error {
		now := p.Now.UTC()
		key := func(it *store.JobExtendItem) (string, int64) { return it.ID, it.Token }
		return forEachHeld(w, p.Items, key, out, func(it *store.JobExtendItem, l *lease, o *store.Outcome) error {
			dur := it.Lease
			if dur <= 0 {
				dur = l.duration
			}
			expires := now.Add(dur)
			w.leases.change(l, func(l *lease) { l.expiresAt = expires })
			*o = store.Outcome{Queue: l.queue, State: job.StateActive, LeaseExpiresAt: expires, CancelRequested: l.cancel}
			return nil
		})
	})
	if err != nil {
		return nil, wrap("extend leases", err)
	}
	return out, nil
}

// JobProgress stores a progress report of an active job; see
// store.Claimer. The report lives with the lease in memory and is written
// with the attempt's outcome.
func (s *Store) JobProgress(ctx context.Context, p *store.JobProgressParams) error {
	return wrap("report progress", s.doRelaxed(ctx, 1, writesNothing, func(w *writer) error {
		l, miss, err := w.holder(p.ID, p.Token)
		if err != nil {
			return err
		}
		if miss != nil {
			return fmt.Errorf("job %s: %w", p.ID, miss)
		}
		progress := append([]byte(nil), p.Progress...)
		w.leases.change(l, func(l *lease) { l.progress = progress })
		return nil
	}))
}

// JobRelease hands active jobs back unrun, item by item, each where
// job.AfterRelease sends it; see store.Claimer.
func (s *Store) JobRelease(ctx context.Context, p *store.JobReleaseParams) ([]store.Outcome, error) {
	out := make([]store.Outcome, len(p.Items))
	relaxed := leasesRelaxed(p.Items, func(it *store.JobReleaseItem) string { return it.ID })
	err := s.doRelaxed(ctx, len(p.Items), relaxed, func(w *writer) error {
		now := p.Now.UTC()
		key := func(it *store.JobReleaseItem) (string, int64) { return it.ID, it.Token }
		return forEachHeld(w, p.Items, key, out, func(_ *store.JobReleaseItem, l *lease, o *store.Outcome) error {
			state, attempt := job.AfterRelease(l.cancel, l.attempt)
			*o = l.outcome(state)
			if err := w.endAttempt(l, state, time.Time{}, now, attempt, ""); err != nil {
				return err
			}
			if !job.HoldsGroup(state, attempt) {
				// A first attempt handed back unrun no longer holds its
				// ordered group, as a restart reads it.
				w.unhold(l.queue, l.group, l.seq)
			}
			return nil
		})
	})
	if err != nil {
		return nil, wrap("release jobs", err)
	}
	return out, nil
}

// leasesRelaxed returns a relaxed check (see committer.do) for the
// outcomes of items: none of their active jobs is of full durability.
func leasesRelaxed[T any](items []T, id func(*T) string) func(*writer) bool {
	return func(w *writer) bool {
		for i := range items {
			if l := w.leases.get(id(&items[i])); l != nil && l.durability == job.DurabilityFull {
				return false
			}
		}
		return true
	}
}
