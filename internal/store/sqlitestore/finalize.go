package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// A hand-out reaches the database only with its outcome: each statement
// writes the lease's attempt, token, start time and worker with it.
const (
	sqlJobExists = `SELECT 1 FROM jobs WHERE id = ?`
	sqlComplete  = `UPDATE jobs SET state = ?1, result = ?2, finished_at = ?3, attempt = ?4, lease_token = ?5,
	started_at = ?6, progress = ?7, worker = ?8, lease_expires_at = NULL WHERE seq = ?9`
	// completeValues is one row of sqlCompleteRows, in sqlComplete's order.
	completeValues = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlFinishAttempt records a failed, expired or released attempt; ?8
	// is the new error history, NULL to keep it.
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

// completeChunk is how many acks one multi-row UPDATE carries at most,
// 1<<completeChunkShift.
const (
	completeChunk      = 1 << completeChunkShift
	completeChunkShift = 5
)

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

// holder returns the lease of job id when token is its current one, else
// its miss (attempt.Miss); err is a database failure.
func (w *writer) holder(id string, token int64) (l *lease, miss, err error) {
	if l = w.leases.get(id); l != nil {
		if l.token != token {
			return nil, job.ErrLeaseLost, nil
		}
		return l, nil, nil
	}
	var one int
	err = w.st.get(stJobExists).QueryRow(id).Scan(&one)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("read job %s: %w", id, err)
	}
	return nil, attempt.Miss(err == nil), nil
}

