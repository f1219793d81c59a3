package storetest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func flowTests() []group {
	return []group{{"FlowControl", []test{
		{"GroupIsStoredWithTheJob", testFlowGroupKept},
		{"LimitsAreStoredAndCleared", testFlowLimitsKept},
		{"MaxActiveCapsTheQueue", testFlowMaxActive},
		{"AFinishedExpiredOrReleasedJobFreesItsPlace", testFlowFreedPlaces},
		{"RateHoldsInEveryWindow", testFlowRate},
		{"AGroupedQueueHandsOutEachJobOnceAfterItsCapGoes", testFlowGroupedCapCleared},
		{"GroupMaxActiveCapsEachGroup", testFlowGroupMaxActive},
		{"GroupRateHoldsForEachGroup", testFlowGroupRate},
		{"ClaimsGoRoundRobinOverGroups", testFlowRoundRobin},
		{"ASmallGroupIsNotHeldBackByABigOne", testFlowFairness},
		{"PriorityHoldsWithinAGroup", testFlowPriorityInGroup},
		{"JobsWithoutAGroupAreOneGroup", testFlowNoGroup},
		{"AFinishedJobRetriedAfterItsQueueTookGroupsIsClaimed", testFlowRetryAfterGroups},
		{"AGroupWithoutAvailableJobsIsNotCapped", testFlowCapWithoutJobs},
		{"PlainQueuesComeFirstInAFetchOfSeveral", testFlowSeveralQueues},
		{"CapsHoldUnderConcurrentClaims", testFlowConcurrentCaps},
		{"LimitsHoldAcrossARestart", testFlowRestart},
	}}}
}

// grouped returns the parameters of n available jobs of queue in group g.
func grouped(queue, g string, n int, opts ...func(*store.JobInsertParams)) []store.JobInsertParams {
	ps := newJobs(queue, n)
	for i := range ps {
		ps[i].Group = g
		for _, o := range opts {
			o(&ps[i])
		}
	}
	return ps
}

// limit sets the limits of queue, which must succeed.
func (b *bundle) limit(queue string, l job.Limits) {
	b.t.Helper()
	if err := b.s.QueueSetLimits(b.ctx, queue, l); err != nil {
		b.t.Fatalf("set limits of %s: %v", queue, err)
	}
}

// completeAll acknowledges js at now.
func (b *bundle) completeAll(now time.Time, js []*job.Job) {
	b.t.Helper()
	items := make([]job.CompleteItem, len(js))
	for i, j := range js {
		items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
	}
	for i, o := range b.complete(now, items...) {
		if o.Err != nil {
			b.t.Fatalf("complete %s: %v", js[i].ID, o.Err)
		}
	}
}

// groupsOf lists the groups of js in order.
func groupsOf(js []*job.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.Group
	}
	return out
}

// A job's group comes back from insert, claim, get and list as given;
// a job without one has none.
func testFlowGroupKept(b *bundle) {
	p := newJob("q", func(p *store.JobInsertParams) { p.Group = "tenant:acme é/42" })
	plain := newJob("q")
	res := b.insertAt(t0, p, plain)
	if res[0].Job.Group != p.Group || res[1].Job.Group != "" {
		b.t.Fatalf("insert results: groups %q and %q", res[0].Job.Group, res[1].Job.Group)
	}
	if g := b.get(p.ID).Group; g != p.Group {
		b.t.Fatalf("get: group %q, want %q", g, p.Group)
	}
	js := b.claimAt(t0, 2, "q")
	if len(js) != 2 || !slices.Contains(groupsOf(js), p.Group) || !slices.Contains(groupsOf(js), "") {
		b.t.Fatalf("claimed groups %q", groupsOf(js))
	}
	b.completeAll(at(time.Second), js)
	for _, j := range b.listAll("q", job.StateCompleted, 10) {
		want := ""
		if j.ID == p.ID {
			want = p.Group
		}
		if j.Group != want {
			b.t.Fatalf("listed job %s: group %q, want %q", j.ID, j.Group, want)
		}
	}
}

