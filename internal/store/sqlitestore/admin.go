package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlCancelNow = `UPDATE jobs SET state = 'cancelled', finished_at = ?, lease_expires_at = NULL WHERE seq = ?`
	// sqlPersistLease writes a lease held in memory to the job's row.
	sqlPersistLease = `UPDATE jobs SET state = 'active', attempt = ?1, lease_token = ?2, started_at = ?3,
	lease_expires_at = ?4, cancel_requested = ?5, progress = ?6, worker = ?7 WHERE seq = ?8`
	// sqlRetry and sqlRetryMany make jobs available at ?1 with no
	// attempts, and a wait deadline of ?2 (see expire.go).
	sqlRetry = `UPDATE jobs SET state = 'available', attempt = 0, run_at = ?1, finished_at = NULL,
	lease_expires_at = NULL, cancel_requested = 0, wait_until = ?2
WHERE seq = ?3`
	sqlRetryMany = `UPDATE jobs SET state = 'available', attempt = 0, run_at = ?1, finished_at = NULL,
	lease_expires_at = NULL, cancel_requested = 0, wait_until = ?2
WHERE queue = ?3 AND state = ?4`
	sqlDelete = `DELETE FROM jobs WHERE seq = ?`
	// sqlDeleteMany deletes the jobs of queue ?1 in state ?2 but those whose
	// seqs are in the JSON array ?3 (the active ones).
	sqlDeleteMany    = `DELETE FROM jobs WHERE queue = ?1 AND state = ?2 AND seq NOT IN (SELECT value FROM json_each(?3))`
	sqlSetPaused     = `INSERT INTO queues (name, paused) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`
	sqlSetDurability = `INSERT INTO queues (name, durability) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET durability = excluded.durability`
)

// JobGet returns one job or job.ErrNotFound.
func (s *Store) JobGet(ctx context.Context, id string) (*job.Job, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get job", err)
	}
	j, _, err := scanJob(s.rdb.QueryRowContext(ctx, sqlJobByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get job %s: %w", id, job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get job", err)
	}
	if v, ok := s.leases.viewOf(id); ok {
		v.overlay(j)
	}
	return j, nil
}

// JobGetMany returns the jobs of ids that exist, by id, as they stand
// with their leases, in one read beside the writer. Ids that name no job
// are left out.
func (s *Store) JobGetMany(ctx context.Context, ids []string) (map[string]*job.Job, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get jobs", err)
	}
	out := make(map[string]*job.Job, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("get jobs: %w", err)
	}
	rows, err := s.rdb.QueryContext(ctx, sqlJobsByIDs, string(list))
	if err != nil {
		return nil, wrap("get jobs", err)
	}
	for rows.Next() {
		j, _, err := scanJob(rows)
		if err != nil {
			rows.Close()
			return nil, wrap("get jobs", err)
		}
		if v, ok := s.leases.viewOf(j.ID); ok {
			v.overlay(j)
		}
		out[j.ID] = j
	}
	if err := closeRows(rows); err != nil {
		return nil, wrap("get jobs", err)
	}
	return out, nil
}

// persist writes lease l to its job's row, so that it survives a restart.
func (w *writer) persist(l *lease, cancel bool) error {
	if _, err := w.st.persistLease.Exec(l.attempt, l.token, l.startedAt.UnixNano(), l.expiresAt.UnixNano(),
		cancel, blobOrNull(l.progress), stringOrNull(l.worker), l.seq); err != nil {
		return fmt.Errorf("write lease of job %s: %w", l.id, err)
	}
	return nil
}

// JobCancel cancels a job; see store.Admin. Cancelling an active job
// writes its lease to the database with the cancel, so that a crash cannot
// run the job again.
func (s *Store) JobCancel(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	var out *job.Job
	err := s.do(ctx, 1, func(w *writer) error {
		if l := w.leases.get(id); l != nil {
			if !l.cancel {
				if err := w.persist(l, true); err != nil {
					return err
				}
				w.change(l, func(l *lease) { l.cancel, l.persisted = true, true })
			}
			var err error
			out, _, err = w.load(id)
			return err
		}
		j, seq, err := w.load(id)
		if err != nil {
			return err
		}
		switch j.State {
		case job.StateCancelled:
			out = j
			return nil
		case job.StateCompleted, job.StateDead:
			return fmt.Errorf("job is %s: %w", j.State, job.ErrInvalidState)
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlCancelNow, now.UTC().UnixNano(), seq); err != nil {
			return err
		}
		w.fx.move(j.Queue, j.State, job.StateCancelled, 1)
		if j.State == job.StateAvailable {
			w.madeUnavailable(j.Queue, j.Group, entryOf(j, seq))
		}
		w.unhold(j.Queue, j.Group, seq)
		j.State, j.FinishedAt, j.LeaseExpiresAt = job.StateCancelled, now.UTC(), time.Time{}
		out = j
		return nil
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("cancel job %s", id), err)
	}
	return out, nil
}

