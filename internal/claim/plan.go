package claim

import (
	"fmt"
	"slices"

	"github.com/spoolq/spool/internal/job"
)

// group is a group a plan admitted: it has room under its limits.
type group struct {
	Group
	// room is how many of its jobs may start; -1 when no group limit
	// bounds it.
	room int
	// avail are its jobs read so far that may start, in claim order;
	// taken of them are in the decision.
	avail []Head
	taken int
	// dry is set once every available job of the group has been read.
	dry bool
	// past is how many of its jobs read were past their wait: the more
	// there were, the more the next read asks for.
	past int
	// started is how many of its jobs the claim leased (Settle).
	started int
	// index is its place in Decision.groups.
	index int
	// follow is set when a run may go on past the group's available
	// holder (admit).
	follow bool
}

// Plan decides what a claim of q hands out, reading candidates from src:
// as many jobs as the queue's cap and rate leave room for, up to
// req.Want, one group a turn in src's turn order from the groups with
// room under their own limits, a group's jobs in claim order. The jobs
// past their maximum wait that it reads go to Kill and take no room; it
// reads on for their places, in the same groups and then in the next
// ones. It reads from src nothing it does not need: groups up to the
// room (and a few more), and a turn's worth of jobs of each at a time.
func Plan(q Queue, req Request, src Source) (*Decision, error) {
	q.Limits = q.Limits.Normalized()
	d := &Decision{q: q, req: req}
	l := q.Limits
	room := req.Want
	if l.MaxActive > 0 {
		room = min(room, max(0, l.MaxActive-q.Active))
	}
	if r, _ := q.Starts.Room(l.Rate, req.Now); r >= 0 {
		room = min(room, r)
	}
	d.room = room
	var live []*group
	for room > 0 {
		// While the turn order holds groups not looked at yet, every
		// group gets its first job before any gets a second: admit the
		// next groups for the places the fresh ones cannot fill.
		if d.moreGroups() {
			if n := room - fresh(live); n > 0 {
				found, err := d.find(src, n)
				if err != nil {
					return nil, err
				}
				d.prepare(found)
				live = append(live, found...)
			}
		}
		if len(live) == 0 {
			break
		}
		var err error
		if live, err = d.share(src, live, room); err != nil {
			return nil, err
		}
		room = d.room - len(d.Take)
	}
	return d, nil
}

// find admits up to room more groups with room under their limits, in
// turn order, and returns them, looking at no more than MaxGroupVisits
// groups in all. The groups without room count in what held jobs back.
func (d *Decision) find(src Source, room int) ([]*group, error) {
	var admitted []*group
	for len(admitted) < room && d.visited < MaxGroupVisits && !d.groupsFull() {
		if len(d.pending) == 0 {
			if d.exhausted {
				break
			}
			need := min(room-len(admitted), MaxGroupVisits-d.visited)
			found, err := src.Groups(need, min(groupSlack, MaxGroupVisits-d.visited-need))
			if err != nil {
				return nil, fmt.Errorf("find groups: %w", err)
			}
			d.pending = found
			// Fewer than needed: round the whole turn order.
			d.exhausted = len(found) < need
			continue
		}
		g := d.newGroup(d.pending[0])
		d.pending = d.pending[1:]
		d.visited++
		d.last = g.Name
		if d.admit(g) {
			g.index = len(d.groups)
			admitted = append(admitted, g)
			d.groups = append(d.groups, g)
			d.spare = d.spare[1:]
		}
	}
	d.stopped = d.visited >= MaxGroupVisits
	return admitted, nil
}

// newGroup is g as the plan weighs it, in the first spare place; the
// place is taken only when the group is admitted. Places come in blocks,
// so that a plan that looks at many groups allocates a few times only.
func (d *Decision) newGroup(g Group) *group {
	if len(d.spare) == 0 {
		d.spare = make([]group, max(len(d.pending), groupSlack))
	}
	d.spare[0] = group{Group: g}
	return &d.spare[0]
}

