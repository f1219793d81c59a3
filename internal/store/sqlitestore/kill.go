package sqlitestore

import (
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Dead letters in the embedded store: the copy job.DeadLetter makes of a
// job that dies is written whole by writeLetter, in the death's
// transaction, with a copy in each consumer group of its queue.

const (
	// sqlDieOfWait records the death of a job past its maximum wait: ?2
	// is the state the rule gives it, ?3 its error history with the
	// attempt's error.
	sqlDieOfWait = `UPDATE jobs SET state = ?2, finished_at = ?1, errors = ?3 WHERE seq = ?4`
	// sqlInsertWhole inserts a job available at once, with its history
	// and wait deadline: a dead-letter copy, or its copy for a consumer
	// group.
	sqlInsertWhole = `INSERT INTO jobs (seq, id, queue, payload, priority, state, run_at, spec, grp, errors, wait_until,
	kind, max_attempts, backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, created_at)
VALUES (?, ?, ?, ?, ?, 'available', ?, ?, ?, ?, ?, '', 0, '', 0, 0, 0, 0, 0)`
)

var (
	stDieOfWait   = prepared(sqlDieOfWait)
	stInsertWhole = prepared(sqlInsertWhole)
)

// killPastWait writes the death of j, an available job with seq past its
// queue's maximum wait at now, where attempt.PastWait sends it, and leaves
// its dead-letter copy, if any, whose queue and id it returns. j is the
// job as the claim or the sweep that met it read it; it becomes the dead
// job.
func (w *writer) killPastWait(j *job.Job, seq int64, now time.Time) (job.JobRef, error) {
	end := attempt.PastWait(j.Attempt, !j.DeadLetterOf.IsZero(), w.settingsOf(j.Queue), now)
	j.Errors, j.ErrorsDropped = job.AppendError(j.Errors, j.ErrorsDropped, end.Error)
	errs, err := store.EncodeErrors(j.Errors, j.ErrorsDropped)
	if err != nil {
		return job.JobRef{}, fmt.Errorf("expire job %s: %w", j.ID, err)
	}
	if _, err := w.st.get(stDieOfWait).Exec(now.UnixNano(), string(end.State), string(errs), seq); err != nil {
		return job.JobRef{}, fmt.Errorf("expire job %s: %w", j.ID, err)
	}
	w.fx.move(j.Queue, job.StateAvailable, end.State, 1)
	w.madeUnavailable(j.Queue, j.Group, entryOf(j, seq))
	j.State, j.FinishedAt = end.State, now
	return w.writeLetter(j, end.DeadLetter, now)
}

// letterOf leaves in dlq, unless empty, the dead-letter copy of the job
// with seq, which just died at now (its row written), reading the dead
// row, and returns the copy's queue and id; zero when there is none.
func (w *writer) letterOf(seq int64, dlq string, now time.Time) (job.JobRef, error) {
	if dlq == "" {
		return job.JobRef{}, nil
	}
	dead, _, err := scanJob(w.st.get(stJobBySeq).QueryRow(seq))
	if err != nil {
		return job.JobRef{}, fmt.Errorf("read dead job with seq %d: %w", seq, err)
	}
	return w.writeLetter(dead, dlq, now)
}

// writeLetter leaves in dlq the dead-letter copy of dead, a job that died
// at now (its row written), unless dlq is empty or dead is a copy itself
// (job.QueueSettings.DeadLetterFor), and returns the copy's queue and id;
// zero when there is none.
func (w *writer) writeLetter(dead *job.Job, dlq string, now time.Time) (job.JobRef, error) {
	if dlq == "" || !dead.DeadLetterOf.IsZero() {
		return job.JobRef{}, nil
	}
	c := job.DeadLetter(dead, dlq, job.NewID(now), now)
	if err := w.insertWhole(c); err != nil {
		return job.JobRef{}, fmt.Errorf("dead-letter job %s: %w", dead.ID, err)
	}
	for _, g := range w.lanes[dlq] {
		lc := *c
		lc.ID, lc.Queue = job.CopyID(c.ID, g), job.LaneName(dlq, g)
		lc.Errors, lc.ErrorsDropped, lc.DeadLetterOf = nil, 0, job.JobRef{}
		if err := w.insertWhole(&lc); err != nil {
			return job.JobRef{}, fmt.Errorf("dead-letter job %s: copy to consumer group %s: %w", dead.ID, g, err)
		}
	}
	return job.JobRef{Queue: c.Queue, ID: c.ID}, nil
}

// insertWhole inserts j, a new job available at once with no unique key,
// as it is, and records it as an insert does: its queue is known (and
// grouped when j has a group), counted and, as the window's bound allows,
// holds it in a window.
func (w *writer) insertWhole(j *job.Job) error {
	q, err := w.ensureQueue(j.Queue)
	if err != nil {
		return err
	}
	if j.Group != "" {
		if err := w.markGrouped(j.Queue); err != nil {
			return err
		}
	}
	errs, err := store.EncodeErrors(j.Errors, j.ErrorsDropped)
	if err != nil {
		return err
	}
	var stored any
	if errs != nil {
		stored = string(errs)
	}
	var grp any
	if g, set := q.rowGroup(j.Group); set {
		grp = g
	}
	spec := appendSpec(nil, &spec{
		kind: j.Kind, maxAttempts: j.MaxAttempts, backoff: j.Backoff, leaseFor: j.LeaseDuration, createdAt: j.CreatedAt.UnixNano(),
		durability: j.Durability, tags: j.Tags, deadLetterOf: j.DeadLetterOf, traceParent: j.TraceParent,
	})
	seq := w.nextSeq
	if _, err := w.st.get(stInsertWhole).Exec(seq, j.ID, j.Queue, blobOrNull(j.Payload), j.Priority, j.RunAt.UnixNano(), spec, grp,
		stored, waitDeadline(0, j.RunAt, q.settings.MaxWait)); err != nil {
		return fmt.Errorf("insert job %s: %w", j.ID, err)
	}
	w.nextSeq++
	w.added(j, seq)
	return nil
}

// noteQueue adds queue, unless empty, to queues, once: a queue that a
// call made jobs available in.
func noteQueue(queues *[]string, queue string) {
	if queue != "" && !slices.Contains(*queues, queue) {
		*queues = append(*queues, queue)
	}
}
