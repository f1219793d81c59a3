package storetest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func orderedRunTests() []group {
	return []group{{"OrderedRuns", []test{
		{"ARunTakesAFreeGroupsJobsInOrder", testRunTakesInOrder},
		{"MaxIsSharedAcrossGroups", testRunSharesMax},
		{"MaxGroupsBoundsTheGroups", testRunMaxGroups},
		{"AFailedJobSendsTheRestOfItsRunBack", testRunFailReturnsTail},
		{"AReleasedJobSendsTheRestOfItsRunBack", testRunReleaseReturnsTail},
		{"AnExpiredRunGoesBackWithOneAttemptCounted", testRunExpiryReturnsTail},
		{"ADeadJobSendsTheRestOfItsRunBack", testRunDeathReturnsTail},
		{"ACompletedJobLetsTheRestOfItsRunGoOn", testRunCompletionLetsRestGo},
		{"ABatchAppliesItsItemsInOrder", testRunBatchInOrder},
		{"ARunEndsBeforeAJobEnqueuedEarlier", testRunEndsAtEnqueueOrder},
		{"AHolderGoesOutFirstWithTheJobsAfterIt", testRunHolderFirst},
		{"TwoHoldersGoOutOneAtATime", testRunTwoHolders},
		{"ConsumerGroupsKeepTheirOwnRuns", testRunLanes},
		{"GroupsFinishInOrderUnderFailingRunWorkers", testRunConcurrent},
	}}}
}

// claimRuns claims up to max jobs of queue at now with runs, from at most
// maxGroups groups (0: any number).
func (b *bundle) claimRuns(now time.Time, max, maxGroups int, queue string) []*job.Job {
	b.t.Helper()
	res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{queue}, Max: max, Runs: true, MaxGroups: maxGroups, Now: now})
	if err != nil || res == nil {
		b.t.Fatalf("claim %d runs of %s: %+v, %v", max, queue, res, err)
	}
	return res.Jobs
}

// wantRun fails unless js are the jobs ids, in that order, each on the
// attempt wanted: the first on attempt, the others on the attempts given
// after it, else on attempt too.
func (b *bundle) wantRun(what string, js []*job.Job, ids []string, attempt int, rest ...int) {
	b.t.Helper()
	if !slices.Equal(idsOf(js), ids) {
		b.t.Fatalf("%s: %v, want %v", what, idsOf(js), ids)
	}
	for i, j := range js {
		want := attempt
		if i > 0 && len(rest) > 0 {
			want = rest[0]
		}
		if j.Attempt != want {
			b.t.Fatalf("%s: job %s on attempt %d, want %d", what, j.ID, j.Attempt, want)
		}
	}
}

// wantLost fails unless out's item i lost its lease.
func (b *bundle) wantLost(what string, out []job.Outcome, i int) {
	b.t.Helper()
	if !errors.Is(out[i].Err, job.ErrLeaseLost) {
		b.t.Fatalf("%s item %d: %+v, want the lease lost", what, i, out[i])
	}
}

// wantWaiting fails unless job id is in state with attempt made.
func (b *bundle) wantWaiting(id string, state job.State, attempt int) {
	b.t.Helper()
	if j := b.get(id); j.State != state || j.Attempt != attempt {
		b.t.Fatalf("job %s: %s on attempt %d, want %s on attempt %d", id, j.State, j.Attempt, state, attempt)
	}
}

// A free group gives a claim of runs its jobs in enqueue order, nothing
// more while they are out, and the next run once they finished; a claim
// without runs still gets one job a group.
func testRunTakesInOrder(b *bundle) {
	parts := b.orderedQueue("q", 1, 5)
	run := b.claimRuns(t0, 10, 0, "q")
	b.wantRun("claim of runs", run, parts["p0"], 1)
	if more := b.claimRuns(t0, 10, 0, "q"); len(more) != 0 {
		b.t.Fatalf("claim while the run is out: %v, want none", idsOf(more))
	}
	b.completeAll(t0, run)
	plain := b.orderedQueue("r", 1, 3)
	b.wantRun("claim without runs", b.claimAt(t0, 10, "r"), plain["p0"][:1], 1)
}

// A claim's max is shared round-robin across the free groups.
func testRunSharesMax(b *bundle) {
	parts := b.orderedQueue("q", 4, 10)
	js := b.claimRuns(t0, 8, 0, "q")
	if len(js) != 8 {
		b.t.Fatalf("claim of 8 from 4 groups of 10: %v", idsOf(js))
	}
	for p := range 4 {
		g := fmt.Sprintf("p%d", p)
		var got []string
		for _, j := range js {
			if j.Group == g {
				got = append(got, j.ID)
			}
		}
		if !slices.Equal(got, parts[g][:2]) {
			b.t.Fatalf("group %s gave %v, want its first two %v", g, got, parts[g][:2])
		}
	}
}

