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

// The refill reads follow a window's bound (priority p, run time r, seq q)
// in claim order with three plain range seeks on jobs_claim: the rest of
// run time r, the rest of priority p, then the lower priorities. (One
// query with an OR or a row value would scan from the start of priority p,
// through every job handed out since, whose rows still say available.)
const (
	sqlRefillSameRunAt = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority = ?2 AND run_at = ?3 AND seq > ?4
ORDER BY priority DESC, run_at, seq LIMIT ?5`
	sqlRefillSamePriority = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority = ?2 AND run_at > ?3
ORDER BY priority DESC, run_at, seq LIMIT ?4`
	sqlRefillBelow = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority < ?2
ORDER BY priority DESC, run_at, seq LIMIT ?3`
	// sqlJobsBySeq reads the jobs whose seqs are listed in the JSON array.
	sqlJobsBySeq = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?))`
)

// JobClaim leases up to p.Max available jobs; see store.Claimer. The lease
// lives in memory (see lease); the claim writes nothing but the deaths of
// the jobs past their wait that it meets (expire.go). Those go out in a
// commit that, like any batch of claims only, does not wait for the disk:
// any later commit that does carries them (the log is written in order),
// and a power loss before one only lets the next claim or sweep kill the
// jobs again.
func (s *Store) JobClaim(ctx context.Context, p *store.JobClaimParams) (*store.ClaimResult, error) {
	if p.Max <= 0 || len(p.Queues) == 0 {
		if err := s.check(); err != nil {
			return nil, wrap("claim jobs", err)
		}
		return &store.ClaimResult{}, nil
	}
	out := &store.ClaimResult{}
	err := s.doRelaxed(ctx, p.Max, writesNothing, func(w *writer) error {
		*out = store.ClaimResult{}
		return w.claim(p, out)
	})
	if err != nil {
		return nil, wrap("claim jobs", err)
	}
	return out, nil
}

// writesNothing marks operations that change memory only.
func writesNothing(*writer) bool { return true }

// pick is a job chosen for a claim: from a window, or the first job of a
// group (flow.go).
type pick struct {
	q     *wqueue
	e     entry
	group string
}

// claim leases jobs of p.Queues into res: from the windows of the queues
// without flow control in claim order across them, then from the others
// one after the other under their limits (flow.go). A claim of one group
// (p.Group) looks at the grouped queues only: the first job with a group
// makes its queue grouped (markGrouped), so no other queue holds one.
func (w *writer) claim(p *store.JobClaimParams, res *store.ClaimResult) error {
	qs := w.claimable(p.Queues)
	room := w.cfg.MaxActive - len(w.leases.byID)
	if len(qs) == 0 || room <= 0 {
		return nil
	}
	want := min(p.Max, room)
	plain := make([]*wqueue, 0, len(qs))
	var flow []*wqueue
	for _, q := range qs {
		switch {
		case p.Group != "" && !q.grouped:
		case q.flowControlled():
			flow = append(flow, q)
		default:
			plain = append(plain, q)
		}
	}
	if len(plain) > 0 {
		jobs, err := w.claimPlain(plain, want, p, res)
		if err != nil {
			return err
		}
		res.Jobs = jobs
	}
	for _, q := range flow {
		if len(res.Jobs) >= want {
			break
		}
		jobs, err := w.claimFlow(q, want-len(res.Jobs), p, res)
		if err != nil {
			return err
		}
		res.Jobs = append(res.Jobs, jobs...)
	}
	return nil
}