// admit sets how many jobs of g may start and reports whether any may; a
// group without room counts in what held jobs back. In an ordered queue a
// group whose holder waits (retrying, scheduled) has no room and counts as
// capped: its holder's return or end frees the group as an active job's
// would. A claim of runs (Request.Runs) may take a run of a free ordered
// group, one without an active job or a holder: its jobs in claim order
// as far as the rest of the plan lets (see runEnds). A group whose holder
// is available gives that job first; a run goes on past it only when it
// is the group's one holder (Group.OneHolder), else it goes alone.
func (d *Decision) admit(g *group) bool {
	l := d.q.Limits
	if g.Stalled {
		d.capped = true
		return false
	}
	g.room = -1
	if l.GroupMaxActive > 0 {
		g.room = max(0, l.GroupMaxActive-g.Active)
		if l.Ordered && g.Holder != "" && g.Holder != job.StateAvailable {
			g.room = 0
		}
		d.capped = d.capped || g.room == 0
		if l.Ordered && d.req.Runs && g.Active == 0 {
			switch {
			case g.Holder == "":
				g.room = -1
			case g.Holder == job.StateAvailable && g.OneHolder:
				g.room, g.follow = -1, true
			}
		}
	}
	if r, next := g.Starts.Room(l.GroupRate, d.req.Now); r >= 0 {
		if r == 0 {
			d.retryAt = earliest(d.retryAt, next)
		}
		if g.room < 0 || r < g.room {
			g.room = r
		}
	}
	return g.room != 0
}

// moreGroups reports whether find may still admit groups.
func (d *Decision) moreGroups() bool {
	return !d.stopped && !d.groupsFull() && (len(d.pending) > 0 || !d.exhausted)
}

// groupsFull reports whether the plan admitted as many groups as the
// request lets give jobs.
func (d *Decision) groupsFull() bool {
	return d.req.MaxGroups > 0 && len(d.groups) >= d.req.MaxGroups
}

// prepare sorts the heads the groups were offered with into the jobs
// that may start and those past their wait: an ordered group's available
// holder alone, else its first jobs.
func (d *Decision) prepare(groups []*group) {
	for _, g := range groups {
		if d.q.Limits.Ordered && g.Holder == job.StateAvailable {
			d.sort(g, []Head{g.Held})
			g.dry = g.Dry && !hasOther(g.Heads, g.Held.Seq)
			if g.follow {
				d.sort(g, without(g.Heads, g.Held.Seq))
			}
			continue
		}
		d.sort(g, g.Heads)
		g.dry = g.Dry
	}
}

// share picks up to room jobs of the live groups, one group a turn, a
// group's own jobs in claim order, and returns the groups that may still
// give some. While find may admit more groups it goes round once, and
// only the groups that took nothing yet take: the next groups come
// before anyone's second job. Then it goes round until the room is full
// or the groups give no more. It reads the groups' jobs a turn's worth at
// a time: enough for every group to fill the room, then more for the
// groups that had enough when others ran dry.
func (d *Decision) share(src Source, live []*group, room int) ([]*group, error) {
	for room > 0 && len(live) > 0 {
		first := d.moreGroups()
		turns := 1
		if !first {
			turns = (room + len(live) - 1) / len(live)
		}
		if err := d.read(src, live, turns); err != nil {
			return nil, err
		}
		// A group that missed turns, its jobs read so far dead of their
		// wait, takes its turns first.
		slices.SortStableFunc(live, func(a, b *group) int { return a.taken - b.taken })
		for t := 0; t < turns && room > 0; t++ {
			for _, g := range live {
				if room > 0 && g.taken < len(g.avail) && g.hasRoom() && (!first || g.taken == 0) && !d.runEnds(g) {
					d.Take = append(d.Take, Pick{Group: g.Name, Head: g.avail[g.taken], admitted: g.index})
					g.taken++
					room--
				}
			}
		}
		live = d.alive(live)
		if first {
			break
		}
	}
	return live, nil
}

