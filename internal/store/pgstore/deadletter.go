package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
)

// deadLetters writes the dead-letter copies of the jobs that die: read
// back from spool_jobs_done in the transaction that killed them, each
// written whole (sqlWriteJobs, as an import stores a job) with its wait
// deadline, its queue grouped, its lane copies and its announcement, as
// any job put into a queue gets them.
type deadLetters struct {
	*db
	*beliefs
	flow   *flowControl
	groups *consumerGroups
}

const (
	// sqlDoneBySeqs reads finished jobs by seq.
	sqlDoneBySeqs = doneSelect + ` WHERE d.seq = ANY($1)`
	// sqlGroupsOf reads the consumer groups of the queues $1.
	sqlGroupsOf = `SELECT queue, name FROM spool_consumer_groups WHERE queue = ANY($1::text[])`
)

// write writes in tx, at now, the dead-letter copy of each job of
// letters (by seq: the dead-letter queue), which tx just moved to
// spool_jobs_done dead, and returns by seq the queue and id of each copy.
// The copies' commit waits for the WAL flush as the deaths' does.
func (l *deadLetters) write(ctx context.Context, tx pgx.Tx, letters map[int64]string, now time.Time) (map[int64]job.JobRef, error) {
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
	copies := make([]*job.Job, len(dead))
	ids := make([]string, len(dead))
	var grouped []string // the queues that get copies with a group
	out := make(map[int64]job.JobRef, len(dead))
	for i, d := range dead {
		c := job.DeadLetter(d, letters[deadSeqs[i]], job.NewID(now), now)
		copies[i], ids[i] = c, c.ID
		if c.Group != "" {
			grouped = appendOnce(grouped, c.Queue)
		}
		out[deadSeqs[i]] = job.JobRef{Queue: c.Queue, ID: c.ID}
	}
	if err := l.flow.markGrouped(ctx, tx, grouped); err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	w, err := newWholeJobs(copies)
	if err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	// Under the queues' flow locks, what the copies' rows depend on holds
	// until the commit: their maximum waits and their consumer groups.
	var waits map[string]time.Duration
	var lanes laneSet
	batch := &pgx.Batch{}
	lockWaits(batch, w.queues, &waits)
	batch.Queue(sqlGroupsOf, w.queues).Query(func(rows pgx.Rows) error {
		var queue, name string
		_, err := pgx.ForEachRow(rows, []any{&queue, &name}, func() error {
			lanes.add(queue, name)
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	batch = &pgx.Batch{}
	written := 0
	w.queue(batch, waits, &written)
	l.groups.copyToLanes(tx, batch, lanes, ids, w.queues)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("dead-letter jobs: %w", err)
	}
	if written != len(copies) {
		return nil, fmt.Errorf("dead-letter jobs: %d of %d copies written: a new id is taken", written, len(copies))
	}
	l.announceOnCommit(tx, w.queues)
	return out, nil
}