// Limits are stored with the queue (creating it), reported by QueueGet
// and QueueList, replaced as a whole, cleared by zero limits, and kept
// across a restart.
func testFlowLimitsKept(b *bundle) {
	l := job.Limits{Rate: job.Rate{Limit: 100, Period: time.Minute}, MaxActive: 7,
		GroupRate: job.Rate{Limit: 3, Period: 1500 * time.Millisecond}, GroupMaxActive: 2}
	b.limit("fresh", l)
	if q := b.queue("fresh"); q.Limits != l {
		b.t.Fatalf("limits %+v, want %+v", q.Limits, l)
	}
	qs, err := b.s.QueueList(b.ctx)
	if err != nil || len(qs) != 1 || qs[0].Limits != l {
		b.t.Fatalf("queue list %+v, %v", qs, err)
	}
	only := job.Limits{MaxActive: 1}
	b.limit("fresh", only)
	if q := b.queue("fresh"); q.Limits != only {
		b.t.Fatalf("replaced limits %+v, want %+v", q.Limits, only)
	}
	if b.h.Reopen != nil {
		b.reopen()
		if q := b.queue("fresh"); q.Limits != only {
			b.t.Fatalf("limits after a restart %+v, want %+v", q.Limits, only)
		}
	}
	b.limit("fresh", job.Limits{})
	if q := b.queue("fresh"); !q.Limits.IsZero() {
		b.t.Fatalf("cleared limits %+v", q.Limits)
	}
}

// With MaxActive, a claim hands out no more than the places left and
// says the cap held jobs back.
func testFlowMaxActive(b *bundle) {
	b.add(newJobs("q", 10)...)
	b.limit("q", job.Limits{MaxActive: 3})
	res := b.claimResult(t0, 10, "q")
	if len(res.Jobs) != 3 || !slices.Equal(res.Capped, []string{"q"}) {
		b.t.Fatalf("claim under a cap of 3: %d jobs, capped %v", len(res.Jobs), res.Capped)
	}
	if more := b.claimResult(t0, 10, "q"); len(more.Jobs) != 0 || !slices.Equal(more.Capped, []string{"q"}) {
		b.t.Fatalf("claim at the cap: %d jobs, capped %v", len(more.Jobs), more.Capped)
	}
	b.completeAll(at(time.Second), res.Jobs[:1])
	if more := b.claimAt(at(time.Second), 10, "q"); len(more) != 1 {
		b.t.Fatalf("after one ack: %d jobs, want 1", len(more))
	}
	b.limit("q", job.Limits{MaxActive: 5})
	if more := b.claimAt(at(time.Second), 10, "q"); len(more) != 2 {
		b.t.Fatalf("after raising the cap to 5: %d jobs, want 2", len(more))
	}
	b.limit("q", job.Limits{})
	if more := b.claimResult(at(time.Second), 10, "q"); len(more.Jobs) != 4 || len(more.Capped) != 0 {
		b.t.Fatalf("without a cap: %d jobs, capped %v, want the 4 left", len(more.Jobs), more.Capped)
	}
}

// A grouped queue under a cap, then without one, hands out each of its
// jobs once: the jobs a claim picks are not picked again when their
// group runs out and comes back in the same claim.
func testFlowGroupedCapCleared(b *bundle) {
	b.add(grouped("q", "t", 3)...)
	b.limit("q", job.Limits{MaxActive: 1})
	first := b.claimAt(t0, 5, "q")
	if len(first) != 1 {
		b.t.Fatalf("claim under a cap of 1: %d jobs", len(first))
	}
	b.limit("q", job.Limits{})
	rest := b.claimAt(t0, 5, "q")
	seen := map[string]bool{first[0].ID: true}
	for _, j := range rest {
		if seen[j.ID] {
			b.t.Fatalf("job %s handed out twice", j.ID)
		}
		seen[j.ID] = true
	}
	if len(seen) != 3 {
		b.t.Fatalf("without the cap: %d more jobs, want the 2 left", len(rest))
	}
}

