package claim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
)

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

// fakeGroup is a group of a fakeSource: its offer and its available jobs
// in claim order.
type fakeGroup struct {
	Group
	jobs []Head
}

// fakeSource offers groups from a list, going round it once from start,
// and their jobs; it counts what it was asked.
type fakeSource struct {
	groups  []fakeGroup
	start   int
	offered int
	one     string
	read    map[string]int
	calls   int // calls of Heads
	heads   int // jobs returned by Heads
}

func (s *fakeSource) Groups(need, more int) ([]Group, error) {
	n := need + more
	var out []Group
	for len(out) < n && s.offered < len(s.groups) {
		at := (s.start + s.offered) % len(s.groups)
		g := s.groups[at]
		s.offered++
		if s.one != "" && g.Name != s.one {
			continue
		}
		g.Ref = at
		out = append(out, g.Group)
	}
	return out, nil
}

func (s *fakeSource) Heads(refs []int, n []int) ([][]Head, error) {
	s.calls++
	if s.read == nil {
		s.read = map[string]int{}
	}
	out := make([][]Head, len(refs))
	for i, ref := range refs {
		g := s.groups[ref]
		from := s.read[g.Name] + len(g.Heads)
		to := min(from+n[i], len(g.jobs))
		if from < to {
			out[i] = g.jobs[from:to]
			s.read[g.Name] += to - from
			s.heads += to - from
		}
	}
	return out, nil
}

// jobs makes n jobs of a group with seqs from first on, due at t0.
func jobs(first int64, n int) []Head {
	out := make([]Head, n)
	for i := range out {
		out[i] = Head{Seq: first + int64(i), RunAt: t0}
	}
	return out
}

// fg is a fakeGroup named name with jobs.
func fg(name string, hs []Head) fakeGroup { return fakeGroup{Group: Group{Name: name}, jobs: hs} }

// taken lists the seqs of ps.
func seqs(ps []Pick) []int64 {
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.Seq
	}
	return out
}

