package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Maximum waits in the embedded store. A claim reads every job it hands
// out anyway (from a window's cache or the database), so it checks each
// against its queue's maximum wait there (job.PastMaxWait) and kills the
// ones past it instead of leasing them; they take no place under a
// queue's limits and count as no start. The jobs that no claim reaches
// are killed by the sweep (JobExpireWaiting), which finds them by
// wait_until, the moment from which a job may no longer start: set on
// the rows of queues with a maximum wait only, and indexed while the row
// waits unstarted (jobs_wait), so that queues without one pay nothing
// and the sweep reads the jobs past their wait, not the backlog. The
// column follows the rule's deadline: an insert sets it, a new maximum
// wait sets it for the queue's pending jobs, a retry by hand for the job
// it makes available again.

const (
	// sqlSetWaits sets the wait deadline of the rows with the seqs of the
	// JSON array ?2, just inserted into a queue with the maximum wait ?1.
	sqlSetWaits = `UPDATE jobs NOT INDEXED SET wait_until = run_at + ?1 WHERE seq IN (SELECT value FROM json_each(?2))`
	// sqlSetQueueWaits sets the wait deadline of the pending jobs of queue
	// ?1 for the maximum wait ?2; none when it is 0.
	sqlSetQueueWaits = `UPDATE jobs SET wait_until = CASE WHEN ?2 > 0 THEN run_at + ?2 END
WHERE queue = ?1 AND state IN ('scheduled', 'available', 'retrying')`
	// sqlWaitingPast reads, in deadline order after the deadline ?2 and
	// seq ?3, up to ?4 jobs waiting unstarted whose deadline is ?1 or
	// before.
	sqlWaitingPast = `SELECT seq, wait_until FROM jobs INDEXED BY jobs_wait
WHERE wait_until IS NOT NULL AND state = 'available' AND attempt = 0 AND wait_until <= ?1
	AND (wait_until > ?2 OR (wait_until = ?2 AND seq > ?3))
ORDER BY wait_until, seq LIMIT ?4`
	// sqlNextWait is the earliest deadline after ?1 of a job waiting
	// unstarted.
	sqlNextWait = `SELECT MIN(wait_until) FROM jobs INDEXED BY jobs_wait
WHERE wait_until IS NOT NULL AND state = 'available' AND attempt = 0 AND wait_until > ?1`
	// sqlFixWait sets the wait deadline of one row.
	sqlFixWait = `UPDATE jobs SET wait_until = ?1 WHERE seq = ?2`
	// sqlDieOfWait records the death of a job past its maximum wait: ?2
	// is the state the rule gives it, ?3 its error history with the
	// attempt error (appendError).
	sqlDieOfWait = `UPDATE jobs SET state = ?2, finished_at = ?1, errors = ?3 WHERE seq = ?4`
)

// expireChunk is how many candidates one read of the sweep takes.
const expireChunk = 256

// waitDeadline is the stored form of job.WaitDeadline: Unix nanoseconds,
// NULL for none.
func waitDeadline(attempt int, runAt time.Time, maxWait time.Duration) any {
	d := job.WaitDeadline(attempt, runAt, maxWait)
	if d.IsZero() {
		return nil
	}
	return d.UnixNano()
}

// setWaits sets the wait deadlines of jobs[i] for i in pending, just
// inserted with the seqs from first on, whose queues have a maximum wait.
func (w *writer) setWaits(jobs []store.JobInsertParams, pending []int, first int64) error {
	var byWait map[time.Duration][]int64
	for k, i := range pending {
		q := w.queues[jobs[i].Queue]
		if q == nil || q.settings.MaxWait <= 0 {
			continue
		}
		if byWait == nil {
			byWait = make(map[time.Duration][]int64)
		}
		byWait[q.settings.MaxWait] = append(byWait[q.settings.MaxWait], first+int64(k))
	}
	for wait, seqs := range byWait {
		if _, err := w.conn.ExecContext(context.Background(), sqlSetWaits, int64(wait), seqList(seqs)); err != nil {
			return fmt.Errorf("set wait deadlines: %w", err)
		}
	}
	return nil
}

