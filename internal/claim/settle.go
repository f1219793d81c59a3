package claim

import "fmt"

// Settle says what a claim records once it has written d: leased are the
// seqs of the jobs of d.Take it leased (a job can have left the available
// state since it was read), and left reports whether the queue (the group,
// for a claim of one group) still has available jobs. Only leased jobs
// count as starts. What held jobs back is reported only when the claim
// got fewer jobs than it wanted; left is asked only when a limit of the
// queue itself may have.
func (d *Decision) Settle(leased []int64, left func() (bool, error)) (Outcome, error) {
	l := d.q.Limits
	now := d.req.Now
	out := Outcome{Starts: d.q.Starts}
	started := leasedOf(d.Take, leased)
	n, lastGroup := 0, ""
	for i, p := range d.Take {
		if !started(i) {
			continue
		}
		n++
		lastGroup = p.Group
		d.groups[p.admitted].started++
	}
	if n > 0 && !l.Rate.IsZero() {
		out.Starts, out.StartsChanged = d.q.Starts.Add(l.Rate, now, n), true
	}
	if !l.GroupRate.IsZero() {
		for _, g := range d.groups {
			if g.started > 0 {
				g.Starts = g.Starts.Add(l.GroupRate, now, g.started)
				out.GroupStarts = append(out.GroupStarts, GroupStarts{Group: g.Name, Starts: g.Starts})
			}
		}
	}
	if d.req.Group == "" {
		switch {
		case d.stopped:
			// The plan looked at as many groups as it may: the next
			// claim goes on after the last, so that no group waits behind
			// more capped ones than a claim looks at.
			out.Cursor, out.CursorMoved = d.last, true
		case n > 0:
			out.Cursor, out.CursorMoved = lastGroup, true
		}
	}
	if n >= d.req.Want {
		return out, nil
	}
	out.Capped, out.RetryAt = d.capped, d.retryAt
	for _, g := range d.groups {
		if g.hasRoom() || (g.dry && g.taken >= len(g.avail)) {
			continue // its own limits held nothing back
		}
		if l.GroupMaxActive > 0 && g.Active+g.started >= l.GroupMaxActive {
			out.Capped = true
		}
		if r, next := g.Starts.Room(l.GroupRate, now); r == 0 {
			out.RetryAt = earliest(out.RetryAt, next)
		}
	}
	capBound := l.MaxActive > 0 && d.q.Active+n >= l.MaxActive
	rateRoom, next := out.Starts.Room(l.Rate, now)
	if !capBound && rateRoom != 0 {
		return out, nil
	}
	more, err := left()
	if err != nil {
		return Outcome{}, fmt.Errorf("look for available jobs: %w", err)
	}
	if more {
		out.Capped = out.Capped || capBound
		if rateRoom == 0 {
			out.RetryAt = earliest(out.RetryAt, next)
		}
	}
	return out, nil
}

// leasedOf tells, for each pick of take, whether its job is among leased.
// A store that leases in the decision's order is matched without a map.
func leasedOf(take []Pick, leased []int64) func(i int) bool {
	match, j := make([]bool, len(take)), 0
	for i := range take {
		if j < len(leased) && take[i].Seq == leased[j] {
			match[i] = true
			j++
		}
	}
	if j == len(leased) {
		return func(i int) bool { return match[i] }
	}
	set := make(map[int64]bool, len(leased))
	for _, seq := range leased {
		set[seq] = true
	}
	return func(i int) bool { return set[take[i].Seq] }
}
