package storetest

import (
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func orderedTests() []group {
	return []group{{"OrderedGroups", []test{
		{"OneGroupJobAtATimeInOrder", testOrderedOneAtATime},
		{"AFailedJobHoldsItsGroupThroughItsBackoff", testOrderedFailHolds},
		{"AnExpiredLeaseKeepsTheGroup", testOrderedExpiryHolds},
		{"AReleasedJobGoesOutFirstAgain", testOrderedReleaseHolds},
		{"ADeadOrCancelledJobLetsTheNextGo", testOrderedFinalFrees},
		{"AHeldGroupSurvivesARestart", testOrderedRestart},
		{"AJobRetriedByHandStartsOver", testOrderedManualRetry},
		{"GroupsFinishInOrderUnderFailingWorkers", testOrderedConcurrent},
		{"AJobReleasedOnItsFirstAttemptHoldsNothing", testOrderedFirstRelease},
		{"AGroupStaysHeldWhenTheLimitsChangeWhileItsJobRuns", testOrderedHoldOverLimits},
	}}}
}

// orderedQueue makes queue ordered and inserts, for each group, n
// jobs (payload n: 0, 1, …), the groups' jobs interleaved; it returns
// the ids of each group in enqueue order.
func (b *bundle) orderedQueue(queue string, groups, n int, opts ...func(*store.JobInsertParams)) map[string][]string {
	b.t.Helper()
	b.limit(queue, job.Limits{Ordered: true}.Normalized())
	var ps []store.JobInsertParams
	for i := range n {
		for p := range groups {
			jp := newJob(queue, opts...)
			jp.Group = fmt.Sprintf("p%d", p)
			jp.Payload = []byte(fmt.Sprintf(`{"n":%d}`, i))
			ps = append(ps, jp)
		}
	}
	ids := b.add(ps...)
	out := make(map[string][]string, groups)
	for i, jp := range ps {
		out[jp.Group] = append(out[jp.Group], ids[i])
	}
	return out
}

// firstOf lists the ids of the i-th job of groups p0…p(n-1).
func firstOf(parts map[string][]string, i, n int) []string {
	out := make([]string, n)
	for p := range n {
		out[p] = parts[fmt.Sprintf("p%d", p)][i]
	}
	return out
}

// sortedIDs is the ids of js, sorted.
func sortedIDs(js []*job.Job) []string {
	ids := idsOf(js)
	slices.Sort(ids)
	return ids
}

// Each group hands out its first job, then nothing until that job is
// finished, then its second.
func testOrderedOneAtATime(b *bundle) {
	parts := b.orderedQueue("q", 3, 3)
	js := b.claimAt(t0, 10, "q")
	if got, want := sortedIDs(js), sorted(firstOf(parts, 0, 3)...); !slices.Equal(got, want) {
		b.t.Fatalf("first claim: %v, want the first job of each group %v", got, want)
	}
	if more := b.claimAt(t0, 10, "q"); len(more) != 0 {
		b.t.Fatalf("claim while every group is held: %v, want none", idsOf(more))
	}
	b.completeAll(t0, js)
	if got, want := sortedIDs(b.claimAt(t0, 10, "q")), sorted(firstOf(parts, 1, 3)...); !slices.Equal(got, want) {
		b.t.Fatalf("claim after the first jobs finished: %v, want the second of each %v", got, want)
	}
}

// A job that failed holds its group while it waits out its backoff,
// and goes out again before the jobs after it.
func testOrderedFailHolds(b *bundle) {
	parts := b.orderedQueue("q", 2, 2)
	first := b.claimAt(t0, 10, "q")
	var a *job.Job
	for _, j := range first {
		if j.ID == parts["p0"][0] {
			a = j
		}
	}
	if a == nil {
		b.t.Fatalf("first claim %v lacks %s", idsOf(first), parts["p0"][0])
	}
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a.ID, Token: a.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	for _, j := range first {
		if j.ID != a.ID {
			b.completeAll(t0, []*job.Job{j})
		}
	}
	// p1 moves on; p0 waits for its failed job.
	got := b.claimAt(at(500*time.Millisecond), 10, "q")
	if !slices.Equal(idsOf(got), []string{parts["p1"][1]}) {
		b.t.Fatalf("claim during the backoff: %v, want only %s of the other group", idsOf(got), parts["p1"][1])
	}
	b.promote(at(2 * time.Second))
	again := b.claimAt(at(2*time.Second), 10, "q")
	if len(again) != 1 || again[0].ID != a.ID || again[0].Attempt != 2 {
		b.t.Fatalf("claim after the backoff: %v, want the failed job %s again (attempt 2)", idsOf(again), a.ID)
	}
	b.completeAll(at(2*time.Second), again)
	if got := b.claimAt(at(2*time.Second), 10, "q"); len(got) != 1 || got[0].ID != parts["p0"][1] {
		b.t.Fatalf("claim after the failed job completed: %v, want %s", idsOf(got), parts["p0"][1])
	}
}

// promote makes the jobs due at now available, which must succeed.
func (b *bundle) promote(now time.Time) {
	b.t.Helper()
	if _, err := b.s.JobPromoteDue(b.ctx, now, 1000); err != nil {
		b.t.Fatalf("promote due jobs: %v", err)
	}
}

// A job whose lease ran out holds its group and goes out again first.
func testOrderedExpiryHolds(b *bundle) {
	parts := b.orderedQueue("q", 1, 2, withLease(time.Second))
	a := b.claimID(t0, "q", parts["p0"][0])
	if _, err := b.s.JobRescueExpired(b.ctx, at(2*time.Second), 100); err != nil {
		b.t.Fatalf("rescue expired leases: %v", err)
	}
	b.promote(at(2 * time.Second))
	again := b.claimAt(at(3*time.Second), 10, "q")
	if len(again) != 1 || again[0].ID != a.ID {
		b.t.Fatalf("claim after the lease ran out: %v, want %s again", idsOf(again), a.ID)
	}
}

// A released job goes out again before the jobs after it.
func testOrderedReleaseHolds(b *bundle) {
	parts := b.orderedQueue("q", 1, 3)
	a := b.claimID(t0, "q", parts["p0"][0])
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: a.ID, Token: a.LeaseToken}), job.StateAvailable)
	again := b.claimID(t0, "q", a.ID)
	b.completeAll(t0, []*job.Job{again})
	b.claimID(t0, "q", parts["p0"][1])
}