// leaseAll settles d as a store that leased every job it took, with
// left reporting more.
func leaseAll(t *testing.T, d *Decision, more bool) Outcome {
	t.Helper()
	asked := false
	out, err := d.Settle(seqs(d.Take), func() (bool, error) { asked = true; return more, nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = asked
	return out
}

func plan(t *testing.T, q Queue, req Request, src *fakeSource) *Decision {
	t.Helper()
	if req.Now.IsZero() {
		req.Now = t0
	}
	d, err := Plan(q, req, src)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPlanTakesJobsUnderTheLimits(t *testing.T) {
	rate := job.Rate{Limit: 2, Period: time.Second}
	for _, c := range []struct {
		name        string
		q           Queue
		want        int
		groups      []fakeGroup
		take        []int64
		capped      bool
		retryAt     time.Time
		cursor      string
		more        bool // left's answer
		noneStarted bool
	}{
		{name: "a queue without groups goes in claim order",
			q: Queue{Limits: job.Limits{MaxActive: 10}}, want: 3,
			groups: []fakeGroup{fg("", jobs(1, 5))}, take: []int64{1, 2, 3}, cursor: ""},
		{name: "the queue's cap leaves room for one",
			q: Queue{Limits: job.Limits{MaxActive: 2}, Active: 1}, want: 5, more: true,
			groups: []fakeGroup{fg("", jobs(1, 5))}, take: []int64{1}, capped: true, cursor: ""},
		{name: "a full queue hands out nothing and says so",
			q: Queue{Limits: job.Limits{MaxActive: 2}, Active: 2}, want: 5, more: true,
			groups: []fakeGroup{fg("", jobs(1, 5))}, capped: true},
		{name: "a full queue without jobs left holds nothing back",
			q: Queue{Limits: job.Limits{MaxActive: 2}, Active: 2}, want: 5, more: false,
			groups: []fakeGroup{fg("", jobs(1, 5))}},
		{name: "the queue's rate leaves room for one and tells when the next may start",
			q: Queue{Limits: job.Limits{Rate: rate}, Starts: job.StartLog{t0.Add(-300 * time.Millisecond).UnixNano()}}, want: 5, more: true,
			groups: []fakeGroup{fg("", jobs(1, 5))}, take: []int64{1}, retryAt: t0.Add(700 * time.Millisecond), cursor: ""},
		{name: "round-robin: one job of each group a turn",
			q: Queue{Limits: job.Limits{GroupMaxActive: 5}}, want: 5,
			groups: []fakeGroup{fg("a", jobs(10, 3)), fg("b", jobs(20, 1)), fg("c", jobs(30, 2))},
			take:   []int64{10, 20, 30, 11, 31}, cursor: "c"},
		{name: "round-robin: fewer places than groups give the first groups one each",
			q: Queue{Limits: job.Limits{GroupMaxActive: 5}}, want: 2,
			groups: []fakeGroup{fg("a", jobs(10, 3)), fg("b", jobs(20, 1)), fg("c", jobs(30, 2))},
			take:   []int64{10, 20}, cursor: "b"},
		{name: "a group at its cap is passed over and counts as capped",
			q: Queue{Limits: job.Limits{GroupMaxActive: 1}}, want: 5,
			groups: []fakeGroup{{Group: Group{Name: "a", Active: 1}, jobs: jobs(10, 3)}, fg("b", jobs(20, 1))},
			take:   []int64{20}, capped: true, cursor: "b"},
		{name: "a group's cap leaves room for what it lacks",
			q: Queue{Limits: job.Limits{GroupMaxActive: 3}}, want: 10,
			groups: []fakeGroup{{Group: Group{Name: "a", Active: 1}, jobs: jobs(10, 5)}},
			take:   []int64{10, 11}, capped: true, cursor: "a"},
		{name: "a group that ran out at its cap holds nothing back",
			q: Queue{Limits: job.Limits{GroupMaxActive: 2}}, want: 10,
			groups: []fakeGroup{fg("a", jobs(10, 2))},
			take:   []int64{10, 11}, cursor: "a"},
		{name: "a group's rate holds it back and tells when",
			q: Queue{Limits: job.Limits{GroupRate: rate}}, want: 10,
			groups: []fakeGroup{{Group: Group{Name: "a", Starts: job.StartLog{t0.Add(-time.Second / 2).UnixNano(), t0.Add(-time.Second / 4).UnixNano()}}, jobs: jobs(10, 2)}, fg("b", jobs(20, 5))},
			take:   []int64{20, 21}, retryAt: t0.Add(time.Second / 2), cursor: "b"},
		{name: "a stalled group counts as capped",
			q: Queue{Limits: job.Limits{GroupMaxActive: 1}}, want: 3,
			groups: []fakeGroup{{Group: Group{Name: "a", Stalled: true}, jobs: jobs(10, 2)}, fg("b", jobs(20, 1))},
			take:   []int64{20}, capped: true, cursor: "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := plan(t, c.q, Request{Want: c.want}, &fakeSource{groups: c.groups})
			if got := seqs(d.Take); !slices.Equal(got, c.take) {
				t.Fatalf("took %v, want %v", got, c.take)
			}
			out := leaseAll(t, d, c.more)
			if out.Capped != c.capped || !out.RetryAt.Equal(c.retryAt) {
				t.Fatalf("held: capped %v retry at %v, want capped %v retry at %v", out.Capped, out.RetryAt, c.capped, c.retryAt)
			}
			if len(c.take) > 0 && (!out.CursorMoved || out.Cursor != c.cursor) {
				t.Fatalf("cursor %q (moved %v), want %q", out.Cursor, out.CursorMoved, c.cursor)
			}
			if len(c.take) == 0 && out.CursorMoved {
				t.Fatalf("cursor moved to %q by a claim that took nothing", out.Cursor)
			}
		})
	}
}

func TestPlanRecordsOnlyTheStartsOfLeasedJobs(t *testing.T) {
	rate := job.Rate{Limit: 10, Period: time.Second}
	q := Queue{Limits: job.Limits{Rate: rate, GroupRate: rate}}
	src := &fakeSource{groups: []fakeGroup{fg("a", jobs(10, 2)), fg("b", jobs(20, 2))}}
	d := plan(t, q, Request{Want: 4}, src)
	if got := seqs(d.Take); !slices.Equal(got, []int64{10, 20, 11, 21}) {
		t.Fatalf("took %v", got)
	}
	// Job 21 left the available state before the store could lease it.
	out, err := d.Settle([]int64{10, 20, 11}, func() (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if !out.StartsChanged || len(out.Starts) != 3 {
		t.Fatalf("queue log %v (changed %v), want 3 starts", out.Starts, out.StartsChanged)
	}
	logs := map[string]int{}
	for _, g := range out.GroupStarts {
		logs[g.Group] = len(g.Starts)
	}
	if logs["a"] != 2 || logs["b"] != 1 {
		t.Fatalf("group logs %v, want a:2 b:1", logs)
	}
	if out.Cursor != "a" {
		t.Fatalf("cursor %q, want the group of the last job leased, a", out.Cursor)
	}
}

func TestPlanOrderedGroups(t *testing.T) {
	q := Queue{Limits: job.Limits{Ordered: true}}
	held := Head{Seq: 15, Attempt: 1, RunAt: t0}
	src := &fakeSource{groups: []fakeGroup{
		{Group: Group{Name: "a", Holder: job.StateRetrying}, jobs: jobs(10, 3)},
		{Group: Group{Name: "b", Holder: job.StateAvailable, Held: held}, jobs: append(jobs(11, 2), held)},
		fg("c", jobs(30, 3)),
		{Group: Group{Name: "d", Active: 1}, jobs: jobs(40, 3)},
	}}
	d := plan(t, q, Request{Want: 10}, src)
	if got, want := seqs(d.Take), []int64{15, 30}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want the holder of b and the first job of c: %v", got, want)
	}
	out := leaseAll(t, d, true)
	if !out.Capped {
		t.Fatal("groups shut by their holders or at one job each are not reported capped")
	}
	if src.read["b"] != 0 {
		t.Fatalf("read %d jobs of a group whose available holder goes out alone", src.read["b"])
	}
}

func TestPlanOrderedRuns(t *testing.T) {
	q := Queue{Limits: job.Limits{Ordered: true}}
	held := Head{Seq: 15, Attempt: 1, RunAt: t0}
	behind := jobs(50, 4)
	behind[2].Seq = 5 // enqueued before the ones ahead of it: a priority put it behind
	groups := func() []fakeGroup {
		return []fakeGroup{
			{Group: Group{Name: "a", Holder: job.StateRetrying}, jobs: jobs(10, 3)},
			{Group: Group{Name: "b", Holder: job.StateAvailable, Held: held}, jobs: append(jobs(11, 2), held)},
			fg("c", jobs(30, 5)),
			{Group: Group{Name: "d", Active: 1}, jobs: jobs(40, 3)},
			fg("e", behind),
		}
	}
	cases := []struct {
		name string
		req  Request
		want []int64
	}{
		{"a run of each free group, the holder alone, shared round-robin", Request{Want: 20, Runs: true},
			[]int64{15, 30, 50, 31, 51, 32, 33, 34}},
		{"max counts across groups", Request{Want: 4, Runs: true}, []int64{15, 30, 50, 31}},
		{"one group", Request{Want: 20, Runs: true, MaxGroups: 1}, []int64{15}},
		{"without runs one job a group", Request{Want: 20}, []int64{15, 30, 50}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := plan(t, q, c.req, &fakeSource{groups: groups()})
			if got := seqs(d.Take); !slices.Equal(got, c.want) {
				t.Fatalf("took %v, want %v", got, c.want)
			}
		})
	}
	one := groups()[1:2]
	one[0].Group.OneHolder = true
	if got := seqs(plan(t, q, Request{Want: 20, Runs: true}, &fakeSource{groups: one}).Take); !slices.Equal(got, []int64{15}) {
		t.Fatalf("the one holder of a group whose other jobs were enqueued before it: took %v, want it alone", got)
	}
	one = []fakeGroup{{Group: Group{Name: "f", Holder: job.StateAvailable, Held: held, OneHolder: true},
		jobs: append([]Head{held}, jobs(16, 3)...)}}
	if got := seqs(plan(t, q, Request{Want: 20, Runs: true}, &fakeSource{groups: one}).Take); !slices.Equal(got, []int64{15, 16, 17, 18}) {
		t.Fatalf("the one holder of a group and the jobs after it: took %v, want [15 16 17 18]", got)
	}
	src := &fakeSource{groups: groups()[2:3]}
	src.groups[0].Group.Starts = nil
	rated := Queue{Limits: job.Limits{Ordered: true, GroupRate: job.Rate{Limit: 2, Period: time.Second}}}
	if got := seqs(plan(t, rated, Request{Want: 20, Runs: true}, src).Take); !slices.Equal(got, []int64{30, 31}) {
		t.Fatalf("a run under a group rate of 2: took %v", got)
	}
}

func TestPlanKillsJobsPastTheirWaitAndReadsOnForTheirPlaces(t *testing.T) {
	wait := time.Minute
	old := func(seq int64, attempt int) Head { return Head{Seq: seq, Attempt: attempt, RunAt: t0.Add(-2 * wait)} }
	a := []Head{old(1, 0), old(2, 0), old(3, 1), {Seq: 4, RunAt: t0}, {Seq: 5, RunAt: t0}}
	src := &fakeSource{groups: []fakeGroup{fg("", a)}}
	d := plan(t, Queue{Limits: job.Limits{MaxActive: 10}, MaxWait: wait}, Request{Want: 2}, src)
	if got, want := seqs(d.Take), []int64{3, 4}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v: a started job is never past its wait", got, want)
	}
	if got, want := seqs(d.Kill), []int64{1, 2}; !slices.Equal(got, want) {
		t.Fatalf("killed %v, want %v", got, want)
	}
	// In an ordered queue the group's first job that may still start goes
	// out; those before it die.
	src = &fakeSource{groups: []fakeGroup{fg("g", []Head{old(1, 0), {Seq: 2, RunAt: t0}, {Seq: 3, RunAt: t0}})}}
	d = plan(t, Queue{Limits: job.Limits{Ordered: true}, MaxWait: wait}, Request{Want: 5}, src)
	if got := seqs(d.Take); !slices.Equal(got, []int64{2}) || !slices.Equal(seqs(d.Kill), []int64{1}) {
		t.Fatalf("ordered: took %v killed %v, want [2] and [1]", got, seqs(d.Kill))
	}
}

func TestPlanKillsNoMoreThanItsBound(t *testing.T) {
	wait := time.Minute
	hs := make([]Head, MaxKills+50)
	for i := range hs {
		hs[i] = Head{Seq: int64(i + 1), RunAt: t0.Add(-2 * wait)}
	}
	hs = append(hs, Head{Seq: 1e6, RunAt: t0})
	src := &fakeSource{groups: []fakeGroup{fg("", hs)}}
	d := plan(t, Queue{Limits: job.Limits{MaxActive: 10}, MaxWait: wait}, Request{Want: 1}, src)
	if len(d.Kill) != MaxKills {
		t.Fatalf("killed %d, want the bound %d", len(d.Kill), MaxKills)
	}
	if src.heads > 2*MaxKills || src.calls > 16 {
		t.Fatalf("read %d jobs in %d calls to kill %d", src.heads, src.calls, MaxKills)
	}
}

func TestPlanReadsWhatItNeeds(t *testing.T) {
	var groups []fakeGroup
	for i := range 100 {
		groups = append(groups, fg(fmt.Sprintf("g%03d", i), jobs(int64(i*1000), 1000)))
	}
	src := &fakeSource{groups: groups}
	d := plan(t, Queue{Limits: job.Limits{GroupMaxActive: 100}}, Request{Want: 10}, src)
	if len(d.Take) != 10 {
		t.Fatalf("took %d", len(d.Take))
	}
	if src.offered > 10+groupSlack || src.heads > 20 || src.calls != 1 {
		t.Fatalf("read %d groups and %d jobs in %d calls for a claim of 10", src.offered, src.heads, src.calls)
	}
}

func TestPlanOfOneGroupLeavesTheCursor(t *testing.T) {
	src := &fakeSource{one: "b", groups: []fakeGroup{fg("a", jobs(10, 3)), fg("b", jobs(20, 3))}}
	d := plan(t, Queue{Limits: job.Limits{GroupMaxActive: 2}}, Request{Want: 5, Group: "b"}, src)
	if got := seqs(d.Take); !slices.Equal(got, []int64{20, 21}) {
		t.Fatalf("took %v", got)
	}
	out := leaseAll(t, d, true)
	if out.CursorMoved {
		t.Fatalf("a claim of one group moved the cursor to %q", out.Cursor)
	}
	if !out.Capped {
		t.Fatal("the group's cap held a job back and was not reported")
	}
}

func TestPlanGoesOnPastAsManyCappedGroupsAsItMayVisit(t *testing.T) {
	var groups []fakeGroup
	for i := range MaxGroupVisits + 10 {
		groups = append(groups, fakeGroup{Group: Group{Name: fmt.Sprintf("g%05d", i), Active: 1}, jobs: jobs(int64(i*10), 1)})
	}
	groups[len(groups)-1].Active = 0
	q := Queue{Limits: job.Limits{GroupMaxActive: 1}}
	src := &fakeSource{groups: groups}
	d := plan(t, q, Request{Want: 1}, src)
	if len(d.Take) != 0 || src.offered > MaxGroupVisits+groupSlack {
		t.Fatalf("took %d after looking at %d groups", len(d.Take), src.offered)
	}
	out := leaseAll(t, d, true)
	if !out.CursorMoved || out.Cursor != groups[MaxGroupVisits-1].Name {
		t.Fatalf("cursor %q (moved %v), want the last group looked at", out.Cursor, out.CursorMoved)
	}
	next := slices.IndexFunc(groups, func(g fakeGroup) bool { return g.Name == out.Cursor }) + 1
	d = plan(t, q, Request{Want: 1}, &fakeSource{groups: groups, start: next})
	if got := seqs(d.Take); len(got) != 1 || !strings.HasSuffix(groups[len(groups)-1].Name, fmt.Sprint(MaxGroupVisits+9)) || got[0] != groups[len(groups)-1].jobs[0].Seq {
		t.Fatalf("the next claim took %v, want the free group's job", got)
	}
}

func TestPlanGoesOnToTheNextGroupsForPlacesTheFirstCouldNotFill(t *testing.T) {
	wait := time.Minute
	past := []Head{{Seq: 1, RunAt: t0.Add(-2 * wait)}, {Seq: 2, RunAt: t0.Add(-2 * wait)}}
	src := &fakeSource{groups: []fakeGroup{fg("a", past), fg("b", nil), fg("c", jobs(30, 2)), fg("d", jobs(40, 2))}}
	d := plan(t, Queue{Limits: job.Limits{GroupMaxActive: 5}, MaxWait: wait}, Request{Want: 2}, src)
	if got, want := seqs(d.Take), []int64{30, 40}; !slices.Equal(got, want) {
		t.Fatalf("took %v, want %v: the groups with nothing that may start give their places to the next", got, want)
	}
	if got := seqs(d.Kill); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("killed %v", got)
	}
	if out := leaseAll(t, d, true); out.Cursor != "d" {
		t.Fatalf("cursor %q, want d", out.Cursor)
	}
}

