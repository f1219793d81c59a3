package storetest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Flow control in the model: the contract of job.Limits stated directly
// over the model's jobs and start times. A claim of a queue with flow
// control is not predicted but checked: the model works out what each
// group could hand out, then holds the store's answer to the rules that
// leave it no choice (the limits, the order within a group, an ordered
// group's holder, every job that may start handed out while the
// claim wants more, turns shared fairly), then follows it.

// maxRatePeriod is the longest period of a model rate: starts older than
// that count under none.
const maxRatePeriod = 10 * time.Second

// setLimits gives queue random caps besides its rates, which stay as
// drawn for the seed (see begin): o stays ordered, and a keeps some
// limit, so that the lanes of its consumer groups have flow control
// whatever they hold.
func (m *model) setLimits(queue string) {
	l := m.rates[queue]
	l.MaxActive = []int{0, 0, 1, 2, 4}[m.rng.IntN(5)]
	l.GroupMaxActive = []int{0, 0, 1, 2}[m.rng.IntN(4)]
	l.Ordered = queue == "o"
	if queue == "a" && l.IsZero() {
		l.MaxActive = 4
	}
	l = l.Normalized()
	m.op = "set limits of " + queue + ": " + l.String()
	if err := m.b.s.QueueSetLimits(m.b.ctx, queue, l); err != nil {
		m.fatalf("%v", err)
	}
	m.limits[queue] = l
	if _, ok := m.paused[queue]; !ok {
		m.paused[queue] = false
	}
}

// baseQueue is the queue of lane, or lane itself when it is a queue.
func baseQueue(lane string) string {
	if q, _, ok := job.SplitLane(lane); ok {
		return q
	}
	return lane
}

// limitsOf is the flow control of queue q, a lane's being its queue's.
func (m *model) limitsOf(q string) job.Limits { return m.limits[baseQueue(q)] }

// pausedOf reports whether q is paused, a lane with its queue.
func (m *model) pausedOf(q string) bool { return m.paused[baseQueue(q)] }

// flow reports whether q has flow control: limits, or jobs with a group
// ever.
func (m *model) flow(q string) bool { return !m.limitsOf(q).IsZero() || m.grouped[q] }

// claimOrder reports whether a goes out before c in claim order.
func claimOrder(a, c *mjob) bool {
	if a.priority != c.priority {
		return a.priority > c.priority
	}
	if !a.runAt.Equal(c.runAt) {
		return a.runAt.Before(c.runAt)
	}
	return a.seq < c.seq
}

// rateRoom returns how many jobs may start at now under r after starts
// (oldest first), -1 for no limit; when none may, it returns the first
// moment one may too. A rate lets a job start at t when fewer than
// r.Limit starts lie in (t-r.Period, t].
func rateRoom(r job.Rate, starts []time.Time, now time.Time) (int, time.Time) {
	if r.IsZero() {
		return -1, time.Time{}
	}
	var in []time.Time
	for _, s := range starts {
		if s.After(now.Add(-r.Period)) {
			in = append(in, s)
		}
	}
	if len(in) < r.Limit {
		return r.Limit - len(in), time.Time{}
	}
	return 0, in[len(in)-r.Limit].Add(r.Period)
}

// withStarts is starts and n more at now.
func withStarts(starts []time.Time, now time.Time, n int) []time.Time {
	out := slices.Clone(starts)
	for range n {
		out = append(out, now)
	}
	return out
}

// recordStarts notes that n jobs of group g of queue q started now.
func (m *model) recordStarts(q, g string, n int) {
	keep := func(s []time.Time) []time.Time {
		s = withStarts(s, m.now, n)
		return slices.DeleteFunc(s, func(t time.Time) bool { return !t.After(m.now.Add(-maxRatePeriod)) })
	}
	m.starts[q] = keep(m.starts[q])
	if m.groupStarts[q] == nil {
		m.groupStarts[q] = make(map[string][]time.Time)
	}
	m.groupStarts[q][g] = keep(m.groupStarts[q][g])
}

