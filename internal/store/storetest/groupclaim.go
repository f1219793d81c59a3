package storetest

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func groupClaimTests() []group {
	return []group{{"ClaimOfOneGroup", []test{
		{"OnlyTheGroupsJobsInClaimOrder", testGroupClaimOrder},
		{"QueuesWithoutGroupsGiveNothing", testGroupClaimPlainQueues},
		{"AHeldGroupGivesNothing", testGroupClaimOrdered},
		{"AHeldGroupStaysHeldAcrossARestart", testGroupClaimOrderedRestart},
		{"TheCapsAndRatesHold", testGroupClaimLimits},
		{"PausedQueuesAndMaxWaitHold", testGroupClaimPausedAndWait},
		{"ALaneHandsOutItsCopiesOfTheGroup", testGroupClaimLane},
		{"TheRoundRobinGoesOnWhereItWas", testGroupClaimRoundRobin},
	}}}
}

// claimGroup claims up to max jobs of group g from queues at now and
// returns the whole result.
func (b *bundle) claimGroup(now time.Time, max int, g string, queues ...string) *store.ClaimResult {
	b.t.Helper()
	res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: max, Group: g, Now: now})
	if err != nil {
		b.t.Fatalf("claim %d of group %q from %v: %v", max, g, queues, err)
	}
	if res == nil {
		b.t.Fatalf("claim %d of group %q from %v: nil result", max, g, queues)
	}
	return res
}

// inGroup sets a job's group.
func inGroup(g string) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.Group = g }
}

// A claim of one group hands out that group's jobs alone, in claim order
// (priority, then run time, then enqueue order), the queues one after
// the other in the order named; never a job of another group or without
// one, which are left to the claims without a group.
func testGroupClaimOrder(b *bundle) {
	a1 := newJob("q", inGroup("a"))
	b1 := newJob("q", inGroup("b"))
	none := newJob("q")
	a2 := newJob("q", inGroup("a"), withPriority(5))
	a3 := newJob("q", inGroup("a"), withRunAt(at(-time.Second)))
	a4 := newJob("q", inGroup("a"), scheduledAt(at(time.Hour)))
	a5 := newJob("q", inGroup("a"))
	other := newJob("other", inGroup("a"), withPriority(topPriority))
	b.add(a1, b1, none, a2, a3, a4, a5, other)
	res := b.claimGroup(t0, 10, "a", "q", "other")
	if want := []string{a2.ID, a3.ID, a1.ID, a5.ID, other.ID}; !slices.Equal(idsOf(res.Jobs), want) {
		b.t.Fatalf("claim of group a: %v, want %v (claim order in q, then other)", idsOf(res.Jobs), want)
	}
	for _, j := range res.Jobs {
		if j.Group != "a" || j.State != job.StateActive || j.Attempt != 1 {
			b.t.Fatalf("claim of group a handed out %s of group %q, %s after %d attempts", j.ID, j.Group, j.State, j.Attempt)
		}
	}
	if more := b.claimGroup(t0, 10, "a", "q", "other"); len(more.Jobs) != 0 {
		b.t.Fatalf("claim of group a once it ran dry: %v", idsOf(more.Jobs))
	}
	if js := b.claimGroup(t0, 10, "nobody", "q", "other").Jobs; len(js) != 0 {
		b.t.Fatalf("claim of a group without jobs: %v", idsOf(js))
	}
	rest := b.claimAt(t0, 10, "q", "other")
	if got, want := sortedIDs(rest), sorted(b1.ID, none.ID); !slices.Equal(got, want) {
		b.t.Fatalf("claim without a group after: %v, want the jobs of b and without a group %v", got, want)
	}
	b.promote(at(time.Hour))
	b.claimID(at(time.Hour), "q", a4.ID)
}