// A place is freed by an ack, a fail, a release, and a lease that ran
// out.
func testFlowFreedPlaces(b *bundle) {
	b.add(newJobs("q", 10)...)
	b.limit("q", job.Limits{MaxActive: 1})
	j := b.claimAt(t0, 5, "q")[0]
	b.accepted("fail", b.fail(at(time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: true}), job.StateDead)
	j = b.claimAt(at(time.Second), 5, "q")[0]
	b.accepted("release", b.release(at(2*time.Second), job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}), job.StateAvailable)
	j = b.claimAt(at(2*time.Second), 5, "q")[0]
	if n := len(b.claimAt(at(2*time.Second), 5, "q")); n != 0 {
		b.t.Fatalf("claim at the cap: %d jobs", n)
	}
	later := j.LeaseExpiresAt.Add(time.Second)
	if _, err := b.s.JobRescueExpired(b.ctx, later, 100); err != nil {
		b.t.Fatal(err)
	}
	if n := len(b.claimAt(later, 5, "q")); n != 1 {
		b.t.Fatalf("after the lease ran out: %d jobs, want 1", n)
	}
}

// A rate of 3 per 10 s lets 3 jobs start, then none until the window
// moves past the first of them, when it says so.
func testFlowRate(b *bundle) {
	b.add(newJobs("q", 20)...)
	b.limit("q", job.Limits{Rate: job.Rate{Limit: 3, Period: 10 * time.Second}})
	res := b.claimResult(t0, 10, "q")
	if len(res.Jobs) != 3 || !res.RetryAt.Equal(at(10*time.Second)) {
		b.t.Fatalf("first claim: %d jobs, retry at %v, want 3 and %v", len(res.Jobs), res.RetryAt, at(10*time.Second))
	}
	b.completeAll(at(time.Second), res.Jobs)
	res = b.claimResult(at(5*time.Second), 10, "q")
	if len(res.Jobs) != 0 || !res.RetryAt.Equal(at(10*time.Second)) {
		b.t.Fatalf("within the window: %d jobs, retry at %v", len(res.Jobs), res.RetryAt)
	}
	if n := len(b.claimAt(at(10*time.Second), 10, "q")); n != 3 {
		b.t.Fatalf("a window later: %d jobs, want 3", n)
	}
	// Started one by one over time, never more than 3 in any 10 s.
	var starts []time.Time
	for s := 11; s < 60; s++ {
		now := at(time.Duration(s) * time.Second)
		for range b.claimAt(now, 1, "q") {
			starts = append(starts, now)
		}
	}
	for i := range starts {
		in := 0
		for _, s := range starts {
			if !s.Before(starts[i]) && s.Before(starts[i].Add(10*time.Second)) {
				in++
			}
		}
		if in > 3 {
			b.t.Fatalf("%d starts in the 10 s from %v", in, starts[i])
		}
	}
}

// GroupMaxActive caps every group apart: with a cap of 1, one job of
// each group runs at a time, in the group's claim order.
func testFlowGroupMaxActive(b *bundle) {
	var ps []store.JobInsertParams
	for _, g := range []string{"a", "b", "c"} {
		ps = append(ps, grouped("q", g, 3)...)
	}
	b.add(ps...)
	b.limit("q", job.Limits{GroupMaxActive: 1})
	res := b.claimResult(t0, 10, "q")
	got := groupsOf(res.Jobs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b", "c"}) || !slices.Equal(res.Capped, []string{"q"}) {
		b.t.Fatalf("claim under a group cap of 1: groups %v, capped %v", groupsOf(res.Jobs), res.Capped)
	}
	for _, j := range res.Jobs {
		if want := ps[slices.IndexFunc(ps, func(p store.JobInsertParams) bool { return p.Group == j.Group })].ID; j.ID != want {
			b.t.Fatalf("group %s handed out %s before its first job %s", j.Group, j.ID, want)
		}
	}
	if n := len(b.claimAt(t0, 10, "q")); n != 0 {
		b.t.Fatalf("every group at its cap: %d jobs", n)
	}
	var a *job.Job
	for _, j := range res.Jobs {
		if j.Group == "a" {
			a = j
		}
	}
	b.completeAll(at(time.Second), []*job.Job{a})
	next := b.claimAt(at(time.Second), 10, "q")
	if len(next) != 1 || next[0].Group != "a" || next[0].ID != ps[1].ID {
		b.t.Fatalf("after group a's job finished: %v %v, want a's second job %s", idsOf(next), groupsOf(next), ps[1].ID)
	}
}