// MaxGroups bounds how many groups a claim takes jobs of.
func testRunMaxGroups(b *bundle) {
	parts := b.orderedQueue("q", 3, 4)
	js := b.claimRuns(t0, 100, 1, "q")
	if len(js) != 4 || !slices.Equal(idsOf(js), parts[js[0].Group]) {
		b.t.Fatalf("claim of one group's run: %v", idsOf(js))
	}
	if next := b.claimRuns(t0, 100, 1, "q"); len(next) != 4 || next[0].Group == js[0].Group {
		b.t.Fatalf("second claim of one group's run: %v, want another group's four", idsOf(next))
	}
}

// A job of a run that fails into a retry sends the group's later active
// jobs back unrun; their acks lose their leases; the jobs before it go
// on. Once its backoff is over the failed job goes out first again, the
// rest of the run with it.
func testRunFailReturnsTail(b *bundle) {
	ids := b.orderedQueue("q", 1, 5)["p0"]
	run := b.claimRuns(t0, 10, 0, "q")
	b.wantRun("claim of runs", run, ids, 1)
	b.completeAll(t0, run[:1])
	c := run[2]
	b.accepted("fail", b.fail(t0, job.FailItem{ID: c.ID, Token: c.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	for _, id := range ids[3:] {
		b.wantWaiting(id, job.StateAvailable, 0)
	}
	b.wantLost("ack of a returned job", b.complete(t0, job.CompleteItem{ID: run[3].ID, Token: run[3].LeaseToken}), 0)
	if js := b.claimRuns(t0, 10, 0, "q"); len(js) != 0 {
		b.t.Fatalf("claim while the run's job is out and another retries: %v, want none", idsOf(js))
	}
	b.completeAll(t0, run[1:2])
	if js := b.claimRuns(at(500*time.Millisecond), 10, 0, "q"); len(js) != 0 {
		b.t.Fatalf("claim during the backoff: %v, want none", idsOf(js))
	}
	b.promote(at(2 * time.Second))
	again := b.claimRuns(at(2*time.Second), 10, 0, "q")
	b.wantRun("claim after the backoff", again, ids[2:], 2, 1)
}

// A released job of a run sends the rest back; itself counts as never
// handed out, so the whole rest goes out again as one run.
func testRunReleaseReturnsTail(b *bundle) {
	ids := b.orderedQueue("q", 1, 4)["p0"]
	run := b.claimRuns(t0, 10, 0, "q")
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: run[1].ID, Token: run[1].LeaseToken}), job.StateAvailable)
	for _, id := range ids[1:] {
		b.wantWaiting(id, job.StateAvailable, 0)
	}
	if js := b.claimRuns(t0, 10, 0, "q"); len(js) != 0 {
		b.t.Fatalf("claim while the run's first job is out: %v, want none", idsOf(js))
	}
	b.completeAll(t0, run[:1])
	b.wantRun("claim after the first job completed", b.claimRuns(t0, 10, 0, "q"), ids[1:], 1)
}

// When a run's lease runs out, its first job counts the attempt and holds
// the group; the rest go back unrun.
func testRunExpiryReturnsTail(b *bundle) {
	ids := b.orderedQueue("q", 1, 3, withLease(time.Second))["p0"]
	b.claimRuns(t0, 10, 0, "q")
	if _, err := b.s.JobRescueExpired(b.ctx, at(2*time.Second), 100); err != nil {
		b.t.Fatalf("rescue expired leases: %v", err)
	}
	b.promote(at(2 * time.Second))
	b.wantWaiting(ids[0], job.StateAvailable, 1)
	for _, id := range ids[1:] {
		b.wantWaiting(id, job.StateAvailable, 0)
	}
	b.wantRun("claim after the lease ran out", b.claimRuns(at(3*time.Second), 10, 0, "q"), ids, 2, 1)
}

// A job of a run that fails and dies sends the rest of its run back too,
// as a worker that stops its run at a failure leaves it; the rest goes
// out again as a run.
func testRunDeathReturnsTail(b *bundle) {
	ids := b.orderedQueue("q", 1, 3, withMaxAttempts(1))["p0"]
	run := b.claimRuns(t0, 10, 0, "q")
	b.accepted("fail", b.fail(t0, job.FailItem{ID: run[0].ID, Token: run[0].LeaseToken, Message: "no"}), job.StateDead)
	b.wantLost("ack of a job the death sent back", b.complete(t0, job.CompleteItem{ID: run[1].ID, Token: run[1].LeaseToken}), 0)
	b.wantRun("claim after the death", b.claimRuns(t0, 10, 0, "q"), ids[1:], 1)
}

// Jobs of a run that complete let the rest go on.
func testRunCompletionLetsRestGo(b *bundle) {
	b.orderedQueue("q", 1, 3)
	run := b.claimRuns(t0, 10, 0, "q")
	b.completeAll(t0, run)
}

