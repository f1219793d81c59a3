package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Dead letters in the embedded store: an operation whose job dies reads
// the dead row back and inserts, in the same batch transaction, the copy
// job.DeadLetter makes of it in the dead-letter queue, with the insert of
// JobInsertMany (so that windows, counts and groups are those of any
// insert); a second statement gives the copy the history and the origin
// (a spec of version 2, see spec.go) that an insert does not take.

// sqlLetterHistory writes the spec and errors of a dead-letter copy.
const sqlLetterHistory = `UPDATE jobs SET spec = ?1, errors = ?2 WHERE id = ?3`

// deadLetter inserts the dead-letter copy of the job with seq of queue,
// which a rule just sent to state at now (its row written), when
// job.QueueSettings.DeadLetterFor names a queue for it, and returns the
// copy's queue and id; zero when there is none. The row is read only
// when the queue would copy a job that is not a copy itself.
func (w *writer) deadLetter(queue string, seq int64, state job.State, now time.Time) (job.JobRef, error) {
	q := w.queues[queue]
	if q == nil || q.settings.DeadLetterFor(state, false) == "" {
		return job.JobRef{}, nil
	}
	dead, _, err := scanJob(w.st.jobBySeq.QueryRow(seq))
	if err != nil {
		return job.JobRef{}, fmt.Errorf("read dead job with seq %d: %w", seq, err)
	}
	dlq := q.settings.DeadLetterFor(state, !dead.DeadLetterOf.IsZero())
	if dlq == "" {
		return job.JobRef{}, nil
	}
	return w.insertLetter(job.DeadLetter(dead, dlq, job.NewID(now), now), now)
}

// insertLetter inserts c, a dead-letter copy made at now, and returns its
// queue and id.
func (w *writer) insertLetter(c *job.Job, now time.Time) (job.JobRef, error) {
	p := []store.JobInsertParams{{
		ID: c.ID, Queue: c.Queue, Kind: c.Kind, Payload: c.Payload, Priority: c.Priority, State: c.State, RunAt: c.RunAt,
		MaxAttempts: c.MaxAttempts, Backoff: c.Backoff, LeaseDuration: c.LeaseDuration, Tags: c.Tags, Group: c.Group,
		Durability: c.Durability, TraceParent: c.TraceParent,
	}}
	out := make([]store.InsertResult, 1)
	if err := w.insertJobs(p, now, out); err != nil {
		return job.JobRef{}, fmt.Errorf("dead-letter job %s: %w", c.DeadLetterOf.ID, err)
	}
	if out[0].Duplicate {
		return job.JobRef{}, fmt.Errorf("dead-letter job %s: the new id %s is taken", c.DeadLetterOf.ID, c.ID)
	}
	spec := appendSpec(nil, &spec{
		kind: c.Kind, maxAttempts: c.MaxAttempts, backoff: c.Backoff, lease: c.LeaseDuration, createdAt: c.CreatedAt.UnixNano(),
		durability: w.durabilityOf(c.Durability), tags: c.Tags, deadLetterOf: c.DeadLetterOf, traceParent: c.TraceParent,
	})
	var errs any
	if b, err := store.EncodeErrors(c.Errors, c.ErrorsDropped); err != nil {
		return job.JobRef{}, fmt.Errorf("dead-letter job %s: %w", c.DeadLetterOf.ID, err)
	} else if b != nil {
		errs = string(b)
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlLetterHistory, spec, errs, c.ID); err != nil {
		return job.JobRef{}, fmt.Errorf("dead-letter job %s: write its history: %w", c.DeadLetterOf.ID, err)
	}
	// The window may cache the inserted job: it is the one just written,
	// and nothing has read it yet.
	out[0].Job.Errors, out[0].Job.ErrorsDropped, out[0].Job.DeadLetterOf = c.Errors, c.ErrorsDropped, c.DeadLetterOf
	return job.JobRef{Queue: c.Queue, ID: c.ID}, nil
}
