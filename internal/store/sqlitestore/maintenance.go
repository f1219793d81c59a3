package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlDueJobs = `SELECT seq, queue, state, priority, run_at, COALESCE(grp, '') FROM jobs INDEXED BY jobs_due
WHERE ` + condDue + ` AND run_at <= ? ORDER BY run_at LIMIT ?`
	sqlPromote = `UPDATE jobs NOT INDEXED SET state = 'available' WHERE seq IN (SELECT value FROM json_each(?))`
	sqlNextDue = `SELECT MIN(run_at) FROM jobs INDEXED BY jobs_due WHERE ` + condDue

	// sqlPruneOldest deletes up to ?3 of the oldest jobs in state ?1 or ?2
	// finished before ?4.
	sqlPruneOldest = `DELETE FROM jobs NOT INDEXED WHERE seq IN (
	SELECT seq FROM jobs INDEXED BY jobs_finished WHERE finished_at < ?4 AND state IN (?1, ?2)
	ORDER BY finished_at LIMIT ?3)
RETURNING queue, state`
)

// maintain runs pass, one pass of a maintenance service, as an operation
// of the writer, and returns what it did; a pass run again (its batch
// split) starts from nothing.
func (s *Store) maintain(ctx context.Context, what string, pass func(*writer, *store.MaintenanceResult) error) (*store.MaintenanceResult, error) {
	return call(ctx, s, what, func(w *writer) (*store.MaintenanceResult, error) {
		res := &store.MaintenanceResult{}
		return res, pass(w, res)
	})
}

// JobPromoteDue makes due scheduled and retrying jobs available; see
// store.Maintainer.
func (s *Store) JobPromoteDue(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(ctx, "promote due jobs", func(w *writer, res *store.MaintenanceResult) error {
		return w.promote(now.UTC(), limit, res)
	})
}

// dueJob is a scheduled or retrying job that has come due.
type dueJob struct {
	seq   int64
	queue string
	state job.State
	e     entry
	group string
}

// promote makes up to limit jobs due at now available and reports the
// next run time.
func (w *writer) promote(now time.Time, limit int, res *store.MaintenanceResult) error {
	ctx := context.Background()
	rows, err := w.conn.QueryContext(ctx, sqlDueJobs, now.UnixNano(), limit)
	jobs, err := scanAll(rows, err, func(r *sql.Rows, d *dueJob) error {
		return r.Scan(&d.seq, &d.queue, &d.state, &d.e.priority, &d.e.runAt, &d.group)
	})
	if err != nil {
		return err
	}
	if len(jobs) > 0 {
		seqs := make([]int64, len(jobs))
		for i, d := range jobs {
			seqs[i] = d.seq
		}
		if _, err := w.conn.ExecContext(ctx, sqlPromote, seqList(seqs)); err != nil {
			return err
		}
	}
	for _, d := range jobs {
		w.fx.move(d.queue, d.state, job.StateAvailable, 1)
		d.e.seq = d.seq
		w.madeAvailable(d.queue, d.group, d.e)
		noteQueue(&res.Available, d.queue)
	}
	res.Count = len(jobs)
	res.Next, err = w.minTime(sqlNextDue)
	return err
}

// JobRescueExpired takes back jobs whose lease ran out, each where
// job.AfterLeaseExpiry sends it; see store.Maintainer. The leases are in
// memory, ordered by expiry, so a pass reads nothing.
func (s *Store) JobRescueExpired(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return s.maintain(ctx, "rescue expired jobs", func(w *writer, res *store.MaintenanceResult) error {
		return w.rescue(now.UTC(), limit, res)
	})
}

// rescue ends up to limit attempts whose leases expired by now, leaving
// the dead-letter copies of the jobs that die, and reports the next
// expiry.
func (w *writer) rescue(now time.Time, limit int, res *store.MaintenanceResult) error {
	for res.Count < limit {
		l := w.leases.earliest()
		if l == nil || l.expiresAt.After(now) {
			break
		}
		h := l.held()
		end := attempt.Expire(&h, w.settingsOf(l.queue), now)
		letter, err := w.endAttempt(l, &end, now)
		if err != nil {
			return err
		}
		res.Count++
		if res.Rescued == nil {
			res.Rescued = make(map[string]int)
		}
		res.Rescued[l.queue]++
		if end.Available() {
			noteQueue(&res.Available, l.queue)
		}
		noteQueue(&res.Available, letter.Queue)
	}
	if l := w.leases.earliest(); l != nil {
		res.Next = l.expiresAt
	}
	return nil
}

// minTime runs a query for one nullable time in unix nanoseconds.
func (w *writer) minTime(query string) (time.Time, error) {
	var n sql.NullInt64
	if err := w.conn.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		return time.Time{}, err
	}
	return nullTime(n), nil
}

// JobPrune deletes up to p.Limit final jobs by retention, pass by pass as
// p.Passes lists them; see store.Maintainer.
func (s *Store) JobPrune(ctx context.Context, p *store.JobPruneParams) (int, error) {
	return call(ctx, s, "prune jobs", func(w *writer) (int, error) { return w.prune(p) })
}

// prune deletes the jobs of p's passes, up to p.Limit in all, as
// job.Prune runs them: a pass by count counts its states in memory.
func (w *writer) prune(p *store.JobPruneParams) (int, error) {
	if p.Limit <= 0 {
		return 0, nil
	}
	count := func(states []job.State) (int64, error) {
		return w.counts.totals(states...) + w.batch.total(states...) + w.fx.total(states...), nil
	}
	return job.Prune(p.Passes(), p.Limit, count, w.pruneOldest)
}

// pruneOldest deletes up to n of the oldest jobs in the states of pass
// (one or two) finished before its Before; a pass by count has no age
// bound.
func (w *writer) pruneOldest(pass *job.PrunePass, n int) (int, error) {
	states, before := pass.States, pass.Before
	if !pass.ByAge() {
		before = time.Unix(0, 1<<62)
	}
	type row struct {
		queue string
		state job.State
	}
	rows, err := w.conn.QueryContext(context.Background(), sqlPruneOldest, string(states[0]), string(states[len(states)-1]), n, before.UnixNano())
	deleted, err := scanAll(rows, err, func(r *sql.Rows, v *row) error { return r.Scan(&v.queue, &v.state) })
	for _, v := range deleted {
		w.fx.move(v.queue, v.state, "", 1)
	}
	return len(deleted), err
}