// GroupRate holds for each group apart.
func testFlowGroupRate(b *bundle) {
	b.add(append(grouped("q", "a", 5), grouped("q", "b", 5)...)...)
	b.limit("q", job.Limits{GroupRate: job.Rate{Limit: 2, Period: time.Minute}})
	res := b.claimResult(t0, 10, "q")
	got := groupsOf(res.Jobs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "a", "b", "b"}) || !res.RetryAt.Equal(at(time.Minute)) {
		b.t.Fatalf("claim under a group rate of 2 a minute: groups %v, retry at %v", got, res.RetryAt)
	}
	if n := len(b.claimAt(at(30*time.Second), 10, "q")); n != 0 {
		b.t.Fatalf("within the minute: %d jobs", n)
	}
	if n := len(b.claimAt(at(time.Minute), 10, "q")); n != 4 {
		b.t.Fatalf("a minute later: %d jobs, want 4", n)
	}
}

// Jobs go out one group a turn: claims of one job at a time visit every
// group with jobs before any group a second time.
func testFlowRoundRobin(b *bundle) {
	var ps []store.JobInsertParams
	for _, g := range []string{"x", "y", "z"} {
		ps = append(ps, grouped("q", g, 4)...)
	}
	b.add(ps...)
	var got []string
	for range 12 {
		js := b.claimAt(t0, 1, "q")
		if len(js) != 1 {
			b.t.Fatalf("claim %d: %d jobs", len(got)+1, len(js))
		}
		got = append(got, js[0].Group)
	}
	for turn := 0; turn < 4; turn++ {
		round := slices.Clone(got[turn*3 : turn*3+3])
		slices.Sort(round)
		if !slices.Equal(round, []string{"x", "y", "z"}) {
			b.t.Fatalf("claims by group %v: turn %d is not one of each", got, turn+1)
		}
	}
	// A claim of many takes one a group a turn, too.
	b.add(append(grouped("r", "x", 5), grouped("r", "y", 1)...)...)
	js := b.claimAt(t0, 4, "r")
	if n := slices.Index(groupsOf(js), "y"); len(js) != 4 || n < 0 || n > 1 {
		b.t.Fatalf("claim of 4 from a big and a small group: %v, want y's job among the first two", groupsOf(js))
	}
}

// One group with many jobs, enqueued first, does not hold back a hundred
// small ones: each small group's first job starts within the first 200
// claims.
func testFlowFairness(b *bundle) {
	b.add(grouped("q", "big", 1000)...)
	var small []store.JobInsertParams
	for g := range 100 {
		small = append(small, grouped("q", fmt.Sprintf("t%03d", g), 3)...)
	}
	b.add(small...)
	seen := map[string]bool{}
	for claims := 0; claims < 200; claims += 10 {
		for _, j := range b.claimAt(t0, 10, "q") {
			seen[j.Group] = true
		}
	}
	for g := range 100 {
		if name := fmt.Sprintf("t%03d", g); !seen[name] {
			b.t.Fatalf("group %s got no job in the first 200 claims (groups seen: %d)", name, len(seen))
		}
	}
}

// Within a group, jobs go out by priority, then run time, then enqueue
// order.
func testFlowPriorityInGroup(b *bundle) {
	ps := grouped("q", "g", 3)
	ps[2].Priority = 5
	b.add(ps...)
	b.add(grouped("q", "h", 1)...)
	order := map[string]int{}
	for i := range 4 {
		js := b.claimAt(t0, 1, "q")
		order[js[0].ID] = i
	}
	if !(order[ps[2].ID] < order[ps[0].ID] && order[ps[0].ID] < order[ps[1].ID]) {
		b.t.Fatalf("group g went out as %v, want %s (priority 5), then %s, then %s", order, ps[2].ID, ps[0].ID, ps[1].ID)
	}
}

