package sqlitestore

import (
	"context"
	"database/sql"
	"strconv"
	"time"

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

// due is a scheduled or retrying job that has come due.
type due struct {
	seq      int64
	queue    string
	state    job.State
	priority int64
	runAt    int64
	group    string
}

// JobPromoteDue makes due scheduled and retrying jobs available; see
// store.Maintainer.
func (s *Store) JobPromoteDue(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	res := &store.MaintenanceResult{}
	err := s.do(ctx, 1, func(w *writer) error {
		*res = store.MaintenanceResult{}
		return w.promote(now.UTC(), limit, res)
	})
	if err != nil {
		return nil, wrap("promote due jobs", err)
	}
	return res, nil
}

func (w *writer) promote(now time.Time, limit int, res *store.MaintenanceResult) error {
	ctx := context.Background()
	rows, err := w.conn.QueryContext(ctx, sqlDueJobs, now.UnixNano(), limit)
	if err != nil {
		return err
	}
	var jobs []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.seq, &d.queue, &d.state, &d.priority, &d.runAt, &d.group); err != nil {
			rows.Close()
			return err
		}
		jobs = append(jobs, d)
	}
	if err := closeRows(rows); err != nil {
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
	seen := make(map[string]bool)
	for _, d := range jobs {
		w.fx.move(d.queue, d.state, job.StateAvailable, 1)
		w.madeAvailable(d.queue, d.group, entry{priority: int(d.priority), runAt: d.runAt, seq: d.seq})
		if !seen[d.queue] {
			seen[d.queue] = true
			res.Available = append(res.Available, d.queue)
		}
	}
	res.Count = len(jobs)
	res.Next, err = w.minTime(sqlNextDue)
	return err
}

// JobRescueExpired takes back jobs whose lease ran out, each where
// job.AfterLeaseExpiry sends it; see store.Maintainer. The leases are in
// memory, ordered by expiry, so a pass reads nothing.
func (s *Store) JobRescueExpired(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	res := &store.MaintenanceResult{}
	err := s.do(ctx, 1, func(w *writer) error {
		*res = store.MaintenanceResult{}
		return w.rescue(now.UTC(), limit, res)
	})
	if err != nil {
		return nil, wrap("rescue expired jobs", err)
	}
	return res, nil
}

func (w *writer) rescue(now time.Time, limit int, res *store.MaintenanceResult) error {
	seen := make(map[string]bool)
	for res.Count < limit {
		l := w.leases.earliest()
		if l == nil || l.expiresAt.After(now) {
			break
		}
		state := job.AfterLeaseExpiry(l.cancel, l.attempt, l.maxAttempts)
		if err := w.endAttempt(l, state, time.Time{}, now, l.attempt, job.LeaseExpiredMessage); err != nil {
			return err
		}
		res.Count++
		if res.Rescued == nil {
			res.Rescued = make(map[string]int)
		}
		res.Rescued[l.queue]++
		if state == job.StateAvailable && !seen[l.queue] {
			seen[l.queue] = true
			res.Available = append(res.Available, l.queue)
		}
		letter, err := w.deadLetter(l.queue, l.seq, state, now)
		if err != nil {
			return err
		}
		if letter.Queue != "" && !seen[letter.Queue] {
			seen[letter.Queue] = true
			res.Available = append(res.Available, letter.Queue)
		}
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
	var total int
	err := s.do(ctx, 1, func(w *writer) error {
		var err error
		total, err = w.prune(p)
		return err
	})
	if err != nil {
		return 0, wrap("prune jobs", err)
	}
	return total, nil
}

func (w *writer) prune(p *store.JobPruneParams) (int, error) {
	budget := p.Limit
	if budget <= 0 {
		return 0, nil
	}
	total := 0
	for _, pass := range p.Passes() {
		before := pass.Before
		var have int64
		if !pass.ByAge() {
			// A pass by count has no age bound: it deletes the oldest jobs of its states.
			before = time.Unix(0, 1<<62)
			have = w.cat.totals(pass.States...) + w.batch.total(pass.States...) + w.fx.total(pass.States...)
		}
		n := pass.Quota(have, budget)
		if n == 0 {
			continue
		}
		deleted, err := w.pruneOldest(pass.States, before, n)
		if err != nil {
			return total, err
		}
		total += deleted
		budget -= deleted
	}
	return total, nil
}

// pruneOldest deletes up to n of the oldest jobs in states (one or two)
// finished before before.
func (w *writer) pruneOldest(states []job.State, before time.Time, n int) (int, error) {
	rows, err := w.conn.QueryContext(context.Background(), sqlPruneOldest, string(states[0]), string(states[len(states)-1]), n, before.UnixNano())
	if err != nil {
		return 0, err
	}
	deleted := 0
	for rows.Next() {
		var queue string
		var state job.State
		if err := rows.Scan(&queue, &state); err != nil {
			rows.Close()
			return 0, err
		}
		w.fx.move(queue, state, "", 1)
		deleted++
	}
	return deleted, closeRows(rows)
}

// seqList is seqs as a JSON array, for json_each.
func seqList(seqs []int64) string {
	buf := make([]byte, 0, len(seqs)*8+2)
	buf = append(buf, '[')
	for i, seq := range seqs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, seq, 10)
	}
	return string(append(buf, ']'))
}