// A job that dies or is cancelled lets the next job of its group go.
func testOrderedFinalFrees(b *bundle) {
	parts := b.orderedQueue("q", 2, 2, withMaxAttempts(1))
	first := b.claimAt(t0, 10, "q")
	if len(first) != 2 {
		b.t.Fatalf("first claim: %v, want one job of each group", idsOf(first))
	}
	for _, j := range first {
		if j.Group == "p0" {
			b.accepted("fail", b.fail(t0, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "no"}), job.StateDead)
		}
	}
	b.claimID(t0, "q", parts["p0"][1])
	// p1's first job fails into a retry, then is cancelled while it waits.
	parts2 := b.orderedQueue("r", 1, 2)
	c := b.claimID(t0, "r", parts2["p0"][0])
	b.accepted("fail", b.fail(t0, job.FailItem{ID: c.ID, Token: c.LeaseToken, Message: "boom", RetryAfter: time.Hour}), job.StateRetrying)
	if got := b.claimAt(t0, 10, "r"); len(got) != 0 {
		b.t.Fatalf("claim while the group's job retries: %v, want none", idsOf(got))
	}
	if j := b.cancel(c.ID, t0); j.State != job.StateCancelled {
		b.t.Fatalf("cancel a retrying job: state %s", j.State)
	}
	b.claimID(t0, "r", parts2["p0"][1])
}

// A group held by a failed job stays held across a restart.
func testOrderedRestart(b *bundle) {
	if b.h.Reopen == nil {
		return
	}
	parts := b.orderedQueue("q", 1, 2)
	a := b.claimID(t0, "q", parts["p0"][0])
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a.ID, Token: a.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	b.reopen()
	if got := b.claimAt(t0, 10, "q"); len(got) != 0 {
		b.t.Fatalf("claim after a restart while the group's job retries: %v, want none", idsOf(got))
	}
	b.promote(at(2 * time.Second))
	b.claimID(at(2*time.Second), "q", a.ID)
}

// With 1,000 groups and concurrent workers that fail a tenth of their
// jobs at random and release another tenth, every group's jobs
// complete in enqueue order and never two of a group at once.
func testOrderedConcurrent(b *bundle) {
	const groups, perGroup, workers = 1000, 3, 4
	parts := b.orderedQueue("q", groups, perGroup, withMaxAttempts(100), withLease(time.Hour))
	OrderedWorkers(b.t, []store.Store{b.s}, "q", parts, workers, t0)
}

// A job retried by hand starts its attempts over: it no longer holds its
// group, and takes its place by its new run time.
func testOrderedManualRetry(b *bundle) {
	parts := b.orderedQueue("q", 1, 2)
	a := b.claimID(t0, "q", parts["p0"][0])
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a.ID, Token: a.LeaseToken, Message: "boom", RetryAfter: time.Hour}), job.StateRetrying)
	if _, err := b.s.JobRetry(b.ctx, a.ID, at(time.Second)); err != nil {
		b.t.Fatalf("retry by hand: %v", err)
	}
	b.claimID(at(2*time.Second), "q", parts["p0"][1])
}

// A job handed back unrun on its first attempt counts as never handed out
// (job.HoldsGroup): it holds its group no more, and a job of higher
// priority enqueued after it goes out first.
func testOrderedFirstRelease(b *bundle) {
	parts := b.orderedQueue("q", 1, 1)
	a := b.claimID(t0, "q", parts["p0"][0])
	urgent := b.add(newJob("q", inGroup("p0"), withPriority(5)))[0]
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: a.ID, Token: a.LeaseToken}), job.StateAvailable)
	if js := b.claimAt(t0, 5, "q"); !slices.Equal(idsOf(js), []string{urgent}) {
		b.t.Fatalf("claim after a first attempt was released: %v, want the job of priority 5 %s", idsOf(js), urgent)
	}
}

// A group whose job is out on its first attempt stays held when the
// queue's limits change meanwhile: after the job fails into a retry, the
// group hands out nothing, then that job first.
func testOrderedHoldOverLimits(b *bundle) {
	parts := b.orderedQueue("q", 2, 2)
	a := b.claimID(t0, "q", parts["p0"][0])
	b.limit("q", job.Limits{Ordered: true, MaxActive: 5}.Normalized())
	if js := b.claimAt(t0, 5, "q"); !slices.Equal(idsOf(js), parts["p1"][:1]) {
		b.t.Fatalf("claim after the limits changed: %v, want p1's first job %s", idsOf(js), parts["p1"][0])
	}
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a.ID, Token: a.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	if js := b.claimAt(t0, 5, "q"); len(js) != 0 {
		b.t.Fatalf("claim while the groups' jobs are out or wait out a retry: %v, want none", idsOf(js))
	}
	b.promote(at(2 * time.Second))
	if js := b.claimAt(at(2*time.Second), 5, "q"); !slices.Equal(idsOf(js), []string{a.ID}) {
		b.t.Fatalf("claim once the retry is due: %v, want %s again", idsOf(js), a.ID)
	}
}