// Queues that never had a job with a group, with or without limits, give
// a claim of a group nothing, and keep their jobs for the claims without
// one.
func testGroupClaimPlainQueues(b *bundle) {
	b.add(newJobs("plain", 3)...)
	b.add(newJobs("limited", 3)...)
	b.limit("limited", job.Limits{MaxActive: 2})
	b.add(newJobs("grouped", 2)...)
	b.add(grouped("grouped", "g", 1)...)
	res := b.claimGroup(t0, 10, "g", "plain", "limited", "grouped")
	if len(res.Jobs) != 1 || res.Jobs[0].Group != "g" || res.Jobs[0].Queue != "grouped" {
		b.t.Fatalf("claim of group g: %v of groups %q, want the one job of g", idsOf(res.Jobs), groupsOf(res.Jobs))
	}
	if len(res.Capped) != 0 || !res.RetryAt.IsZero() {
		b.t.Fatalf("claim of group g: capped %v, retry at %v, want nothing held back", res.Capped, res.RetryAt)
	}
	if n := len(b.claimAt(t0, 10, "plain", "limited", "grouped")); n != 3+2+2 {
		b.t.Fatalf("claim without a group after: %d jobs, want 7", n)
	}
}

// In an ordered queue a claim of one group gets its first job, then
// nothing while that job is active or waits out a retry (held, like a
// cap), then the retried job before the jobs after it, then the next.
func testGroupClaimOrdered(b *bundle) {
	parts := b.orderedQueue("q", 2, 3)
	first := b.claimGroup(t0, 10, "p0", "q").Jobs
	if !slices.Equal(idsOf(first), parts["p0"][:1]) {
		b.t.Fatalf("claim of group p0: %v, want its first job %s", idsOf(first), parts["p0"][0])
	}
	held := b.claimGroup(t0, 10, "p0", "q")
	if len(held.Jobs) != 0 || !slices.Equal(held.Capped, []string{"q"}) {
		b.t.Fatalf("claim of p0 while its job runs: %v, capped %v; want nothing, capped q", idsOf(held.Jobs), held.Capped)
	}
	b.claimID(t0, "q", parts["p1"][0]) // the other group goes on
	b.completeAll(t0, first)
	second := b.claimGroup(t0, 10, "p0", "q").Jobs
	if !slices.Equal(idsOf(second), parts["p0"][1:2]) {
		b.t.Fatalf("claim of p0 after its first job finished: %v, want %s", idsOf(second), parts["p0"][1])
	}
	b.accepted("fail", b.fail(t0, job.FailItem{ID: second[0].ID, Token: second[0].LeaseToken, Message: "boom", RetryAfter: time.Second}),
		job.StateRetrying)
	held = b.claimGroup(at(500*time.Millisecond), 10, "p0", "q")
	if len(held.Jobs) != 0 || !slices.Equal(held.Capped, []string{"q"}) {
		b.t.Fatalf("claim of p0 while its job waits out a retry: %v, capped %v; want nothing, capped q", idsOf(held.Jobs), held.Capped)
	}
	b.promote(at(2 * time.Second))
	again := b.claimGroup(at(2*time.Second), 10, "p0", "q").Jobs
	if len(again) != 1 || again[0].ID != parts["p0"][1] || again[0].Attempt != 2 {
		b.t.Fatalf("claim of p0 once its retry is due: %v, want %s again (attempt 2)", idsOf(again), parts["p0"][1])
	}
	b.completeAll(at(2*time.Second), again)
	if last := b.claimGroup(at(2*time.Second), 10, "p0", "q").Jobs; !slices.Equal(idsOf(last), parts["p0"][2:]) {
		b.t.Fatalf("claim of p0 after the retried job finished: %v, want %s", idsOf(last), parts["p0"][2])
	}
	// The claims without a group saw the same group: p0 is held.
	if js := b.claimAt(at(2*time.Second), 10, "q"); len(js) != 0 {
		b.t.Fatalf("claim without a group while both groups are held: %v", idsOf(js))
	}
}

