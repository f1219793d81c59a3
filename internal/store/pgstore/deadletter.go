package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Dead letters on PostgreSQL: a transaction that moves jobs to
// spool_jobs_done dead reads them back there and inserts, in the same
// transaction, the copies job.DeadLetter makes of those whose queue has a
// dead-letter queue, with the insert of JobInsertMany (so that groups,
// flow locks and notifications are those of any insert); a second
// statement gives the copies the history and origin that an insert does
// not take.

const (
	// sqlDoneBySeqs reads finished jobs by seq.
	sqlDoneBySeqs = doneSelect + ` WHERE d.seq = ANY($1)`
	// sqlLetterHistory writes on the copies just inserted (by id) their
	// errors (a JSON array, or '' for none) and the dead job they copy.
	sqlLetterHistory = `UPDATE spool_jobs j SET errors = NULLIF(u.errors, '')::jsonb,
	dead_letter_of_queue = u.of_queue, dead_letter_of_id = u.of_id
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(id, errors, of_queue, of_id)
WHERE j.id = u.id`
)

// deadLetter inserts in tx, at now, the dead-letter copy of each job of
// letters (by seq: the dead-letter queue), which tx just moved to
// spool_jobs_done dead, and returns by seq the queue and id of each copy.
// The copies' commit waits for the WAL flush as the deaths' does.
func (s *Store) deadLetter(ctx context.Context, tx pgx.Tx, letters map[int64]string, now time.Time) (map[int64]job.JobRef, error) {
	if len(letters) == 0 {
		return nil, nil
	}
	seqs := make([]int64, 0, len(letters))
	for seq := range letters {
		seqs = append(seqs, seq)
	}
	rows, err := tx.Query(ctx, sqlDoneBySeqs, seqs)
	if err != nil {
		return nil, fmt.Errorf("read dead jobs: %w", err)
	}
	dead, deadSeqs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("read dead jobs: %w", err)
	}
	if len(dead) != len(letters) {
		return nil, fmt.Errorf("read dead jobs: %d of %d found", len(dead), len(letters))
	}
	params := make([]store.JobInsertParams, len(dead))
	n := len(dead)
	ids, errs, ofQueues, ofIDs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	out := make(map[int64]job.JobRef, n)
	for i, d := range dead {
		c := job.DeadLetter(d, letters[deadSeqs[i]], job.NewID(now), now)
		params[i] = store.JobInsertParams{
			ID: c.ID, Queue: c.Queue, Kind: c.Kind, Payload: c.Payload, Priority: c.Priority, State: c.State, RunAt: c.RunAt,
			MaxAttempts: c.MaxAttempts, Backoff: c.Backoff, LeaseDuration: c.LeaseDuration, Tags: c.Tags, Group: c.Group,
			Durability: c.Durability, TraceParent: c.TraceParent,
		}
		b, err := store.EncodeErrors(c.Errors, c.ErrorsDropped)
		if err != nil {
			return nil, fmt.Errorf("dead-letter job %s: %w", d.ID, err)
		}
		errs[i] = string(b)
		ids[i], ofQueues[i], ofIDs[i] = c.ID, c.DeadLetterOf.Queue, c.DeadLetterOf.ID
		out[deadSeqs[i]] = job.JobRef{Queue: c.Queue, ID: c.ID}
	}
	if _, err := s.markGrouped(ctx, tx, params); err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	res, err := s.insert(ctx, tx, params, now, false)
	if err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	for i, r := range res {
		if r.Duplicate {
			return nil, fmt.Errorf("dead-letter job %s: the new id %s is taken", dead[i].ID, ids[i])
		}
	}
	if _, err := tx.Exec(ctx, sqlLetterHistory, ids, errs, ofQueues, ofIDs); err != nil {
		return nil, fmt.Errorf("dead-letter jobs: write their history: %w", err)
	}
	return out, nil
}
