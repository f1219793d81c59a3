package storetest

import (
	"maps"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// observeTests cover what a store reports for metrics: the attempt an
// outcome ended, the oldest available job of each queue, and the queues
// of the jobs a rescue took back.
func observeTests() []group {
	return []group{
		{"Outcome", []test{
			{"AckFailAndReleaseTellTheAttemptTheyEnded", testOutcomeAttempt},
			{"ATransactionTellsTheAttemptsItEnded", testOutcomeAttemptTransact},
		}},
		{"OldestAvailable", []test{
			{"IsTheEarliestRunTimeOfJobsNotHandedOut", testOldestAvailable},
			{"CoversEveryPriority", testOldestAvailablePriorities},
			{"CoversEveryGroup", testOldestAvailableGroups},
		}},
		{"JobRescueExpired", []test{
			{"CountsTheRescuedJobsByQueue", testRescuedByQueue},
		}},
	}
}

// wantAttempt fails the test unless o tells the attempt of j (kind,
// attempt number and start) ending with its job in state.
func (b *bundle) wantAttempt(what string, o job.Outcome, j *job.Job, state job.State) {
	b.t.Helper()
	if o.Err != nil || o.State != state || o.Queue != j.Queue || o.Kind != j.Kind || o.Attempt != j.Attempt || !o.StartedAt.Equal(j.StartedAt) {
		b.t.Fatalf("%s: outcome %+v, want %s in %s with kind %s, attempt %d started at %v",
			what, o, state, j.Queue, j.Kind, j.Attempt, j.StartedAt)
	}
}

// An accepted ack, fail or release tells the kind of its job, and the
// number and start of the attempt it ended (a release's too, though the
// attempt then does not count); a refused item and an extend tell none.
func testOutcomeAttempt(b *bundle) {
	kind := func(k string) func(*store.JobInsertParams) { return func(p *store.JobInsertParams) { p.Kind = k } }
	ids := b.add(newJob("q", kind("send"), withMaxAttempts(5)), newJob("q", kind("bill")), newJob("q", kind("wrap")), newJob("q", kind("dead"), withMaxAttempts(1)))
	js := b.claimAt(at(2*time.Second), 4, "q")
	byID := map[string]*job.Job{}
	for _, j := range js {
		byID[j.ID] = j
	}
	if len(byID) != 4 {
		b.t.Fatalf("claimed %v, want %v", idsOf(js), ids)
	}
	ack := b.complete(at(7*time.Second), job.CompleteItem{ID: ids[0], Token: byID[ids[0]].LeaseToken},
		job.CompleteItem{ID: ids[1], Token: byID[ids[1]].LeaseToken + 1})
	b.wantAttempt("ack", ack[0], byID[ids[0]], job.StateCompleted)
	if o := ack[1]; o.Err == nil || o.Kind != "" || o.Attempt != 0 || !o.StartedAt.IsZero() {
		b.t.Fatalf("refused ack: outcome %+v, want an error and no attempt", o)
	}
	b.wantAttempt("fail", b.fail(at(8*time.Second), job.FailItem{ID: ids[1], Token: byID[ids[1]].LeaseToken, Message: "x"})[0],
		byID[ids[1]], job.StateRetrying)
	b.wantAttempt("fail of the last attempt", b.fail(at(8*time.Second), job.FailItem{ID: ids[3], Token: byID[ids[3]].LeaseToken})[0],
		byID[ids[3]], job.StateDead)
	if o := b.extend(at(8*time.Second), job.ExtendItem{ID: ids[2], Token: byID[ids[2]].LeaseToken})[0]; o.Err != nil || o.Attempt != 0 || !o.StartedAt.IsZero() {
		b.t.Fatalf("extend: outcome %+v, want accepted without an attempt", o)
	}
	b.wantAttempt("release", b.release(at(9*time.Second), job.ReleaseItem{ID: ids[2], Token: byID[ids[2]].LeaseToken})[0],
		byID[ids[2]], job.StateAvailable)

	// A later attempt tells its own number and start.
	if _, err := b.s.JobPromoteDue(b.ctx, at(time.Hour), 10); err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	var again *job.Job
	for _, j := range b.claimAt(at(time.Hour), 2, "q") {
		if j.ID == ids[1] {
			again = j
		}
	}
	if again == nil || again.Attempt != 2 {
		b.t.Fatalf("second claim of %s: %+v, want attempt 2", ids[1], again)
	}
	b.wantAttempt("ack of the second attempt", b.complete(at(time.Hour+time.Second), job.CompleteItem{ID: ids[1], Token: again.LeaseToken})[0],
		again, job.StateCompleted)
}

// The acks and fails of a transaction tell the attempts they ended, as
// their calls do.
func testOutcomeAttemptTransact(b *bundle) {
	ids := b.add(newJob("q"), newJob("r"))
	js := b.claimAt(at(3*time.Second), 2, "q", "r")
	if len(js) != 2 {
		b.t.Fatalf("claimed %v, want %v", idsOf(js), ids)
	}
	byID := map[string]*job.Job{js[0].ID: js[0], js[1].ID: js[1]}
	res, err := b.s.JobTransact(b.ctx, &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: ids[0], Token: byID[ids[0]].LeaseToken}},
		Fail:     []job.FailItem{{ID: ids[1], Token: byID[ids[1]].LeaseToken, Message: "x"}},
		Insert:   []store.JobInsertParams{newJob("s")},
		Now:      at(5 * time.Second),
	})
	if err != nil {
		b.t.Fatalf("transact: %v", err)
	}
	b.wantAttempt("transaction's ack", res.Completed[0], byID[ids[0]], job.StateCompleted)
	b.wantAttempt("transaction's fail", res.Failed[0], byID[ids[1]], job.StateRetrying)
}