// setQueueWaits sets the wait deadlines of the pending jobs of queue for
// its maximum wait (none when zero).
func (w *writer) setQueueWaits(queue string, maxWait time.Duration) error {
	if _, err := w.conn.ExecContext(context.Background(), sqlSetQueueWaits, queue, int64(maxWait)); err != nil {
		return fmt.Errorf("set wait deadlines of queue %s: %w", queue, err)
	}
	w.touched = true
	return nil
}

// pastWait reports whether j, an available job of q, may no longer start
// at now.
func pastWait(q *wqueue, j *job.Job, now time.Time) bool {
	return q.settings.MaxWait > 0 && job.PastMaxWait(j.Attempt, j.RunAt, q.settings.MaxWait, now)
}

// expire kills j, an available job with seq past its queue's maximum wait
// at now, where job.AfterMaxWait sends it, and leaves its copy in the
// dead-letter queue, if any, whose queue and id it returns.
func (w *writer) expire(j *job.Job, seq int64, now time.Time) (job.JobRef, error) {
	state, e := job.AfterMaxWait(j.Attempt, now)
	msg, err := w.appendError(seq, e)
	if err != nil {
		return job.JobRef{}, err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlDieOfWait, now.UnixNano(), string(state), msg, seq); err != nil {
		return job.JobRef{}, fmt.Errorf("expire job %s: %w", j.ID, err)
	}
	w.fx.move(j.Queue, job.StateAvailable, state, 1)
	w.madeUnavailable(j.Queue, j.Group, entryOf(j, seq))
	return w.deadLetter(j.Queue, seq, state, now)
}

// JobExpireWaiting kills the jobs past their queues' maximum waits that
// no claim met; see store.Maintainer. It reads them from the jobs_wait
// index, passing over those leased (their rows still say available).
func (s *Store) JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	res := &store.MaintenanceResult{}
	err := s.do(ctx, 1, func(w *writer) error {
		*res = store.MaintenanceResult{}
		return w.expireWaiting(now.UTC(), limit, res)
	})
	if err != nil {
		return nil, wrap("expire waiting jobs", err)
	}
	return res, nil
}

// candidate is a row the sweep found past its wait deadline.
type candidate struct{ seq, deadline int64 }

func (w *writer) expireWaiting(now time.Time, limit int, res *store.MaintenanceResult) error {
	ctx := context.Background()
	after := candidate{deadline: math.MinInt64}
	for res.Count < limit {
		rows, err := w.conn.QueryContext(ctx, sqlWaitingPast, now.UnixNano(), after.deadline, after.seq, expireChunk)
		if err != nil {
			return fmt.Errorf("find jobs past their wait: %w", err)
		}
		var found []candidate
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.seq, &c.deadline); err != nil {
				rows.Close()
				return fmt.Errorf("find jobs past their wait: %w", err)
			}
			found = append(found, c)
		}
		if err := closeRows(rows); err != nil {
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

// expireRow kills the job of c when the rule says it is past its wait at
// now, and counts it in res; a row whose deadline the rule does not
// share gets the rule's.
func (w *writer) expireRow(c candidate, now time.Time, res *store.MaintenanceResult) error {
	j, _, err := scanJob(w.st.jobBySeq.QueryRow(c.seq))
	if err != nil {
		return fmt.Errorf("read job with seq %d: %w", c.seq, err)
	}
	q := w.queues[j.Queue]
	if q == nil || !pastWait(q, j, now) {
		var maxWait time.Duration
		if q != nil {
			maxWait = q.settings.MaxWait
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlFixWait, waitDeadline(j.Attempt, j.RunAt, maxWait), c.seq); err != nil {
			return fmt.Errorf("set the wait deadline of job %s: %w", j.ID, err)
		}
		return nil
	}
	letter, err := w.expire(j, c.seq, now)
	if err != nil {
		return err
	}
	res.Count++
	if letter.Queue != "" && !slices.Contains(res.Available, letter.Queue) {
		res.Available = append(res.Available, letter.Queue)
	}
	return nil
}