// A group held by a job waiting out a retry stays held across a
// restart for a claim of that group, which gets the job first once
// it is due.
func testGroupClaimOrderedRestart(b *bundle) {
	if b.h.Reopen == nil {
		return
	}
	parts := b.orderedQueue("q", 2, 2)
	a := b.claimGroup(t0, 10, "p0", "q").Jobs
	if !slices.Equal(idsOf(a), parts["p0"][:1]) {
		b.t.Fatalf("claim of group p0: %v, want %s", idsOf(a), parts["p0"][0])
	}
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a[0].ID, Token: a[0].LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	b.reopen()
	if js := b.claimGroup(t0, 10, "p0", "q").Jobs; len(js) != 0 {
		b.t.Fatalf("claim of p0 after a restart while its job retries: %v, want none", idsOf(js))
	}
	if js := b.claimGroup(t0, 10, "p1", "q").Jobs; !slices.Equal(idsOf(js), parts["p1"][:1]) {
		b.t.Fatalf("claim of p1 after a restart: %v, want %s", idsOf(js), parts["p1"][0])
	}
	b.promote(at(2 * time.Second))
	if js := b.claimGroup(at(2*time.Second), 10, "p0", "q").Jobs; len(js) != 1 || js[0].ID != a[0].ID {
		b.t.Fatalf("claim of p0 once its retry is due: %v, want %s", idsOf(js), a[0].ID)
	}
}

// A claim of one group holds to the group's cap and rate and to the
// queue's cap and rate, and says what held it back.
func testGroupClaimLimits(b *bundle) {
	b.add(append(grouped("q", "a", 5), grouped("q", "b", 5)...)...)
	b.limit("q", job.Limits{MaxActive: 3, GroupMaxActive: 2})
	res := b.claimGroup(t0, 10, "a", "q")
	if len(res.Jobs) != 2 || !slices.Equal(res.Capped, []string{"q"}) {
		b.t.Fatalf("claim of a under a group cap of 2: %d jobs, capped %v", len(res.Jobs), res.Capped)
	}
	if more := b.claimGroup(t0, 10, "a", "q"); len(more.Jobs) != 0 || !slices.Equal(more.Capped, []string{"q"}) {
		b.t.Fatalf("claim of a at its cap: %d jobs, capped %v", len(more.Jobs), more.Capped)
	}
	if bs := b.claimGroup(t0, 10, "b", "q"); len(bs.Jobs) != 1 || bs.Jobs[0].Group != "b" || !slices.Equal(bs.Capped, []string{"q"}) {
		b.t.Fatalf("claim of b under the queue's cap of 3: %v, capped %v; want one job of b", groupsOf(bs.Jobs), bs.Capped)
	}
	b.completeAll(at(time.Second), res.Jobs[:1])
	if js := b.claimGroup(at(time.Second), 10, "a", "q").Jobs; len(js) != 1 || js[0].Group != "a" {
		b.t.Fatalf("claim of a after one of its jobs finished: %v", groupsOf(js))
	}

	b.add(append(grouped("r", "a", 5), grouped("r", "b", 5)...)...)
	b.limit("r", job.Limits{Rate: job.Rate{Limit: 3, Period: time.Minute}, GroupRate: job.Rate{Limit: 2, Period: time.Minute}})
	res = b.claimGroup(t0, 10, "a", "r")
	if len(res.Jobs) != 2 || !res.RetryAt.Equal(at(time.Minute)) {
		b.t.Fatalf("claim of a under a group rate of 2 a minute: %d jobs, retry at %v", len(res.Jobs), res.RetryAt)
	}
	if n := len(b.claimGroup(at(30*time.Second), 10, "a", "r").Jobs); n != 0 {
		b.t.Fatalf("claim of a within the minute: %d jobs", n)
	}
	res = b.claimGroup(at(30*time.Second), 10, "b", "r")
	if len(res.Jobs) != 1 || !res.RetryAt.Equal(at(time.Minute)) {
		b.t.Fatalf("claim of b under the queue's rate of 3 a minute: %d jobs, retry at %v", len(res.Jobs), res.RetryAt)
	}
	if n := len(b.claimGroup(at(time.Minute), 10, "a", "r").Jobs); n != 2 {
		b.t.Fatalf("claim of a a minute later: %d jobs, want 2", n)
	}
}