// oldest returns the OldestAvailable QueueList reports for each queue.
func (b *bundle) oldest() map[string]time.Time {
	b.t.Helper()
	qs, err := b.s.QueueList(b.ctx)
	if err != nil {
		b.t.Fatalf("list queues: %v", err)
	}
	out := make(map[string]time.Time, len(qs))
	for _, q := range qs {
		out[q.Name] = q.OldestAvailable
	}
	return out
}

// wantOldest fails the test unless QueueList reports want for each queue.
func (b *bundle) wantOldest(what string, want map[string]time.Time) {
	b.t.Helper()
	got := b.oldest()
	if !maps.EqualFunc(got, want, time.Time.Equal) {
		b.t.Fatalf("%s: oldest available %v, want %v", what, got, want)
	}
}

// The oldest available job of a queue is the earliest run time among
// its available jobs: handed-out, scheduled, retrying and finished jobs
// do not count, and a queue without available jobs reports none.
// QueueGet leaves it out.
func testOldestAvailable(b *bundle) {
	b.wantOldest("an empty store", map[string]time.Time{})
	ids := b.add(newJob("q", withRunAt(at(-time.Minute))), newJob("q", withRunAt(at(-30*time.Second))),
		newJob("q", withRunAt(at(-10*time.Second))), newJob("q", scheduledAt(at(time.Hour))))
	b.add(newJob("empty", scheduledAt(at(time.Hour))))
	b.wantOldest("four jobs", map[string]time.Time{"q": at(-time.Minute), "empty": {}})
	if q := b.queue("q"); !q.OldestAvailable.IsZero() {
		b.t.Fatalf("QueueGet: oldest available %v, want it left out", q.OldestAvailable)
	}

	first := b.claimID(t0, "q", ids[0])
	b.wantOldest("the oldest handed out", map[string]time.Time{"q": at(-30 * time.Second), "empty": {}})
	second := b.claimID(t0, "q", ids[1])
	b.accepted("fail", b.fail(at(time.Second), job.FailItem{ID: ids[1], Token: second.LeaseToken, Message: "x"}), job.StateRetrying)
	b.wantOldest("the second retrying", map[string]time.Time{"q": at(-10 * time.Second), "empty": {}})
	b.accepted("release", b.release(at(2*time.Second), job.ReleaseItem{ID: ids[0], Token: first.LeaseToken}), job.StateAvailable)
	b.wantOldest("the oldest released", map[string]time.Time{"q": at(-time.Minute), "empty": {}})
	b.cancel(ids[0], at(3*time.Second))
	third := b.claimID(at(3*time.Second), "q", ids[2])
	b.accepted("complete", b.complete(at(4*time.Second), job.CompleteItem{ID: ids[2], Token: third.LeaseToken}), job.StateCompleted)
	b.wantOldest("none available", map[string]time.Time{"q": {}, "empty": {}})
}