// forEachHeld runs apply for every item that holds its job's lease (named
// by key); the others get their miss. An error stops the batch.
func forEachHeld[T any](w *writer, items []T, key func(*T) (string, int64), out []job.Outcome,
	apply func(it *T, l *lease, o *job.Outcome) error) error {
	for i := range items {
		id, token := key(&items[i])
		l, miss, err := w.holder(id, token)
		if err != nil {
			return err
		}
		if miss != nil {
			out[i] = job.Outcome{Err: miss}
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
func (s *Store) JobComplete(ctx context.Context, p *store.JobCompleteParams) ([]job.Outcome, error) {
	out := make([]job.Outcome, len(p.Items))
	relaxed := leasesRelaxed(p.Items, store.CompleteKey)
	err := s.doRelaxed(ctx, len(p.Items), relaxed, func(w *writer) error {
		now := p.Now.UTC().UnixNano()
		acks := completions{w: w}
		err := forEachHeld(w, p.Items, store.CompleteKey, out, func(it *job.CompleteItem, l *lease, o *job.Outcome) error {
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

// completions collects the rows of acknowledged jobs and writes them with
// multi-row statements (inSizedRuns).
type completions struct {
	w    *writer
	rows []completeRow
}

// completeRow is an acknowledged job: the lease it held, its new state
// and its result.
type completeRow struct {
	l          *lease
	state      job.State
	result     json.RawMessage
	finishedAt int64
}

// ack acknowledges the job of lease l with result at now (Unix
// nanoseconds), where attempt.Complete sends it, and fills in o; its row
// is written once a chunk fills, or by flush.
func (c *completions) ack(l *lease, result json.RawMessage, now int64, o *job.Outcome) error {
	h := l.held()
	end := attempt.Complete(&h)
	*o = store.EndOutcome(&h, &end)
	c.rows = append(c.rows, completeRow{l: l, state: o.State, result: result, finishedAt: now})
	c.w.finish(l, o.State)
	if len(c.rows) < completeChunk {
		return nil
	}
	return c.flush()
}

// flush writes every collected row.
func (c *completions) flush() error {
	err := inSizedRuns(c.rows, completeChunkShift, c.write)
	c.rows = c.rows[:0]
	return err
}

// write writes rows, 1<<shift of them, in one statement.
func (c *completions) write(rows []completeRow, shift int) error {
	stmt := c.w.st.getRaw(stCompleteRows[shift])
	args := stmt.args()
	for i := range rows {
		r, l := &rows[i], rows[i].l
		args.addText(string(r.state))
		args.addBlobOrNull(r.result)
		args.addInt(r.finishedAt)
		args.addInt(int64(l.attempt))
		args.addInt(l.token)
		args.addInt(l.startedAt.UnixNano())
		args.addBlobOrNull(l.progress)
		args.addTextOrNull(l.worker)
		args.addInt(l.seq)
	}
	if _, err := stmt.execArgs(); err != nil {
		return fmt.Errorf("complete %d jobs (seqs %d to %d): %w", len(rows), rows[0].l.seq, rows[len(rows)-1].l.seq, err)
	}
	return nil
}

// finish forgets lease l, whose job moved to state in the database, in
// the counts, windows and ordered holds.
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

// endAttempt writes the end of l's attempt at now as end says, leaving
// the dead-letter copy of a job that dies, whose queue and id it returns.
// In an ordered queue, an end that sends the job back to wait sends the
// rest of its run back too (attempt.ReturnsRun).
func (w *writer) endAttempt(l *lease, end *attempt.End, now time.Time) (job.JobRef, error) {
	ref, err := w.endOne(l, end, now)
	if err != nil {
		return ref, err
	}
	q := w.queues[l.queue]
	if q == nil || !attempt.ReturnsRun(q.limits.Ordered, l.group, end) || w.leases.inGroup(l.queue, l.group) == 0 {
		return ref, nil
	}
	// The holds are read again: the run's rest holds nothing any more.
	q.holds = nil
	return ref, w.returnRun(l, now)
}

// returnRun hands the rest of l's run back unrun (attempt.RunTail,
// attempt.Release), its last job first.
func (w *writer) returnRun(l *lease, now time.Time) error {
	var active []int64
	for _, o := range w.leases.ofQueue(l.queue) {
		if o.group == l.group {
			active = append(active, o.seq)
		}
	}
	tail := attempt.RunTail(l.seq, active)
	for i := len(tail) - 1; i >= 0; i-- {
		o := w.leases.bySeq[tail[i]]
		h := o.held()
		end := attempt.Release(&h)
		if _, err := w.endOne(o, &end, now); err != nil {
			return err
		}
	}
	return nil
}

// endOne is endAttempt for l alone.
func (w *writer) endOne(l *lease, end *attempt.End, now time.Time) (job.JobRef, error) {
	var finished, run, msg any
	if end.State.Final() {
		finished = now.UnixNano()
	}
	if !end.RunAt.IsZero() {
		run = end.RunAt.UnixNano()
	}
	if end.Record {
		errs, err := w.appendError(l.seq, end.Error)
		if err != nil {
			return job.JobRef{}, err
		}
		msg = errs
	}
	var progress any
	if end.State == job.StateRetrying || end.State.Final() {
		progress = blobOrNull(l.progress)
	}
	if _, err := w.st.get(stFinishAttempt).Exec(string(end.State), run, finished, end.Attempt, l.token, l.startedAt.UnixNano(),
		progress, msg, stringOrNull(l.worker), l.seq); err != nil {
		return job.JobRef{}, fmt.Errorf("end attempt of job %s: %w", l.id, err)
	}
	w.finish(l, end.State)
	if !end.State.Final() && !end.HoldsGroup() { // finish frees a final job's group
		w.unhold(l.queue, l.group, l.seq)
	}
	return w.letterOf(l.seq, end.DeadLetter, now)
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

// held is the attempt of l, as the rules see it; whether its job is a
// dead-letter copy only letterOf reads.
func (l *lease) held() attempt.Held {
	return attempt.Held{Queue: l.queue, Kind: l.kind, Attempt: l.attempt, MaxAttempts: l.maxAttempts, Backoff: l.backoff,
		CancelRequested: l.cancel, StartedAt: l.startedAt}
}

// settingsOf are the settings of queue, zero for a queue the writer does
// not know.
func (w *writer) settingsOf(queue string) job.QueueSettings {
	if q := w.queues[queue]; q != nil {
		return q.settings
	}
	return job.QueueSettings{}
}

// endEach runs, as one operation of the writer, end for each of items
// that holds its lease (forEachHeld) and returns their outcomes; what
// names the call in errors, relaxed is committer.do's.
func endEach[T any](ctx context.Context, s *Store, what string, items []T, key func(*T) (string, int64),
	relaxed func(*writer) bool, end func(w *writer, it *T, l *lease, o *job.Outcome) error) ([]job.Outcome, error) {
	out := make([]job.Outcome, len(items))
	err := s.doRelaxed(ctx, len(items), relaxed, func(w *writer) error {
		return forEachHeld(w, items, key, out, func(it *T, l *lease, o *job.Outcome) error { return end(w, it, l, o) })
	})
	if err != nil {
		return nil, wrap(what, err)
	}
	return out, nil
}

// JobFail records failed attempts item by item, each where
// attempt.Fail sends it; see store.Claimer.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) ([]job.Outcome, error) {
	now := p.Now.UTC()
	return endEach(ctx, s, "fail jobs", p.Items, store.FailKey, leasesRelaxed(p.Items, store.FailKey),
		func(w *writer, it *job.FailItem, l *lease, o *job.Outcome) error {
			return w.failAttempt(it, l, now, p.Rand, o)
		})
}

// failAttempt ends l's attempt as failed by it, where attempt.Fail sends
// it, leaving a copy in the dead-letter queue of a job that dies.
func (w *writer) failAttempt(it *job.FailItem, l *lease, now time.Time, rnd func() float64, o *job.Outcome) error {
	h := l.held()
	end := attempt.Fail(&h, &attempt.Failure{NoRetry: it.NoRetry, RetryAfter: it.RetryAfter, Message: it.Message},
		w.settingsOf(l.queue), now, rnd)
	*o = store.EndOutcome(&h, &end)
	var err error
	o.DeadLetter, err = w.endAttempt(l, &end, now)
	return err
}

// JobExtend moves leases forward item by item, in memory only; see
// store.Claimer.
func (s *Store) JobExtend(ctx context.Context, p *store.JobExtendParams) ([]job.Outcome, error) {
	now := p.Now.UTC()
	return endEach(ctx, s, "extend leases", p.Items, store.ExtendKey, writesNothing,
		func(w *writer, it *job.ExtendItem, l *lease, o *job.Outcome) error {
			dur := it.Lease
			if dur <= 0 {
				dur = l.duration
			}
			expires := now.Add(dur)
			w.leases.change(l, func(l *lease) { l.expiresAt = expires })
			*o = store.Extended(l.queue, expires, l.cancel)
			return nil
		})
}

// JobProgress keeps a progress report of an active job with its lease in
// memory, written with the attempt's outcome; see store.Claimer.
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
// attempt.Release sends it; see store.Claimer.
func (s *Store) JobRelease(ctx context.Context, p *store.JobReleaseParams) ([]job.Outcome, error) {
	now := p.Now.UTC()
	return endEach(ctx, s, "release jobs", p.Items, store.ReleaseKey, leasesRelaxed(p.Items, store.ReleaseKey),
		func(w *writer, _ *job.ReleaseItem, l *lease, o *job.Outcome) error {
			h := l.held()
			end := attempt.Release(&h)
			*o = store.EndOutcome(&h, &end)
			_, err := w.endAttempt(l, &end, now)
			return err
		})
}

// leasesRelaxed is committer.do's relaxed check for the outcomes of items,
// named by key: none of their active jobs is of full durability.
func leasesRelaxed[T any](items []T, key func(*T) (string, int64)) func(*writer) bool {
	return func(w *writer) bool {
		for i := range items {
			id, _ := key(&items[i])
			if l := w.leases.get(id); l != nil && l.durability == job.DurabilityFull {
				return false
			}
		}
		return true
	}
}
