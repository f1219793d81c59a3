package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlCancelNow = `UPDATE jobs SET state = 'cancelled', finished_at = ?, lease_expires_at = NULL WHERE seq = ?`
	// sqlRetry makes jobs available at ?1 with no attempts and the wait
	// deadline ?2 (see expire.go); in a queue claimed by group (?3) a job
	// without a group joins the empty group, as markGrouped left only the
	// pending ones. sqlRetryMany retries those of queue ?4 in state ?5.
	sqlRetry = `UPDATE jobs SET state = 'available', attempt = 0, run_at = ?1, finished_at = NULL,
	lease_expires_at = NULL, cancel_requested = 0, wait_until = ?2, grp = CASE WHEN ?3 THEN coalesce(grp, '') ELSE grp END
WHERE seq = ?4`
	sqlDelete = `DELETE FROM jobs WHERE seq = ?`
	// sqlDeleteMany deletes the jobs of queue ?1 in state ?2 but those whose
	// seqs are in the JSON array ?3 (the active ones).
	sqlDeleteMany = `DELETE FROM jobs WHERE queue = ?1 AND state = ?2 AND seq NOT IN (SELECT value FROM json_each(?3))`
)

var sqlRetryMany = strings.Replace(sqlRetry, `seq = ?4`, `queue = ?4 AND state = ?5`, 1)

// JobGet returns one job or job.ErrNotFound.
func (s *Store) JobGet(ctx context.Context, id string) (*job.Job, error) {
	jobs, err := s.JobGetMany(ctx, []string{id})
	if err != nil {
		return nil, wrap("get job", err)
	}
	if j := jobs[id]; j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("get job %s: %w", id, job.ErrNotFound)
}

// JobGetMany returns the jobs of ids that exist, by id, as they stand
// with their leases, in one read beside the writer.
func (s *Store) JobGetMany(ctx context.Context, ids []string) (map[string]*job.Job, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get jobs", err)
	}
	if len(ids) == 0 {
		return map[string]*job.Job{}, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	jobs, _, err := scanJobs(s.rdb.QueryContext(ctx, sqlJobsByIDs, string(list)))
	if err != nil {
		return nil, wrap("get jobs", err)
	}
	out := make(map[string]*job.Job, len(jobs))
	for _, j := range jobs {
		if l, ok := s.leases.viewOf(j.ID); ok {
			l.overlay(j)
		}
		out[j.ID] = j
	}
	return out, nil
}

// JobCancel cancels a job; see store.Admin. Cancelling an active job
// writes its lease to the database with the cancel, so that a crash cannot
// run the job again.
func (s *Store) JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return call(ctx, s, fmt.Sprintf("cancel job %s", id), func(w *writer) (*job.Job, error) { return w.cancel(id, now.UTC()) })
}

// cancel cancels job id at now as job.CancelOf decides: an active one,
// whose lease is in memory, by a request its worker sees, written with
// its lease.
func (w *writer) cancel(id string, now time.Time) (*job.Job, error) {
	if l := w.leases.get(id); l != nil {
		if !l.cancel {
			if err := w.persist(l, true); err != nil {
				return nil, err
			}
			w.leases.change(l, func(l *lease) { l.cancel, l.persisted = true, true })
		}
		j, _, err := w.load(id)
		return j, err
	}
	j, seq, err := w.load(id)
	if err != nil {
		return nil, err
	}
	if cancel, err := job.CancelOf(j.State); err != nil || cancel == job.CancelNone {
		return j, err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlCancelNow, now.UnixNano(), seq); err != nil {
		return nil, err
	}
	w.left(j, seq, job.StateCancelled)
	j.State, j.FinishedAt, j.LeaseExpiresAt = job.StateCancelled, now, time.Time{}
	return j, nil
}

// left records that j, a job with seq that holds no lease, left its state
// for state to (empty: deleted) without a claim: in the counts, its
// window and, in an ordered queue, its group's hold.
func (w *writer) left(j *job.Job, seq int64, to job.State) {
	w.fx.move(j.Queue, j.State, to, 1)
	if j.State == job.StateAvailable {
		w.madeUnavailable(j.Queue, j.Group, entryOf(j, seq))
	}
	w.unhold(j.Queue, j.Group, seq)
}

// JobRetry makes a job that job.CheckRetry lets through available now;
// see store.Admin.
func (s *Store) JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	return call(ctx, s, fmt.Sprintf("retry job %s", id), func(w *writer) (*job.Job, error) { return w.retry(id, now.UTC()) })
}

// retry makes job id available at now with its attempts starting over.
func (w *writer) retry(id string, now time.Time) (*job.Job, error) {
	j, seq, err := w.load(id)
	if err != nil {
		return nil, err
	}
	if err := job.CheckRetry(j.State); err != nil {
		return nil, err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlRetry, now.UnixNano(), w.retryWait(j.Queue, now), w.grouped(j.Queue), seq); err != nil {
		return nil, err
	}
	w.fx.move(j.Queue, j.State, job.StateAvailable, 1)
	j.State, j.Attempt, j.RunAt, j.FinishedAt, j.CancelRequested = job.StateAvailable, 0, now, time.Time{}, false
	// Its attempts start over: in an ordered queue it no longer holds
	// its group (job.HoldsGroup), as after a restart.
	w.unhold(j.Queue, j.Group, seq)
	w.madeAvailable(j.Queue, j.Group, entryOf(j, seq))
	return j, nil
}