// runEnds reports whether the run of ordered group g ends before its next
// job, and then closes g: a run takes a group's jobs in claim order while
// each was enqueued after the one before it, so that a run's order is its
// jobs' enqueue order, the order in which its group's holders go out
// again (job.HoldsGroup) and the rest of a run goes back (ReturnsRun).
func (d *Decision) runEnds(g *group) bool {
	if !d.q.Limits.Ordered || g.taken == 0 || g.avail[g.taken].Seq > g.avail[g.taken-1].Seq {
		return false
	}
	g.room = g.taken
	return true
}

// fresh is how many groups of live took nothing yet and may give a job.
func fresh(live []*group) int {
	n := 0
	for _, g := range live {
		if g.taken == 0 && (len(g.avail) > 0 || !g.dry) {
			n++
		}
	}
	return n
}

// alive is the groups of live that may still give jobs.
func (d *Decision) alive(live []*group) []*group {
	next := live[:0:0]
	for _, g := range live {
		if g.hasRoom() && (g.taken < len(g.avail) || d.canRead(g)) {
			next = append(next, g)
		}
	}
	return next
}

// hasRoom reports whether g may start more than the decision takes.
func (g *group) hasRoom() bool { return g.room < 0 || g.taken < g.room }

// canRead reports whether more of g's jobs may be read: it has some, and
// the plan may still kill those past their wait it would read first.
func (d *Decision) canRead(g *group) bool {
	return !g.dry && len(d.Kill) < MaxKills && !(d.q.Limits.Ordered && g.Holder == job.StateAvailable && !g.follow)
}

// read reads, for each group of live that lacks them, jobs enough for
// turns more turns (one beyond its room, which tells whether its room
// holds jobs back), and as many more as it met past their wait so far.
func (d *Decision) read(src Source, live []*group, turns int) error {
	var (
		refs  []int
		asks  []int
		asked []*group
	)
	for _, g := range live {
		need := turns
		if g.room >= 0 && g.room-g.taken <= turns {
			need = g.room - g.taken + 1
		}
		if n := g.taken + need - len(g.avail); n > 0 && d.canRead(g) {
			refs, asks, asked = append(refs, g.Ref), append(asks, n+g.past), append(asked, g)
		}
	}
	if len(asked) == 0 {
		return nil
	}
	heads, err := src.Heads(refs, asks)
	if err != nil {
		return fmt.Errorf("read the jobs of groups: %w", err)
	}
	for i, g := range asked {
		var hs []Head
		if i < len(heads) {
			hs = heads[i]
		}
		g.dry = len(hs) < asks[i]
		if g.follow {
			hs = without(hs, g.Held.Seq) // read again, in its place in claim order
		}
		d.sort(g, hs)
	}
	return nil
}

// sort sends the jobs of hs past their maximum wait to Kill, up to
// MaxKills, and the others to g's available jobs. A job past its wait
// beyond the bound is left where it is, for the sweep.
func (d *Decision) sort(g *group, hs []Head) {
	for _, h := range hs {
		if job.PastMaxWait(h.Attempt, h.RunAt, d.q.MaxWait, d.req.Now) {
			g.past++
			if len(d.Kill) < MaxKills {
				d.Kill = append(d.Kill, Pick{Group: g.Name, Head: h, admitted: g.index})
			}
			continue
		}
		g.avail = append(g.avail, h)
	}
}

// without is hs without the job seq.
func without(hs []Head, seq int64) []Head {
	i := slices.IndexFunc(hs, func(h Head) bool { return h.Seq == seq })
	if i < 0 {
		return hs
	}
	return slices.Delete(slices.Clone(hs), i, i+1)
}

// hasOther reports whether hs holds a job other than seq.
func hasOther(hs []Head, seq int64) bool {
	for _, h := range hs {
		if h.Seq != seq {
			return true
		}
	}
	return false
}