// holder is the job that holds group g of the ordered queue q
// (job.HoldsGroup), or nil: the first enqueued of those that do. Jobs of
// one run that failed each hold the group, and go out again one at a
// time in enqueue order.
func (m *model) holder(q, g string) *mjob {
	var h *mjob
	for _, j := range m.jobs {
		if j.queue == q && j.group == g && job.HoldsGroup(j.state, j.attempt) && (h == nil || j.seq < h.seq) {
			h = j
		}
	}
	return h
}

// holders counts the jobs that hold group g of the ordered queue q.
func (m *model) holders(q, g string) int {
	n := 0
	for _, j := range m.jobs {
		if j.queue == q && j.group == g && j.holds() {
			n++
		}
	}
	return n
}

// runOf is the run a free group of an ordered queue gives a claim of
// runs, of its jobs free in claim order: those up to the first enqueued
// before the one ahead of it.
func runOf(free []*mjob) []*mjob {
	for i := 1; i < len(free); i++ {
		if free[i].seq < free[i-1].seq {
			return free[:i]
		}
	}
	return free
}

// returnRun sends back, after an attempt of j of an ordered queue that
// did not complete (attempt.ReturnsRun), the active jobs of its group
// enqueued after it, as handed back unrun (job.AfterRelease); it returns
// them.
func (m *model) returnRun(j *mjob) []*mjob {
	if !m.limitsOf(j.queue).Ordered || j.group == "" {
		return nil
	}
	var back []*mjob
	for _, o := range m.jobs {
		if o.queue == j.queue && o.group == j.group && o.state == job.StateActive && o.seq > j.seq {
			back = append(back, o)
		}
	}
	for _, o := range back {
		o.attempt--
		if o.cancel {
			m.finish(o, job.StateCancelled)
		} else {
			o.state, o.leaseExp = job.StateAvailable, time.Time{}
		}
	}
	return back
}

// mgroup is one group of a queue as a claim finds it.
type mgroup struct {
	name string
	// free are its available jobs that may start (not past their wait),
	// in claim order; cands those the rules let go out next, in the order
	// they must: free, or in an ordered group its available holder
	// alone, or nothing while the holder is out (held).
	free, cands []*mjob
	held        bool
	// avail counts its available jobs, those past their wait included;
	// active its active jobs.
	avail, active int
	// room is how many of its jobs its cap and rate let start, -1 for no
	// bound.
	room int
	got  []*mjob
	// killed counts the jobs past their wait the claim killed.
	killed int
}

// possible is how many jobs g could hand out at most.
func (g *mgroup) possible() int {
	if g.room < 0 {
		return len(g.cands)
	}
	return min(g.room, len(g.cands))
}

// flowReport is what a claim of a queue with flow control must and may
// report of what held its jobs back.
type flowReport struct {
	// mustCap and mayCap say whether the queue must, and may, be among
	// the claim's Capped.
	mustCap, mayCap bool
	// mustRetry are the moments at which rates that alone held jobs back
	// let one start; mayRetry are those of every rate held at zero.
	mustRetry, mayRetry []time.Time
}

