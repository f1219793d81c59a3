package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/claim"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// sqlAttempts reads the attempt counts of the rows whose seqs are listed
// in the JSON array: what job.PastMaxWait needs of jobs a window holds
// without their bodies.
const sqlAttempts = `SELECT seq, attempt FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?))`

// claimFlow hands out up to want jobs of q, a queue with flow control, as
// the planner decides (internal/claim) from the candidates the writer's
// memory offers (flowSource), and reports in res what held others back:
// it reads the holds of an ordered queue, plans, writes the decision
// (writeDecision) and keeps what the claim settled (keepOutcome).
func (w *writer) claimFlow(q *wqueue, want int, p *store.JobClaimParams, res *store.ClaimResult) ([]*job.Job, error) {
	now := p.Now.UTC()
	if now.After(q.flow.now) {
		q.flow.now = now
	}
	if q.limits.Ordered && q.holds == nil {
		var err error
		if q.holds, err = loadHolds(w.conn, q.name, w.leases); err != nil {
			return nil, err
		}
	}
	src := newFlowSource(w, q, p.Group)
	d, err := claim.Plan(claim.Queue{Limits: q.limits, MaxWait: q.settings.MaxWait, Active: w.leases.inQueue(q.name), Starts: q.flow.rate},
		claim.Request{Now: now, Want: want, Group: p.Group, Runs: p.Runs, MaxGroups: p.MaxGroups}, src)
	if err != nil {
		return nil, err
	}
	jobs, leased, err := w.writeDecision(q, src, d, p, now, res)
	if err != nil {
		return nil, err
	}
	out, err := d.Settle(leased, func() (bool, error) { return w.availableIn(q.name) > 0, nil })
	if err != nil {
		return nil, err
	}
	w.keepOutcome(q, src, out)
	if out.Capped && !slices.Contains(res.Capped, q.name) {
		res.Capped = append(res.Capped, q.name)
	}
	if !out.RetryAt.IsZero() && (res.RetryAt.IsZero() || out.RetryAt.Before(res.RetryAt)) {
		res.RetryAt = out.RetryAt
	}
	return jobs, nil
}

// writeDecision carries out decision d of a claim of q: it takes the jobs
// it names out of their windows (and an ordered queue's holders out of the
// holds), kills those past their wait and leases the others, which it
// returns with their seqs. In an ordered queue each job leased holds its
// group.
func (w *writer) writeDecision(q *wqueue, src *flowSource, d *claim.Decision, p *store.JobClaimParams, now time.Time,
	res *store.ClaimResult) ([]*job.Job, []int64, error) {
	picks := make([]pick, 0, len(d.Kill)+len(d.Take))
	for _, k := range append(slices.Clip(d.Kill), d.Take...) {
		e := src.entries[k.Ref]
		q.windowOf(k.Group).remove(e)
		q.holds.taken(k.Group, k.Seq)
		picks = append(picks, pick{q: q, e: e})
	}
	jobs, err := w.handOut(picks, p, now, res, func(i int, _ *job.Job) bool { return i < len(d.Kill) })
	if err != nil {
		return nil, nil, err
	}
	leased := make([]int64, len(jobs))
	for i, j := range jobs {
		leased[i] = picks[len(d.Kill)+i].e.seq
		if q.limits.Ordered {
			q.holds.leased(j.Group, leased[i])
		}
	}
	return jobs, leased, nil
}

// keepOutcome keeps what a claim of q settled: its rate logs, and the
// turn after the cursor as the ring's next. A ring the claim went round
// is compacted.
func (w *writer) keepOutcome(q *wqueue, src *flowSource, out claim.Outcome) {
	f := &q.flow
	if out.StartsChanged {
		f.rate = out.Starts
	}
	for _, g := range out.GroupStarts {
		if gs := f.state(g.Group, q.limits.GroupRate); gs != nil {
			gs.rate = g.Starts
		}
	}
	if q.grouped {
		i, ok := src.ringIndex(out.Cursor)
		f.turnAfter(i, out.CursorMoved && ok, src.done, q.limits.GroupRate)
	}
}