// retryWait is the stored wait deadline of a job of queue retried by
// hand at now.
func (w *writer) retryWait(queue string, now time.Time) any {
	return waitDeadline(0, now, w.settingsOf(queue).MaxWait)
}

// JobDelete removes a job that job.CheckDelete lets through; see
// store.Admin.
func (s *Store) JobDelete(ctx context.Context, id string) error {
	return wrap(fmt.Sprintf("delete job %s", id), s.do(ctx, 1, func(w *writer) error { return w.delete(id) }))
}

// delete removes job id, unless it is active.
func (w *writer) delete(id string) error {
	j, seq, err := w.load(id)
	if err != nil {
		return err
	}
	if err := job.CheckDelete(j.State); err != nil {
		return err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlDelete, seq); err != nil {
		return err
	}
	w.left(j, seq, "")
	return nil
}

// JobRetryMany retries every job of one queue in one state; see
// store.Admin.
func (s *Store) JobRetryMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := job.CheckBulk(true, p.State); err != nil {
		return 0, err
	}
	return call(ctx, s, "retry jobs", func(w *writer) (int, error) { return w.retryAll(p.Queue, p.State, p.Now.UTC()) })
}

// retryAll makes the jobs of queue in state available at now, with their
// attempts starting over, and returns how many.
func (w *writer) retryAll(queue string, state job.State, now time.Time) (int, error) {
	res, err := w.conn.ExecContext(context.Background(), sqlRetryMany, now.UnixNano(), w.retryWait(queue, now), w.grouped(queue), queue, string(state))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return 0, err
	}
	w.fx.move(queue, state, job.StateAvailable, n)
	w.resetWindow(queue)
	return int(n), nil
}

// JobDeleteMany deletes every job of one queue in one state but active;
// see store.Admin.
func (s *Store) JobDeleteMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if err := job.CheckBulk(false, p.State); err != nil {
		return 0, err
	}
	return call(ctx, s, "delete jobs", func(w *writer) (int, error) { return w.deleteAll(p.Queue, p.State) })
}

// QueuePurge deletes a queue's available jobs; see store.Admin.
func (s *Store) QueuePurge(ctx context.Context, name string) (int, error) {
	return call(ctx, s, "purge queue", func(w *writer) (int, error) {
		n, err := w.deleteAll(name, job.StateAvailable)
		if q := w.queues[name]; q != nil && n > 0 {
			q.win.clear()
		}
		return n, err
	})
}

// deleteAll deletes the jobs of queue in state but the active ones, and
// returns how many.
func (w *writer) deleteAll(queue string, state job.State) (int, error) {
	n, err := w.deleteWhere(queue, sqlDeleteMany, queue, string(state), w.leasedSeqs(queue))
	if err != nil || n == 0 {
		return 0, err
	}
	w.fx.move(queue, state, "", n)
	return int(n), nil
}

// deleteWhere runs a delete of jobs of queue and, if it may have removed
// available jobs, forgets the queue's window.
func (w *writer) deleteWhere(queue, query string, args ...any) (int64, error) {
	res, err := w.conn.ExecContext(context.Background(), query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n > 0 {
		w.resetWindow(queue)
	}
	return n, nil
}

// leasedSeqs is the JSON array of the seqs of queue's active jobs.
func (w *writer) leasedSeqs(queue string) string {
	var seqs []int64
	for _, l := range w.leases.ofQueue(queue) {
		seqs = append(seqs, l.seq)
	}
	return seqList(seqs)
}

// QueueList returns every known queue by name; see store.Admin.
func (s *Store) QueueList(ctx context.Context) ([]job.QueueInfo, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list queues", err)
	}
	qs := s.counts.list()
	if err := s.setOldestAvailable(ctx, qs); err != nil {
		return nil, wrap("list queues", err)
	}
	return qs, nil
}

// QueueGet returns one queue or job.ErrNotFound; see store.Admin.
func (s *Store) QueueGet(ctx context.Context, name string) (*job.QueueInfo, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get queue", err)
	}
	q, ok := s.counts.info(name)
	if !ok {
		return nil, fmt.Errorf("get queue %s: %w", name, job.ErrNotFound)
	}
	return q, nil
}

// QueueDefaults returns what a queue gives its new jobs, from the queues
// in memory (counts.go); see store.Admin.
func (s *Store) QueueDefaults(ctx context.Context, name string) (store.QueueDefaults, error) {
	if err := s.check(); err != nil {
		return store.QueueDefaults{}, wrap("get queue defaults", err)
	}
	d, ok := s.counts.defaults(name)
	if !ok {
		return store.QueueDefaults{}, fmt.Errorf("get queue defaults of %s: %w", name, job.ErrNotFound)
	}
	return d, nil
}