// A batch ends its items in order: once an item sent the rest of its run
// back, a later item of that rest loses its lease.
func testRunBatchInOrder(b *bundle) {
	ids := b.orderedQueue("q", 1, 3)["p0"]
	run := b.claimRuns(t0, 10, 0, "q")
	out := b.fail(t0, job.FailItem{ID: run[0].ID, Token: run[0].LeaseToken, Message: "a", RetryAfter: time.Second},
		job.FailItem{ID: run[1].ID, Token: run[1].LeaseToken, Message: "b", RetryAfter: time.Second})
	if out[0].Err != nil || out[0].State != job.StateRetrying {
		b.t.Fatalf("fail of the run's first job: %+v", out[0])
	}
	b.wantLost("fail of a job the first sent back", out, 1)
	b.wantWaiting(ids[1], job.StateAvailable, 0)
	b.wantWaiting(ids[2], job.StateAvailable, 0)
}

// A run takes jobs in claim order only while each was enqueued after the
// one before it: a job of higher priority enqueued later runs alone.
func testRunEndsAtEnqueueOrder(b *bundle) {
	b.limit("q", job.Limits{Ordered: true}.Normalized())
	low := b.add(newJobs("q", 2, inGroup("g"))...)
	urgent := b.add(newJob("q", inGroup("g"), withPriority(5)))[0]
	first := b.claimRuns(t0, 10, 0, "q")
	b.wantRun("claim with a later job of higher priority", first, []string{urgent}, 1)
	b.completeAll(t0, first)
	b.wantRun("claim of the rest", b.claimRuns(t0, 10, 0, "q"), low, 1)
}

// A group whose handed-out job is available again gives that job first
// to a claim of runs, and the jobs after it with it; to a claim without
// runs, that job alone.
func testRunHolderFirst(b *bundle) {
	ids := b.orderedQueue("q", 1, 3)["p0"]
	a := b.claimID(t0, "q", ids[0])
	b.accepted("fail", b.fail(t0, job.FailItem{ID: a.ID, Token: a.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	b.promote(at(2 * time.Second))
	b.wantRun("claim of the held group", b.claimRuns(at(2*time.Second), 10, 0, "q"), ids, 2, 1)
}

// When two jobs of a run hold their group (each failed, the later one
// first), they go out one at a time in enqueue order, each alone while
// the other holds the group, then the rest as a run.
func testRunTwoHolders(b *bundle) {
	ids := b.orderedQueue("q", 1, 4)["p0"]
	run := b.claimRuns(t0, 10, 0, "q")
	for _, j := range []*job.Job{run[1], run[0]} {
		b.accepted("fail", b.fail(t0, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "boom", RetryAfter: time.Second}), job.StateRetrying)
	}
	b.promote(at(2 * time.Second))
	first := b.claimRuns(at(2*time.Second), 10, 0, "q")
	b.wantRun("claim with two holders", first, ids[:1], 2)
	b.completeAll(at(2*time.Second), first)
	b.wantRun("claim after the first holder completed", b.claimRuns(at(2*time.Second), 10, 0, "q"), ids[1:], 2, 1)
}

// Each consumer group takes its own runs, and a failure in one sends
// back the rest of that group's run alone.
func testRunLanes(b *bundle) {
	b.createGroup("q", "billing", job.StartBeginning, time.Time{})
	b.createGroup("q", "audit", job.StartBeginning, time.Time{})
	ids := b.orderedQueue("q", 1, 3)["p0"]
	lane := func(cg string) string { return job.LaneName("q", cg) }
	copies := func(cg string) []string {
		out := make([]string, len(ids))
		for i, id := range ids {
			out[i] = id + job.LaneSep + cg
		}
		return out
	}
	billing := b.claimRuns(t0, 10, 0, lane("billing"))
	b.wantRun("billing's run", billing, copies("billing"), 1)
	audit := b.claimRuns(t0, 10, 0, lane("audit"))
	b.wantRun("audit's run", audit, copies("audit"), 1)
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: billing[0].ID, Token: billing[0].LeaseToken}), job.StateAvailable)
	b.completeAll(t0, audit)
	b.wantRun("billing's run again", b.claimRuns(t0, 10, 0, lane("billing")), copies("billing"), 1)
}

// With 200 groups and workers that claim runs, work each run in order and
// fail or release a job now and then (dropping the rest of its run),
// every group's jobs complete in enqueue order, and never two runs of a
// group are out at once.
func testRunConcurrent(b *bundle) {
	const groups, perGroup, workers = 200, 6, 4
	parts := b.orderedQueue("q", groups, perGroup, withMaxAttempts(100), withLease(time.Hour))
	OrderedRunWorkers(b.t, []store.Store{b.s}, "q", parts, workers, t0)
}