// flowSource offers the planner the candidates of one claim of q from the
// writer's memory: a queue without groups as one group, its window; a
// grouped queue's ring of groups from the turn after the last served, then
// the groups a walk of the index adds to the ring once it went round; and
// each group's window, refilled from the database as the plan reads on.
// Nothing leaves a window or the ring while the plan runs: the decision's
// jobs leave their windows when it is written (writeDecision), the groups
// out of jobs leave the ring when it is compacted (keepOutcome).
type flowSource struct {
	w   *writer
	q   *wqueue
	one string // the one group of a claim of one group
	// start is the ring's turn the walk began at and rlen the ring's
	// length then; offered is how many turns the walk went; done is set
	// once it came round.
	start, rlen, offered int
	done                 bool
	// groups are the groups offered, by their claim.Group.Ref, and
	// entries the jobs offered, by their claim.Head.Ref.
	groups  []offeredGroup
	entries []entry
}

// offeredGroup is a group a flowSource offered: its place in the ring
// (-1 out of it) and how many jobs of its window it offered.
type offeredGroup struct {
	name string
	ring int
	read int
}

// newFlowSource starts a walk of q's ring at its next turn.
func newFlowSource(w *writer, q *wqueue, one string) *flowSource {
	s := &flowSource{w: w, q: q, one: one, start: q.flow.next, rlen: len(q.flow.ring)}
	s.groups = make([]offeredGroup, 0, min(s.rlen, 256))
	if s.start >= s.rlen {
		s.start = 0
	}
	return s
}

// Groups returns the next groups of the ring, and those a walk of the
// index adds while it has fewer than need; see claim.Source.
func (s *flowSource) Groups(need, more int) ([]claim.Group, error) {
	switch {
	case s.done:
		return nil, nil
	case !s.q.grouped:
		s.done = true
		if s.q.win.len() == 0 && s.q.win.complete {
			return nil, nil
		}
		s.groups = append(s.groups, offeredGroup{ring: -1})
		return []claim.Group{{Active: s.w.leases.inQueue(s.q.name)}}, nil
	case s.one != "":
		s.done = true
		return s.oneGroup()
	}
	f := &s.q.flow
	n := need + more
	out := make([]claim.Group, 0, min(n, len(f.ring)))
	for len(out) < n {
		if s.offered >= len(f.ring) {
			if len(out) >= need {
				break
			}
			added, err := s.w.discover(s.q)
			if err != nil {
				return nil, err
			}
			if added == 0 {
				s.done = true
				break
			}
		}
		i := s.offered // a group the walk of the index added
		if i < s.rlen {
			i = (s.start + i) % s.rlen
		}
		s.offered++
		gs := f.ring[i]
		if dry, err := s.dry(gs.name, gs); err != nil || dry {
			if err != nil {
				return nil, err
			}
			continue // out of jobs: it leaves the ring at the next compaction
		}
		out = append(out, s.offer(gs.name, gs, i))
	}
	return out, nil
}

// oneGroup offers the group of a claim of one group, putting it in the
// ring when the ring may lack it: none when it has no available job for
// sure, stalled when the queue holds as many group states as it may.
func (s *flowSource) oneGroup() ([]claim.Group, error) {
	gs, full := s.q.flow.groupOf(s.one, s.q.limits.GroupRate)
	switch {
	case gs == nil && full:
		return []claim.Group{{Name: s.one, Stalled: true}}, nil
	case gs == nil:
		return nil, nil
	}
	if dry, err := s.dry(s.one, gs); err != nil || dry {
		return nil, err
	}
	return []claim.Group{s.offer(s.one, gs, -1)}, nil
}

// dry reports whether group g of the ring has no available job, reading
// its first jobs when its window holds none yet: a group is offered only
// with jobs, so that its limits count in what held jobs back only then.
func (s *flowSource) dry(g string, gs *groupState) (bool, error) {
	win := gs.win
	if win.len() == 0 && !win.complete {
		if err := s.w.refillGroup(s.q, g, 1); err != nil {
			return false, err
		}
	}
	return win.len() == 0 && win.complete, nil
}