// checkFlow checks the jobs seg that a claim of want jobs, of group only
// when it is set, handed out of queue q, which has flow control, killed
// counting the jobs of each group it killed for their waits, and returns
// what the claim must and may report of q. The model holds the claim's
// kills already and not yet its hand-outs.
func (m *model) checkFlow(q string, want int, only string, runs bool, seg []*job.Job, killed map[string]int) flowReport {
	m.b.t.Helper()
	l := m.limitsOf(q)
	fail := func(format string, args ...any) {
		m.b.t.Helper()
		m.fatalf(format+"\n%s", append(args, m.describe(q))...)
	}
	groups := make(map[string]*mgroup)
	get := func(name string) *mgroup {
		g := groups[name]
		if g == nil {
			g = &mgroup{name: name}
			groups[name] = g
		}
		return g
	}
	if only != "" {
		get(only)
	}
	active := 0
	for _, j := range m.jobs {
		if j.queue != q {
			continue
		}
		if j.state == job.StateActive {
			active++
			get(j.group).active++
		}
		if j.state == job.StateAvailable && (only == "" || j.group == only) {
			g := get(j.group)
			g.avail++
			if !m.stale(j) {
				g.free = append(g.free, j)
			}
		}
	}
	room := want
	if l.MaxActive > 0 {
		room = min(room, max(0, l.MaxActive-active))
	}
	if r, _ := rateRoom(l.Rate, m.starts[q], m.now); r >= 0 {
		room = min(room, r)
	}
	names := make([]string, 0, len(groups))
	for name, g := range groups {
		if only != "" && name != only {
			delete(groups, name) // only its active jobs counted
			continue
		}
		names = append(names, name)
		sort.Slice(g.free, func(i, k int) bool { return claimOrder(g.free[i], g.free[k]) })
		g.room = -1
		if l.GroupMaxActive > 0 {
			g.room = max(0, l.GroupMaxActive-g.active)
		}
		if r, _ := rateRoom(l.GroupRate, m.groupStarts[q][name], m.now); r >= 0 && (g.room < 0 || r < g.room) {
			g.room = r
		}
		g.cands = g.free
		if l.Ordered {
			switch h := m.holder(q, name); {
			case h == nil && runs && g.active == 0:
				// A run is bound by the group's rate alone.
				g.cands = runOf(g.free)
				g.room, _ = rateRoom(l.GroupRate, m.groupStarts[q][name], m.now)
			case h == nil:
			case h.state == job.StateAvailable && runs && g.active == 0 && m.holders(q, name) == 1:
				// The holder first, then the run after it.
				g.cands = runOf(append([]*mjob{h}, slices.DeleteFunc(slices.Clone(g.free), func(j *mjob) bool { return j == h })...))
				g.room, _ = rateRoom(l.GroupRate, m.groupStarts[q][name], m.now)
			case h.state == job.StateAvailable:
				g.cands = []*mjob{h}
			default:
				g.cands, g.held = nil, true
			}
		}
		g.killed = killed[name]
	}
	sort.Strings(names)
	for _, gj := range seg {
		j := m.jobs[gj.ID]
		if j == nil || j.queue != q || j.state != job.StateAvailable || (only != "" && j.group != only) {
			fail("claim of %s handed out %s, not an available job of the queue%s", q, gj.ID, groupNote(only))
		}
		g := groups[j.group]
		if n := len(g.got); n >= len(g.cands) || g.cands[n] != j {
			fail("claim of %s handed out %s of group %q after %v; the group's next jobs by its rules are %v",
				q, j.id, j.group, mids(g.got), mids(g.cands))
		}
		g.got = append(g.got, j)
		if g.room >= 0 && len(g.got) > g.room {
			fail("claim of %s handed out %d jobs of group %q, which its cap and rate let %d start",
				q, len(g.got), j.group, g.room)
		}
	}
	if len(seg) > room {
		fail("claim of %s handed out %v; its cap and rate let %d start (of %d wanted)", q, idsOf(seg), room, want)
	}
	for _, name := range names {
		g := groups[name]
		if len(seg) < room && len(g.got) < g.possible() {
			fail("claim of %s handed out %v, %d of %d it could; group %q gave %d of the %d it could (%v)",
				q, idsOf(seg), len(seg), room, name, len(g.got), g.possible(), mids(g.cands))
		}
		if only == "" && len(g.got) < g.possible() {
			for _, other := range names {
				if h := groups[other]; len(h.got) > len(g.got)+g.killed+1 {
					fail("claim of %s handed out %d jobs of group %q and %d of group %q, which could give more",
						q, len(h.got), other, len(g.got), name)
				}
			}
		}
		if n := len(g.got); n > 0 && !(l.Ordered && g.cands[0].holds()) {
			for _, j := range m.jobs {
				if j.queue == q && j.group == name && m.stale(j) && claimOrder(j, g.got[n-1]) {
					fail("claim of %s handed out %s of group %q and left %s before it, past its wait, alive",
						q, g.got[n-1].id, name, j.id)
				}
			}
		}
	}
	return m.flowHeld(q, l, only, want, len(seg), active, groups)
}