func TestPlanGivesTheNextGroupsTheirTurnBeforeASecondJobOfAny(t *testing.T) {
	wait := time.Minute
	past := []Head{{Seq: 1, RunAt: t0.Add(-2 * wait)}, {Seq: 2, RunAt: t0.Add(-2 * wait)}}
	for _, c := range []struct {
		name  string
		first []Head
	}{
		{"a group whose jobs died of their wait", past},
		{"a group with no job", nil},
	} {
		src := &fakeSource{groups: []fakeGroup{fg("a", c.first), fg("b", jobs(20, 3)), fg("c", jobs(30, 1)), fg("d", jobs(40, 1))}}
		d := plan(t, Queue{Limits: job.Limits{GroupMaxActive: 5}, MaxWait: wait}, Request{Want: 3}, src)
		if got, want := seqs(d.Take), []int64{20, 30, 40}; !slices.Equal(got, want) {
			t.Fatalf("%s: took %v, want %v: every group with jobs gets one before any gets two", c.name, got, want)
		}
		src = &fakeSource{groups: []fakeGroup{fg("a", c.first), fg("b", jobs(20, 3)), fg("c", jobs(30, 1))}}
		d = plan(t, Queue{Limits: job.Limits{GroupMaxActive: 5}, MaxWait: wait}, Request{Want: 4}, src)
		if got, want := seqs(d.Take), []int64{20, 30, 21, 22}; !slices.Equal(got, want) {
			t.Fatalf("%s: took %v, want %v: once every group had its turn the others go on", c.name, got, want)
		}
	}
}

func TestLeasedOfMatchesInAnyOrder(t *testing.T) {
	take := []Pick{{Head: Head{Seq: 1}}, {Head: Head{Seq: 2}}, {Head: Head{Seq: 3}}, {Head: Head{Seq: 4}}}
	for _, tc := range []struct {
		name   string
		leased []int64
		want   []bool
	}{
		{"all in order", []int64{1, 2, 3, 4}, []bool{true, true, true, true}},
		{"some in order", []int64{2, 4}, []bool{false, true, false, true}},
		{"out of order", []int64{4, 1}, []bool{true, false, false, true}},
		{"none", nil, []bool{false, false, false, false}},
	} {
		started := leasedOf(take, tc.leased)
		for i, want := range tc.want {
			if got := started(i); got != want {
				t.Errorf("%s: pick %d leased = %v, want %v", tc.name, i, got, want)
			}
		}
	}
}