// A paused queue gives a claim of one group nothing; a job of the group
// past the queue's maximum wait is killed, not handed out, and the claim
// goes on to the next.
func testGroupClaimPausedAndWait(b *bundle) {
	ids := b.add(grouped("q", "a", 2)...)
	if err := b.s.QueueSetPaused(b.ctx, "q", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	if js := b.claimGroup(t0, 10, "a", "q").Jobs; len(js) != 0 {
		b.t.Fatalf("claim of a group of a paused queue: %v", idsOf(js))
	}
	if err := b.s.QueueSetPaused(b.ctx, "q", false); err != nil {
		b.t.Fatalf("resume: %v", err)
	}
	if js := b.claimGroup(t0, 10, "a", "q").Jobs; !slices.Equal(idsOf(js), ids) {
		b.t.Fatalf("claim of a group of a resumed queue: %v, want %v", idsOf(js), ids)
	}

	b.settle("w", job.QueueSettings{MaxWait: time.Minute})
	old := b.add(newJob("w", inGroup("a")))[0]
	fresh := b.add(newJob("w", inGroup("a"), withRunAt(at(30*time.Second))))[0]
	b.add(newJob("w", inGroup("b")))
	res := b.claimGroup(at(time.Minute), 1, "a", "w")
	if !slices.Equal(idsOf(res.Jobs), []string{fresh}) {
		b.t.Fatalf("claim of a at the wait's deadline of its first job: %v, want %s", idsOf(res.Jobs), fresh)
	}
	if j := b.get(old); j.State != job.StateDead || j.Attempt != 0 {
		b.t.Fatalf("the job past its wait: %s after %d attempts, want dead unstarted", j.State, j.Attempt)
	}
}

// A claim of one group from a consumer group's lane hands out the lane's
// copies of that group's jobs alone; the queue's own jobs stay.
func testGroupClaimLane(b *bundle) {
	b.createGroup("q", "billing", job.StartBeginning, time.Time{})
	ids := b.add(grouped("q", "a", 2)...)
	b.add(grouped("q", "b", 2)...)
	b.add(newJob("q"))
	lane := job.LaneName("q", "billing")
	js := b.claimGroup(t0, 10, "a", lane).Jobs
	if !slices.Equal(idsOf(js), copiesOf(ids, "billing")) {
		b.t.Fatalf("claim of group a from the lane: %v, want the copies %v", idsOf(js), copiesOf(ids, "billing"))
	}
	if n := len(b.claimAt(t0, 10, lane)); n != 3 {
		b.t.Fatalf("claim without a group from the lane after: %d jobs, want 3", n)
	}
	if own := b.claimGroup(t0, 10, "a", "q").Jobs; !slices.Equal(idsOf(own), ids) {
		b.t.Fatalf("claim of group a from the queue itself: %v, want %v", idsOf(own), ids)
	}
}

// A claim of one group takes no turn of the round-robin: the claims
// without a group around it still give one job of every group a turn.
func testGroupClaimRoundRobin(b *bundle) {
	var ps []store.JobInsertParams
	for _, g := range []string{"x", "y", "z"} {
		ps = append(ps, grouped("q", g, 4)...)
	}
	b.add(ps...)
	first := b.claimAt(t0, 1, "q")
	second := b.claimAt(t0, 1, "q")
	if len(first) != 1 || len(second) != 1 || first[0].Group == second[0].Group {
		b.t.Fatalf("first two claims: groups %q and %q, want two groups", groupsOf(first), groupsOf(second))
	}
	var third string
	for _, g := range []string{"x", "y", "z"} {
		if g != first[0].Group && g != second[0].Group {
			third = g
		}
	}
	if js := b.claimGroup(t0, 1, third, "q").Jobs; len(js) != 1 || js[0].Group != third {
		b.t.Fatalf("claim of group %s: %q", third, groupsOf(js))
	}
	if js := b.claimAt(t0, 1, "q"); len(js) != 1 || js[0].Group != third {
		b.t.Fatalf("third claim without a group: group %q, want %s, whose turn it is", groupsOf(js), third)
	}
	// A group that gets its first job after the claims is found at once.
	if js := b.claimGroup(t0, 1, "w", "q").Jobs; len(js) != 0 {
		b.t.Fatalf("claim of group w before it has jobs: %v", idsOf(js))
	}
	late := b.add(newJob("q", inGroup("w")))[0]
	if js := b.claimGroup(t0, 5, "w", "q").Jobs; !slices.Equal(idsOf(js), []string{late}) {
		b.t.Fatalf("claim of group w once it has a job: %v, want %s", idsOf(js), late)
	}
	if n := len(b.claimAt(t0, 20, "q")); n != 3*4-4 {
		b.t.Fatalf("claim without a group after: %d jobs, want the %d left", n, 3*4-4)
	}
}
