package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"github.com/spoolq/spool/internal/store"
)

// A claim kills the jobs it reads past their queue's maximum wait
// (handOut); the sweep kills those no claim reaches, found by wait_until
// (job.WaitDeadline), set only in queues with a maximum wait and indexed
// while the job waits unstarted (jobs_wait).

const (
	// sqlWaitingPast reads up to ?4 jobs waiting unstarted with deadlines
	// up to ?1, in deadline order after deadline ?2 and seq ?3.
	sqlWaitingPast = `SELECT seq, wait_until FROM jobs INDEXED BY jobs_wait
WHERE wait_until IS NOT NULL AND state = 'available' AND attempt = 0 AND wait_until <= ?1
	AND (wait_until > ?2 OR (wait_until = ?2 AND seq > ?3))
ORDER BY wait_until, seq LIMIT ?4`
	// sqlNextWait is the earliest deadline after ?1.
	sqlNextWait = `SELECT MIN(wait_until) FROM jobs INDEXED BY jobs_wait
WHERE wait_until IS NOT NULL AND state = 'available' AND attempt = 0 AND wait_until > ?1`
	sqlFixWait = `UPDATE jobs SET wait_until = ?1 WHERE seq = ?2`
)

// expireChunk is how many candidates one read of the sweep takes.
const expireChunk = 256

// JobExpireWaiting kills the jobs past their queues' maximum waits that
// no claim met, passing over leased ones; see store.Maintainer.
func (s *Store) JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(ctx, "expire waiting jobs", func(w *writer, res *store.MaintenanceResult) error {
		return w.expireWaiting(now.UTC(), limit, res)
	})
}

// candidate is a row the sweep found past its wait deadline.
type candidate struct{ seq, deadline int64 }

// expireWaiting kills up to limit jobs past their wait at now and reports
// the next deadline.
func (w *writer) expireWaiting(now time.Time, limit int, res *store.MaintenanceResult) error {
	ctx := context.Background()
	after := candidate{deadline: math.MinInt64}
	for res.Count < limit {
		rows, err := w.conn.QueryContext(ctx, sqlWaitingPast, now.UnixNano(), after.deadline, after.seq, expireChunk)
		found, err := scanAll(rows, err, func(r *sql.Rows, c *candidate) error { return r.Scan(&c.seq, &c.deadline) })
		if err != nil {
			return fmt.Errorf("find jobs past their wait: %w", err)
		}
		for _, c := range found {
			after = c
			if res.Count >= limit {
				break
			}
			if w.leases.leased(c.seq) {
				continue
			}
			if err := w.expireRow(c, now, res); err != nil {
				return err
			}
		}
		if len(found) < expireChunk {
			break
		}
	}
	var next sql.NullInt64
	if err := w.conn.QueryRowContext(ctx, sqlNextWait, now.UnixNano()).Scan(&next); err != nil {
		return fmt.Errorf("find the next wait deadline: %w", err)
	}
	res.Next = nullTime(next)
	return nil
}

// expireRow kills the job of c when it is past its wait at now, counted
// in res; a row whose deadline the rule does not share gets the rule's.
func (w *writer) expireRow(c candidate, now time.Time, res *store.MaintenanceResult) error {
	j, _, err := scanJob(w.st.get(stJobBySeq).QueryRow(c.seq))
	if err != nil {
		return fmt.Errorf("read job with seq %d: %w", c.seq, err)
	}
	if q := w.queues[j.Queue]; q == nil || !q.pastWait(j, now) {
		deadline := waitDeadline(j.Attempt, j.RunAt, w.settingsOf(j.Queue).MaxWait)
		if _, err := w.conn.ExecContext(context.Background(), sqlFixWait, deadline, c.seq); err != nil {
			return fmt.Errorf("set the wait deadline of job %s: %w", j.ID, err)
		}
		return nil
	}
	letter, err := w.killPastWait(j, c.seq, now)
	if err != nil {
		return err
	}
	res.Count++
	noteQueue(&res.Available, letter.Queue)
	return nil
}