// A job of a lower priority that waits longer is the oldest: every
// priority counts, not just the one a claim takes next.
func testOldestAvailablePriorities(b *bundle) {
	b.add(newJob("q", withPriority(5), withRunAt(at(-time.Second))), newJob("q", withPriority(5), withRunAt(at(-2*time.Second))),
		newJob("q", withPriority(0), withRunAt(at(-time.Minute))), newJob("q", withPriority(-3), withRunAt(at(-time.Hour))),
		newJob("q", withPriority(-3), withRunAt(at(-time.Minute))))
	b.wantOldest("three priorities", map[string]time.Time{"q": at(-time.Hour)})
	js := b.claimAt(t0, 5, "q")
	if len(js) != 5 {
		b.t.Fatalf("claimed %d jobs, want 5", len(js))
	}
	b.wantOldest("all handed out", map[string]time.Time{"q": {}})
	for _, j := range js[2:] {
		b.accepted("release", b.release(at(time.Second), job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}), job.StateAvailable)
	}
	b.wantOldest("the lower priorities released", map[string]time.Time{"q": at(-time.Hour)})
}

// In a grouped queue every group counts, and so do its jobs without a
// group.
func testOldestAvailableGroups(b *bundle) {
	b.add(grouped("g", "a", 2, withRunAt(at(-time.Second)))...)
	b.add(grouped("g", "b", 1, withRunAt(at(-time.Minute)), withPriority(-1))...)
	b.add(grouped("g", "c", 1, withRunAt(at(-10*time.Second)))...)
	b.wantOldest("three groups", map[string]time.Time{"g": at(-time.Minute)})
	b.add(newJob("g", withRunAt(at(-time.Hour))))
	b.wantOldest("a job without a group", map[string]time.Time{"g": at(-time.Hour)})
	js := b.claimAt(t0, 10, "g")
	if len(js) != 5 {
		b.t.Fatalf("claimed %d jobs, want 5", len(js))
	}
	b.wantOldest("all handed out", map[string]time.Time{"g": {}})
	for _, j := range js {
		if j.Group == "c" {
			b.accepted("release", b.release(at(time.Second), job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}), job.StateAvailable)
		}
	}
	b.wantOldest("group c released", map[string]time.Time{"g": at(-10 * time.Second)})
}

// A rescue counts the jobs it took back by queue, whatever they became.
func testRescuedByQueue(b *bundle) {
	b.add(newJob("q", withLease(10*time.Second)), newJob("q", withLease(10*time.Second), withMaxAttempts(1)),
		newJob("r", withLease(10*time.Second)), newJob("r", withLease(time.Hour)))
	if js := b.claimAt(t0, 4, "q", "r"); len(js) != 4 {
		b.t.Fatalf("claimed %d jobs, want 4", len(js))
	}
	res, err := b.s.JobRescueExpired(b.ctx, at(time.Minute), 10)
	if err != nil {
		b.t.Fatalf("rescue: %v", err)
	}
	if want := map[string]int{"q": 2, "r": 1}; res.Count != 3 || !maps.Equal(res.Rescued, want) {
		b.t.Fatalf("rescue: %d jobs by queue %v, want 3 by queue %v", res.Count, res.Rescued, want)
	}
	res, err = b.s.JobRescueExpired(b.ctx, at(2*time.Minute), 10)
	if err != nil || res.Count != 0 || len(res.Rescued) != 0 {
		b.t.Fatalf("second rescue: %+v, %v; want nothing rescued", res, err)
	}
}