// Jobs without a group share one turn with the groups, and one group's
// caps.
func testFlowNoGroup(b *bundle) {
	b.add(newJobs("q", 3)...)
	b.add(grouped("q", "g", 3)...)
	b.limit("q", job.Limits{GroupMaxActive: 1})
	res := b.claimResult(t0, 10, "q")
	got := groupsOf(res.Jobs)
	slices.Sort(got)
	if !slices.Equal(got, []string{"", "g"}) {
		b.t.Fatalf("claim with jobs without a group and a group cap of 1: groups %q", got)
	}
}

// Jobs that finished before their queue had groups join the empty group
// when retried, one by one or all at once: a claim hands them out in their
// turn and priority, as if they had been added then.
func testFlowRetryAfterGroups(b *bundle) {
	dead := []*job.Job{b.jobIn(job.StateDead, "q"), b.jobIn(job.StateDead, "q")}
	done := b.jobIn(job.StateCancelled, "q", withPriority(topPriority))
	b.add(grouped("q", "g", 2)...)
	b.add(newJobs("q", 2)...)
	if _, err := b.s.JobRetry(b.ctx, done.ID, t0); err != nil {
		b.t.Fatalf("retry %s: %v", done.ID, err)
	}
	n, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateDead, Now: t0})
	if err != nil || n != 2 {
		b.t.Fatalf("retry the dead jobs of q: %d, %v", n, err)
	}
	// The retried jobs have the top priority: the empty group's first
	// three turns are theirs.
	want := map[string]bool{done.ID: true, dead[0].ID: true, dead[1].ID: true}
	var firsts []string
	for range 7 {
		js := b.claimAt(t0, 1, "q")
		if len(js) != 1 {
			b.t.Fatalf("claim of q with jobs available: %d jobs", len(js))
		}
		if js[0].Group == "" && len(firsts) < 3 {
			firsts = append(firsts, js[0].ID)
		}
	}
	for _, id := range firsts {
		delete(want, id)
	}
	if len(want) > 0 {
		b.t.Fatalf("the empty group went out first as %v; retried jobs %v were not among them", firsts, want)
	}
	if js := b.claimAt(t0, 10, "q"); len(js) != 0 {
		b.t.Fatalf("claim after every job went out: %v", idsOf(js))
	}
}

// A group at its cap with no available job holds nothing back: a claim
// that finds nothing else does not name its queue in Capped, even after
// a purge made the store read the queue's groups again.
func testFlowCapWithoutJobs(b *bundle) {
	b.add(grouped("q", "g", 2)...)
	b.limit("q", job.Limits{GroupMaxActive: 1})
	if js := b.claimAt(t0, 1, "q"); len(js) != 1 {
		b.t.Fatalf("first claim: %d jobs, want 1", len(js))
	}
	if n, err := b.s.QueuePurge(b.ctx, "q"); err != nil || n != 1 {
		b.t.Fatalf("purge q: %d, %v", n, err)
	}
	res := b.claimResult(t0, 5, "q")
	if len(res.Jobs) != 0 || len(res.Capped) != 0 {
		b.t.Fatalf("claim of q with no available job: jobs %v, Capped %v; want none", idsOf(res.Jobs), res.Capped)
	}
}

// A fetch naming a plain queue and a queue with flow control takes the
// plain queue's jobs first, then what the limited one lets out.
func testFlowSeveralQueues(b *bundle) {
	b.add(newJobs("limited", 5)...)
	b.add(newJobs("plain", 2)...)
	b.limit("limited", job.Limits{MaxActive: 2})
	res := b.claimResult(t0, 10, "limited", "plain")
	var queues []string
	for _, j := range res.Jobs {
		queues = append(queues, j.Queue)
	}
	if !slices.Equal(queues, []string{"plain", "plain", "limited", "limited"}) || !slices.Equal(res.Capped, []string{"limited"}) {
		b.t.Fatalf("claim from a limited and a plain queue: %v, capped %v", queues, res.Capped)
	}
}