// JobRetry makes a job that job.State.Retryable lets through available
// now; see store.Admin.
func (s *Store) JobRetry(ctx context.Context, id string, now time.Time) (*job.Job, error) {
	var out *job.Job
	err := s.do(ctx, 1, func(w *writer) error {
		j, seq, err := w.load(id)
		if err != nil {
			return err
		}
		if !j.State.Retryable() {
			return fmt.Errorf("job is %s: %w", j.State, job.ErrInvalidState)
		}
		at := now.UTC()
		if _, err := w.conn.ExecContext(context.Background(), sqlRetry, at.UnixNano(), w.retryWait(j.Queue, at), seq); err != nil {
			return err
		}
		w.fx.move(j.Queue, j.State, job.StateAvailable, 1)
		j.State, j.Attempt, j.RunAt, j.FinishedAt, j.CancelRequested = job.StateAvailable, 0, at, time.Time{}, false
		// Its attempts start over: in an ordered queue it no longer holds
		// its group (job.HoldsGroup), as after a restart.
		w.unhold(j.Queue, j.Group, seq)
		w.madeAvailable(j.Queue, j.Group, entryOf(j, seq))
		out = j
		return nil
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("retry job %s", id), err)
	}
	return out, nil
}

// retryWait is the stored wait deadline of a job of queue retried by
// hand at now.
func (w *writer) retryWait(queue string, now time.Time) any {
	var maxWait time.Duration
	if q := w.queues[queue]; q != nil {
		maxWait = q.settings.MaxWait
	}
	return waitDeadline(0, now, maxWait)
}

// JobDelete removes a job that is not active; see store.Admin.
func (s *Store) JobDelete(ctx context.Context, id string) error {
	err := s.do(ctx, 1, func(w *writer) error {
		j, seq, err := w.load(id)
		if err != nil {
			return err
		}
		if j.State == job.StateActive {
			return fmt.Errorf("job is active, cancel it first: %w", job.ErrInvalidState)
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlDelete, seq); err != nil {
			return err
		}
		w.fx.move(j.Queue, j.State, "", 1)
		if j.State == job.StateAvailable {
			w.madeUnavailable(j.Queue, j.Group, entryOf(j, seq))
		}
		w.unhold(j.Queue, j.Group, seq)
		return nil
	})
	if err != nil {
		return wrap(fmt.Sprintf("delete job %s", id), err)
	}
	return nil
}

// JobRetryMany retries every job of one queue in one state; see
// store.Admin.
func (s *Store) JobRetryMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if !p.State.Retryable() {
		return 0, fmt.Errorf("retry jobs in state %q: %w", p.State, job.ErrInvalidState)
	}
	var n int64
	err := s.do(ctx, 1, func(w *writer) error {
		at := p.Now.UTC()
		res, err := w.conn.ExecContext(context.Background(), sqlRetryMany, at.UnixNano(), w.retryWait(p.Queue, at), p.Queue, string(p.State))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		w.fx.move(p.Queue, p.State, job.StateAvailable, n)
		w.resetWindow(p.Queue)
		return nil
	})
	if err != nil {
		return 0, wrap("retry jobs", err)
	}
	return int(n), nil
}