// holds reports whether j holds its group in an ordered queue.
func (j *mjob) holds() bool { return job.HoldsGroup(j.state, j.attempt) }

// flowHeld works out what a claim of want jobs of q that handed out n,
// active of its jobs being active before, must and may report of what
// held q's jobs back.
func (m *model) flowHeld(q string, l job.Limits, only string, want, n, active int, groups map[string]*mgroup) flowReport {
	var rep flowReport
	short := n < want
	queueCapped := l.MaxActive > 0 && active+n >= l.MaxActive
	// A claim may name q in Capped when a cap limited it: the queue's, or
	// in a claim of one group the group's, left fewer places than it
	// wanted, or a group's is full, counting the jobs the claim killed for
	// their waits. Neither what is left behind that cap nor whether the
	// claim came short in the end is asked: a store may count a job it
	// read and then killed, every group's jobs in a claim of one group, or
	// what held jobs back in a first try that killed some.
	rep.mayCap = l.MaxActive > 0 && l.MaxActive-active < want
	if g := groups[only]; only != "" && l.GroupMaxActive > 0 && l.GroupMaxActive-g.active < want {
		rep.mayCap = true
	}
	queueRate, queueNext := rateRoom(l.Rate, withStarts(m.starts[q], m.now, n), m.now)
	if queueRate == 0 {
		rep.mayRetry = append(rep.mayRetry, queueNext)
	}
	for name, g := range groups {
		capped := g.held || (l.GroupMaxActive > 0 && g.active+len(g.got) >= l.GroupMaxActive)
		rate, next := rateRoom(l.GroupRate, withStarts(m.groupStarts[q][name], m.now, len(g.got)), m.now)
		if rate == 0 {
			rep.mayRetry = append(rep.mayRetry, next)
		}
		if queueCapped || capped || (l.GroupMaxActive > 0 && g.active+len(g.got)+g.killed >= l.GroupMaxActive) {
			rep.mayCap = true
		}
		if !short || len(g.free) == len(g.got) {
			continue // nothing that may start held back
		}
		// What held the group's jobs back first: the queue's cap, the
		// queue's rate, then the group's own cap and rate. A claim
		// need not look at the groups when the queue's limits hold.
		switch {
		case queueCapped:
			rep.mustCap = true
		case queueRate == 0:
			rep.mustRetry = append(rep.mustRetry, queueNext)
		case capped:
			rep.mustCap = true
		case rate == 0:
			rep.mustRetry = append(rep.mustRetry, next)
		}
	}
	return rep
}

// groupNote says which group a claim was limited to, if any.
func groupNote(only string) string {
	if only == "" {
		return ""
	}
	return " in group " + only
}

// mids is the ids of js.
func mids(js []*mjob) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.id
	}
	return out
}

// describe lists the jobs of queue q for a failure's message.
func (m *model) describe(q string) string {
	var js []*mjob
	for _, j := range m.jobs {
		if j.queue == q {
			js = append(js, j)
		}
	}
	sort.Slice(js, func(i, k int) bool { return js[i].seq < js[k].seq })
	var b strings.Builder
	fmt.Fprintf(&b, "queue %s (limits %+v, settings %+v), started at %v:", q, m.limitsOf(q), m.settingsOf(q), since(m.starts[q]))
	for g, s := range m.groupStarts[q] {
		fmt.Fprintf(&b, " group %q at %v", g, since(s))
	}
	for _, j := range js {
		fmt.Fprintf(&b, "\n\t%s group %q %s attempt %d priority %d run at %v", j.id, j.group, j.state, j.attempt, j.priority, j.runAt.Sub(t0))
		if m.stale(j) {
			b.WriteString(" (past its wait)")
		}
	}
	return b.String()
}

// since is ts as offsets from t0, for a failure's message.
func since(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(t0)
	}
	return out
}
