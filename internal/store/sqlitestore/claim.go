package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	sqlRefill = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ? AND state = 'available'
ORDER BY priority DESC, run_at, seq LIMIT ?`
	// sqlClaim leases the jobs whose seqs are listed in the JSON array ?3.
	// ?2 is the lease override in nanoseconds, zero for each job's own.
	sqlClaim = `UPDATE jobs NOT INDEXED SET state = 'active', attempt = attempt + 1, lease_token = lease_token + 1,
	started_at = ?1, lease_expires_at = ?1 + (CASE WHEN ?2 > 0 THEN ?2 ELSE lease_ns END), progress = NULL
WHERE seq IN (SELECT value FROM json_each(?3)) AND state = 'available'`
	// sqlJobsBySeq reads the jobs whose seqs are listed in the JSON array.
	// (RETURNING on the update would cost more than this second pass.)
	sqlJobsBySeq = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?))`
)

// JobClaim leases up to p.Max available jobs; see store.Claimer.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) ([]*job.Job, error) {
	if p.Max <= 0 || len(p.Queues) == 0 {
		if err := s.check(); err != nil {
			return nil, wrap("claim jobs", err)
		}
		return nil, nil
	}
	var out []*job.Job
	err := s.do(ctx, p.Max, func(w *writer) error {
		var err error
		out, err = w.claim(p)
		return err
	})
	if err != nil {
		return nil, wrap("claim jobs", err)
	}
	return out, nil
}

// pick is a job chosen from a window for a claim.
type pick struct {
	q *wqueue
	e entry
}

// claim takes jobs from the fronts of the windows of p.Queues in claim
// order and leases them.
func (w *writer) claim(p *store.JobClaimParams) ([]*job.Job, error) {
	qs := w.claimable(p.Queues)
	if len(qs) == 0 {
		return nil, nil
	}
	now := p.Now.UTC()
	var out []*job.Job
	for len(out) < p.Max {
		need := p.Max - len(out)
		for _, q := range qs {
			if q.win.len() < need && !q.win.complete {
				if err := w.refill(q); err != nil {
					return nil, err
				}
			}
		}
		picks := merge(qs, need)
		if len(picks) == 0 {
			break
		}
		jobs, err := w.take(picks, p.LeaseDuration, now)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	return out, nil
}

// claimable returns the known, unpaused queues among names, without
// repeats.
func (w *writer) claimable(names []string) []*wqueue {
	qs := make([]*wqueue, 0, len(names))
	for _, name := range names {
		q := w.queues[name]
		if q == nil || q.paused {
			continue
		}
		seen := false
		for _, o := range qs {
			seen = seen || o == q
		}
		if !seen {
			qs = append(qs, q)
		}
	}
	return qs
}

// refill replaces the window of q with the first available jobs of q from
// the claim index.
func (w *writer) refill(q *wqueue) error {
	rows, err := w.st.refill.Query(q.name, q.win.capacity)
	if err != nil {
		return fmt.Errorf("refill window of %s: %w", q.name, err)
	}
	es := make([]entry, 0, q.win.capacity)
	for rows.Next() {
		var e entry
		var prio int64
		if err := rows.Scan(&e.seq, &prio, &e.runAt); err != nil {
			rows.Close()
			return fmt.Errorf("refill window of %s: %w", q.name, err)
		}
		e.priority = int(prio)
		es = append(es, e)
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("refill window of %s: %w", q.name, err)
	}
	q.win.fill(es, len(es) < q.win.capacity)
	w.touched = true
	return nil
}

// merge pops up to n jobs from the windows of qs in claim order. It stops
// early when an incomplete window runs dry, since the database may hold its
// next job.
func merge(qs []*wqueue, n int) []pick {
	var picks []pick
	for len(picks) < n {
		var best *wqueue
		var bestE entry
		for _, q := range qs {
			e, ok := q.win.peek()
			if !ok {
				if !q.win.complete {
					return picks
				}
				continue
			}
			if best == nil || e.before(bestE) {
				best, bestE = q, e
			}
		}
		if best == nil {
			break
		}
		best.win.pop()
		picks = append(picks, pick{q: best, e: bestE})
	}
	return picks
}

// take runs the claim update for picks and returns the jobs in pick order.
func (w *writer) take(picks []pick, override time.Duration, now time.Time) ([]*job.Job, error) {
	w.touched = true
	seqs := make([]int64, len(picks))
	for i, pk := range picks {
		seqs[i] = pk.e.seq
	}
	list := seqList(seqs)
	res, err := w.st.claim.Exec(now.UnixNano(), int64(override), list)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(picks)) {
		w.logger.Error("sqlitestore: ready window out of step with the database", "leased", n, "picked", len(picks))
		return nil, fmt.Errorf("lease jobs: %d of %d picked jobs were available (%v)", n, len(picks), err)
	}
	rows, err := w.st.jobsBySeq.Query(list)
	if err != nil {
		return nil, fmt.Errorf("read leased jobs: %w", err)
	}
	jobs, seqs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("read leased jobs: %w", err)
	}
	bySeq := make(map[int64]*job.Job, len(jobs))
	for i, j := range jobs {
		bySeq[seqs[i]] = j
	}
	out := make([]*job.Job, 0, len(jobs))
	for _, pk := range picks {
		j := bySeq[pk.e.seq]
		w.fx.move(j.Queue, job.StateAvailable, job.StateActive, 1)
		out = append(out, j)
	}
	return out, nil
}