// JobDeleteMany deletes every job of one queue in one state but active;
// see store.Admin.
func (s *Store) JobDeleteMany(ctx context.Context, p *store.JobBulkParams) (int, error) {
	if p.State == job.StateActive || !p.State.Valid() {
		return 0, fmt.Errorf("delete jobs in state %q: %w", p.State, job.ErrInvalidState)
	}
	var n int64
	err := s.do(ctx, 1, func(w *writer) error {
		var err error
		n, err = w.deleteWhere(p.Queue, sqlDeleteMany, p.Queue, string(p.State), w.leasedSeqs(p.Queue))
		if err != nil || n == 0 {
			return err
		}
		w.fx.move(p.Queue, p.State, "", n)
		return nil
	})
	if err != nil {
		return 0, wrap("delete jobs", err)
	}
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

// QueueList returns every known queue by name; see store.Admin.
func (s *Store) QueueList(ctx context.Context) ([]store.QueueInfo, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list queues", err)
	}
	qs := s.cat.list()
	if err := s.setOldestAvailable(ctx, qs); err != nil {
		return nil, wrap("list queues", err)
	}
	return qs, nil
}

// QueueGet returns one queue or job.ErrNotFound; see store.Admin.
func (s *Store) QueueGet(ctx context.Context, name string) (*store.QueueInfo, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get queue", err)
	}
	q, ok := s.cat.info(name)
	if !ok {
		return nil, fmt.Errorf("get queue %s: %w", name, job.ErrNotFound)
	}
	return q, nil
}

// QueueDefaults returns what a queue gives its new jobs, from the catalog
// in memory; see store.Admin.
func (s *Store) QueueDefaults(ctx context.Context, name string) (store.QueueDefaults, error) {
	if err := s.check(); err != nil {
		return store.QueueDefaults{}, wrap("get queue defaults", err)
	}
	d, ok := s.cat.defaults(name)
	if !ok {
		return store.QueueDefaults{}, fmt.Errorf("get queue defaults of %s: %w", name, job.ErrNotFound)
	}
	return d, nil
}

// QueueSetPaused pauses or resumes a queue, creating it if unknown; see
// store.Admin.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) error {
	err := s.do(ctx, 1, func(w *writer) error {
		if err := w.setPaused(name, paused); err != nil {
			return err
		}
		for _, g := range w.lanes[name] {
			if err := w.setPaused(job.LaneName(name, g.name), paused); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wrap("set queue paused", err)
	}
	return nil
}

// setPaused pauses or resumes queue name in the running transaction.
func (w *writer) setPaused(name string, paused bool) error {
	if _, err := w.st.setPaused.Exec(name, paused); err != nil {
		return err
	}
	q := w.queues[name]
	if q == nil {
		q = &wqueue{name: name, win: newWindow(w.cfg.ReadyWindow, true, w.cache)}
		w.queues[name] = q
		w.fx.queues[name] = struct{}{}
	}
	q.paused = paused
	w.fx.paused[name] = paused
	w.touched = true
	return nil
}

// QueueSetDurability sets the durability of jobs later enqueued into a
// queue without their own, creating the queue if unknown; see store.Admin.
func (s *Store) QueueSetDurability(ctx context.Context, name string, d job.Durability) error {
	err := s.do(ctx, 1, func(w *writer) error {
		if !d.Valid() {
			return job.Invalid("durability", "must be full, process or memory")
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlSetDurability, name, string(d)); err != nil {
			return err
		}
		if w.queues[name] == nil {
			w.queues[name] = &wqueue{name: name, win: newWindow(w.cfg.ReadyWindow, true, w.cache)}
			w.fx.queues[name] = struct{}{}
			w.touched = true
		}
		w.fx.durability[name] = d
		return nil
	})
	if err != nil {
		return wrap("set queue durability", err)
	}
	return nil
}

// QueuePurge deletes a queue's available jobs; see store.Admin.
func (s *Store) QueuePurge(ctx context.Context, name string) (int, error) {
	var n int64
	err := s.do(ctx, 1, func(w *writer) error {
		var err error
		if n, err = w.deleteWhere(name, sqlDeleteMany, name, string(job.StateAvailable), w.leasedSeqs(name)); err != nil || n == 0 {
			return err
		}
		w.fx.move(name, job.StateAvailable, "", n)
		if q := w.queues[name]; q != nil {
			q.win.clear()
		}
		return nil
	})
	if err != nil {
		return 0, wrap("purge queue", err)
	}
	return int(n), nil
}

// leasedSeqs is the JSON array of the seqs of queue's active jobs.
func (w *writer) leasedSeqs(queue string) string {
	var seqs []int64
	if w.leases.inQueue(queue) > 0 {
		for _, l := range w.leases.byID {
			if l.queue == queue {
				seqs = append(seqs, l.seq)
			}
		}
	}
	return seqList(seqs)
}