// claimPlain takes up to want jobs from the fronts of the windows of qs
// in claim order and leases them; the jobs past their maximum wait that
// it meets it kills instead and goes on (see take).
func (w *writer) claimPlain(qs []*wqueue, want int, p *store.JobClaimParams, res *store.ClaimResult) ([]*job.Job, error) {
	now := p.Now.UTC()
	var out []*job.Job
	for len(out) < want {
		need := want - len(out)
		for _, q := range qs {
			if q.win.len() < need && !q.win.complete {
				if err := w.refill(q, need); err != nil {
					return nil, err
				}
			}
		}
		picks := merge(qs, need)
		if len(picks) == 0 {
			break
		}
		jobs, err := w.take(picks, p, now, res)
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

// refill reads the next available jobs of q after its window's bound from
// the claim index, skipping leased ones, until the window holds at least
// need jobs (up to its capacity, or need when that is more) or the queue
// has no more.
func (w *writer) refill(q *wqueue, need int) error {
	w.touched = true
	for q.win.len() < need && !q.win.complete {
		limit := max(q.win.capacity, need) - q.win.len()
		rows, last, err := w.readAfter(q, limit)
		if err != nil {
			return fmt.Errorf("refill window of %s: %w", q.name, err)
		}
		es := rows[:0]
		for _, e := range rows {
			if !w.leases.leased(e.seq) {
				es = append(es, e)
			}
		}
		q.win.extend(es, len(rows) < limit, last)
	}
	return nil
}

// appendEntries appends the keys of rows (seq, priority, run_at) to out
// and closes rows.
func appendEntries(out []entry, rows *sql.Rows) ([]entry, error) {
	for rows.Next() {
		var e entry
		var prio int64
		if err := rows.Scan(&e.seq, &prio, &e.runAt); err != nil {
			rows.Close()
			return out, err
		}
		e.priority = int(prio)
		out = append(out, e)
	}
	return out, closeRows(rows)
}

// readAfter reads up to limit available jobs of q that follow the window's
// bound in claim order (all of them from the start when it has none).
func (w *writer) readAfter(q *wqueue, limit int) ([]entry, entry, error) {
	var out []entry
	read := func(query string, args ...any) error {
		rows, err := w.conn.QueryContext(context.Background(), query, args...)
		if err != nil {
			return err
		}
		out, err = appendEntries(out, rows)
		return err
	}
	if !q.win.bounded {
		if err := read(sqlRefillBelow, q.name, int64(math.MaxInt64), limit); err != nil {
			return nil, entry{}, err
		}
	} else {
		a := q.win.after
		if err := read(sqlRefillSameRunAt, q.name, a.priority, a.runAt, a.seq, limit); err != nil {
			return nil, entry{}, err
		}
		if len(out) < limit {
			if err := read(sqlRefillSamePriority, q.name, a.priority, a.runAt, limit-len(out)); err != nil {
				return nil, entry{}, err
			}
		}
		if len(out) < limit {
			if err := read(sqlRefillBelow, q.name, a.priority, limit-len(out)); err != nil {
				return nil, entry{}, err
			}
		}
	}
	var last entry
	if len(out) > 0 {
		last = out[len(out)-1]
	}
	return out, last, nil
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

// take leases the picked jobs for the claim p and returns them in pick
// order. A picked job past its queue's maximum wait is not leased: take
// kills it (see expire) and adds the queue of its dead-letter copy, if
// any, to res.Available; it is left out of what take returns.
func (w *writer) take(picks []pick, p *store.JobClaimParams, now time.Time, res *store.ClaimResult) ([]*job.Job, error) {
	jobs, err := w.loadPicked(picks)
	if err != nil {
		return nil, err
	}
	out := make([]*job.Job, 0, len(picks))
	for i, j := range jobs {
		if pastWait(picks[i].q, j.job, now) {
			letter, err := w.expire(j.job, j.seq, now)
			if err != nil {
				return nil, err
			}
			if letter.Queue != "" && !slices.Contains(res.Available, letter.Queue) {
				res.Available = append(res.Available, letter.Queue)
			}
			continue
		}
		out = append(out, w.lease(picks[i], j.job, p, now))
	}
	return out, nil
}

// loaded is a picked job with its seq.
type loaded struct {
	job *job.Job
	seq int64
}

// loadPicked returns the picked jobs in pick order, each a copy: cached ones
// straight from memory, the rest read from the database in one query.
// A job that is not available in the database is an error: the windows
// are out of step with it.
func (w *writer) loadPicked(picks []pick) ([]loaded, error) {
	w.touched = true
	var missing []int64
	for _, pk := range picks {
		if pk.e.body == nil {
			missing = append(missing, pk.e.seq)
		}
	}
	var bySeq map[int64]*job.Job
	if len(missing) > 0 {
		rows, err := w.st.jobsBySeq.Query(seqList(missing))
		if err != nil {
			return nil, fmt.Errorf("read claimed jobs: %w", err)
		}
		jobs, seqs, err := scanJobs(rows)
		if err != nil {
			return nil, fmt.Errorf("read claimed jobs: %w", err)
		}
		bySeq = make(map[int64]*job.Job, len(jobs))
		for i, j := range jobs {
			bySeq[seqs[i]] = j
		}
	}
	out := make([]loaded, len(picks))
	for i, pk := range picks {
		var j *job.Job
		if pk.e.body != nil {
			c := *pk.e.body
			j = &c
		} else {
			j = bySeq[pk.e.seq]
		}
		if j == nil || j.State != job.StateAvailable {
			w.logger.Error("sqlitestore: ready window out of step with the database", "seq", pk.e.seq)
			return nil, fmt.Errorf("lease job %d: not available in the database", pk.e.seq)
		}
		out[i] = loaded{job: j, seq: pk.e.seq}
	}
	return out, nil
}

// lease leases j, the job of pk, for the claim p at now, and returns it
// as leased.
func (w *writer) lease(pk pick, j *job.Job, p *store.JobClaimParams, now time.Time) *job.Job {
	dur := p.LeaseDuration
	if dur <= 0 {
		dur = j.LeaseDuration
	}
	l := &lease{
		seq: pk.e.seq, id: j.ID, queue: j.Queue, kind: j.Kind, group: j.Group, key: entry{priority: pk.e.priority, runAt: pk.e.runAt, seq: pk.e.seq},
		token: w.tokens.take(), attempt: j.Attempt + 1, maxAttempts: j.MaxAttempts, backoff: j.Backoff,
		duration: j.LeaseDuration, startedAt: now, expiresAt: now.Add(dur), durability: j.Durability, worker: p.Worker,
	}
	w.grant(l)
	j.State, j.Attempt, j.LeaseToken = job.StateActive, l.attempt, l.token
	j.StartedAt, j.LeaseExpiresAt, j.Progress, j.Worker = now, l.expiresAt, nil, p.Worker
	w.fx.move(j.Queue, job.StateAvailable, job.StateActive, 1)
	return j
}