// offer is group g, of state gs and at place ring of the ring, as the
// planner sees it. In an ordered queue, a group whose holder is out and
// not active is shut by it; an available holder is the group's only job
// to go out.
func (s *flowSource) offer(g string, gs *groupState, ring int) claim.Group {
	q := s.q
	out := claim.Group{Name: g, Ref: len(s.groups), Active: s.w.leases.inGroup(q.name, g), Starts: gs.rate}
	s.groups = append(s.groups, offeredGroup{name: g, ring: ring})
	if h := q.holds[g]; q.limits.Ordered && h != nil {
		switch {
		case h.avail:
			out.Holder, out.Held = job.StateAvailable, claim.Head{Seq: h.seq, Attempt: 1, RunAt: fromNanos(h.e.runAt), Ref: len(s.entries)}
			out.OneHolder = !h.more
			s.entries = append(s.entries, h.e)
			live := gs.win.live()
			out.Dry = gs.win.complete && (len(live) == 0 || len(live) == 1 && live[0].seq == h.seq)
		case out.Active == 0:
			out.Holder = job.StateRetrying // it waits out a backoff or its run time
		}
	}
	return out
}

// Heads offers the next jobs of each group's window, refilling it as
// needed; see claim.Source.
func (s *flowSource) Heads(refs []int, n []int) ([][]claim.Head, error) {
	out := make([][]claim.Head, len(refs))
	var unknown []int64
	for i, ref := range refs {
		og := &s.groups[ref]
		g := og.name
		need := og.read + n[i]
		if err := s.fill(g, need); err != nil {
			return nil, err
		}
		live := s.q.windowOf(g).live()
		from, to := min(og.read, len(live)), min(need, len(live))
		out[i] = make([]claim.Head, 0, to-from)
		for _, e := range live[from:to] {
			h := claim.Head{Seq: e.seq, RunAt: fromNanos(e.runAt), Ref: len(s.entries)}
			if e.body != nil {
				h.Attempt = e.body.Attempt
			} else if s.q.settings.MaxWait > 0 {
				unknown = append(unknown, e.seq)
			}
			s.entries = append(s.entries, e)
			out[i] = append(out[i], h)
		}
		og.read = to
	}
	if len(unknown) > 0 {
		if err := s.attempts(out, unknown); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fill refills group g's window until it holds need jobs or all of the
// group's; a window grows past its size for the plan's reads, and shrinks
// back when the decision's jobs leave it.
func (s *flowSource) fill(g string, need int) error {
	win := s.q.windowOf(g)
	if win.len() >= need || win.complete {
		return nil
	}
	if !s.q.grouped {
		return s.w.refill(s.q, need)
	}
	return s.w.refillGroup(s.q, g, need)
}

// attempts fills in the attempt counts of the heads of out whose windows
// hold them without their bodies, from the database: what the maximum
// wait needs.
func (s *flowSource) attempts(out [][]claim.Head, seqs []int64) error {
	type row struct {
		seq     int64
		attempt int
	}
	rows, err := s.w.conn.QueryContext(context.Background(), sqlAttempts, seqList(seqs))
	found, err := scanAll(rows, err, func(r *sql.Rows, v *row) error { return r.Scan(&v.seq, &v.attempt) })
	if err != nil {
		return fmt.Errorf("read attempt counts: %w", err)
	}
	attempt := make(map[int64]int, len(found))
	for _, v := range found {
		attempt[v.seq] = v.attempt
	}
	for _, hs := range out {
		for i := range hs {
			if a, ok := attempt[hs[i].Seq]; ok {
				hs[i].Attempt = a
			}
		}
	}
	return nil
}

// ringIndex is the place in the ring of group g, offered from the ring.
func (s *flowSource) ringIndex(g string) (int, bool) {
	for i := len(s.groups) - 1; i >= 0; i-- {
		if og := s.groups[i]; og.name == g && og.ring >= 0 {
			return og.ring, true
		}
	}
	return 0, false
}
