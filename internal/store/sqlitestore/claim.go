package sqlitestore

import (
	"context"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// JobClaim leases up to p.Max available jobs; see store.Claimer. The lease
// lives in memory (see lease); the claim writes nothing but the deaths of
// the jobs past their wait that it meets (kill.go). Those go out in a
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

// claim leases jobs of p.Queues into res: from the windows of the queues
// without flow control in claim order across them, then from the others
// one after the other under their limits (flowclaim.go). A claim of one group
// (p.Group) looks at the grouped queues only: the first job with a group
// makes its queue grouped (markGrouped), so no other queue holds one.
func (w *writer) claim(p *store.JobClaimParams, res *store.ClaimResult) error {
	qs := w.claimable(p.Queues)
	room := w.cfg.MaxActive - w.leases.count()
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
// it meets it kills instead and goes on (see handOut).
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
		picks := pickInOrder(qs, need)
		if len(picks) == 0 {
			break
		}
		jobs, err := w.handOut(picks, p, now, res, func(i int, j *job.Job) bool { return picks[i].q.pastWait(j, now) })
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

// pickInOrder pops up to n jobs from the windows of qs in claim order. It stops
// early when an incomplete window runs dry, since the database may hold its
// next job.
func pickInOrder(qs []*wqueue, n int) []pick {
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