// Concurrent claimers never hold more jobs than the caps allow.
func testFlowConcurrentCaps(b *bundle) {
	var ps []store.JobInsertParams
	for g := range 6 {
		ps = append(ps, grouped("q", fmt.Sprintf("g%d", g), 40)...)
	}
	b.add(ps...)
	const maxActive, groupMax = 8, 2
	b.limit("q", job.Limits{MaxActive: maxActive, GroupMaxActive: groupMax})
	var mu sync.Mutex
	active := map[string]int{} // by group
	total, done := 0, atomic.Int64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; done.Load() < int64(len(ps)) && round < 2000; round++ {
				js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1 + w%3, Now: t0}))
				if err != nil {
					b.t.Errorf("claim: %v", err)
					return
				}
				// Counted after the claim answered and until just before the
				// ack is sent, each job is counted only while the store holds
				// it active: the counts never exceed the store's.
				mu.Lock()
				for _, j := range js {
					active[j.Group]++
					total++
					if active[j.Group] > groupMax || total > maxActive {
						b.t.Errorf("%d active in group %s, %d in the queue: caps %d and %d", active[j.Group], j.Group, total, groupMax, maxActive)
					}
				}
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				for _, j := range js {
					active[j.Group]--
					total--
				}
				mu.Unlock()
				if len(js) > 0 {
					items := make([]job.CompleteItem, len(js))
					for i, j := range js {
						items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
					}
					if _, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: items, Now: t0}); err != nil {
						b.t.Errorf("complete: %v", err)
						return
					}
					done.Add(int64(len(js)))
				}
			}
		}()
	}
	wg.Wait()
	if n := b.counts("q")[job.StateCompleted]; n != int64(len(ps)) {
		b.t.Fatalf("%d of %d jobs completed", n, len(ps))
	}
}

// A restart keeps the limits and counts the jobs still active against
// them.
func testFlowRestart(b *bundle) {
	if b.h.Reopen == nil {
		return
	}
	b.add(grouped("q", "g", 5)...)
	b.limit("q", job.Limits{MaxActive: 2, GroupMaxActive: 2})
	if n := len(b.claimAt(t0, 5, "q")); n != 2 {
		b.t.Fatalf("claim: %d jobs", n)
	}
	b.reopen()
	if q := b.queue("q"); q.Limits.MaxActive != 2 {
		b.t.Fatalf("limits after a restart: %+v", q.Limits)
	}
	if n := len(b.claimAt(at(time.Second), 5, "q")); n != 0 {
		b.t.Fatalf("after a restart with 2 jobs still leased: %d more handed out under a cap of 2", n)
	}
	// A rate's window goes on over a restart: the starts before it count.
	b.add(newJobs("r", 4)...)
	b.limit("r", job.Limits{Rate: job.Rate{Limit: 2, Period: time.Minute}})
	b.add(grouped("s", "a", 4)...)
	b.add(grouped("s", "b", 4)...)
	b.limit("s", job.Limits{GroupRate: job.Rate{Limit: 1, Period: time.Minute}})
	if n, m := len(b.claimAt(t0, 5, "r")), len(b.claimAt(t0, 5, "s")); n != 2 || m != 2 {
		b.t.Fatalf("claims under a rate of 2/min and a group rate of 1/min: %d and %d jobs, want 2 and 2", n, m)
	}
	b.reopen()
	if n, m := len(b.claimAt(at(time.Second), 5, "r")), len(b.claimAt(at(time.Second), 5, "s")); n != 0 || m != 0 {
		b.t.Fatalf("after a restart, a second into the minute: %d and %d more started", n, m)
	}
	if n, m := len(b.claimAt(at(time.Minute+time.Second), 5, "r")), len(b.claimAt(at(time.Minute+time.Second), 5, "s")); n != 2 || m != 2 {
		b.t.Fatalf("a minute on: %d and %d started, want 2 and 2", n, m)
	}
}
