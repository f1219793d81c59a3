package storetest

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func deadLetterTests() []group {
	return []group{{"DeadLetters", []test{
		{"SettingsAreStoredReplacedAndCleared", testSettingsKept},
		{"AJobThatRunsOutOfAttemptsLeavesACopy", testDeadLetterExhausted},
		{"AFailureWithoutRetryLeavesACopy", testDeadLetterNoRetry},
		{"ALeaseThatExpiresOnTheLastAttemptLeavesACopy", testDeadLetterLeaseExpiry},
		{"CancelCompleteAndDeleteLeaveNoCopy", testDeadLetterNotOnCancel},
		{"ACopyThatDiesIsCopiedNoMore", testDeadLetterCopyIsFinal},
		{"QueuesThatNameEachOtherMakeOneCopyOfADeath", testDeadLetterRing},
		{"NoDeadLetterQueueNoCopy", testDeadLetterNone},
		{"ACopyKeepsItsOriginOverARestart", testDeadLetterRestart},
	}}, {"MaxWait", []test{
		{"AClaimKillsTheJobsPastTheirWaitAndGoesOn", testMaxWaitClaim},
		{"AClaimKillsEveryJobPastItsWaitThatItMeets", testMaxWaitClaimKillsAll},
		{"AStartedJobNoLongerAges", testMaxWaitStarted},
		{"TheSweepKillsWhatNoClaimMeets", testMaxWaitSweep},
		{"TheSweepLeavesActiveJobsAlone", testMaxWaitSweepActive},
		{"ANewMaxWaitHoldsForTheJobsWaiting", testMaxWaitSetLater},
		{"ARetryByHandStartsTheWaitAgain", testMaxWaitRetry},
		{"AJobPastItsWaitTakesNoPlaceUnderLimits", testMaxWaitUnderLimits},
		{"TheWaitHoldsOverARestart", testMaxWaitRestart},
	}}}
}

// settle sets the settings of queue, which must succeed.
func (b *bundle) settle(queue string, s job.QueueSettings) {
	b.t.Helper()
	if err := b.s.QueueSetSettings(b.ctx, queue, s); err != nil {
		b.t.Fatalf("set settings of %s: %v", queue, err)
	}
}

// A queue's settings, every field of them, are kept with it, shown by
// QueueGet and QueueList, replaced as a whole, kept over a restart and
// cleared; setting them creates the queue.
func testSettingsKept(b *bundle) {
	s := job.QueueSettings{DeadLetterQueue: "fresh-dlq", MaxWait: 90 * time.Second,
		DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: 10 * time.Second}
	b.settle("fresh", s)
	if q := b.queue("fresh"); q.Settings != s {
		b.t.Fatalf("settings %+v, want %+v", q.Settings, s)
	}
	qs, err := b.s.QueueList(b.ctx)
	if err != nil || len(qs) != 1 || qs[0].Name != "fresh" || qs[0].Settings != s {
		b.t.Fatalf("queue list %+v, %v; want only fresh with its settings", qs, err)
	}
	only := job.QueueSettings{MaxWait: time.Millisecond}
	b.settle("fresh", only)
	if q := b.queue("fresh"); q.Settings != only {
		b.t.Fatalf("replaced settings %+v, want %+v", q.Settings, only)
	}
	defaults := job.QueueSettings{DeadLetterQueue: "fresh", DefaultLease: job.MaxLease,
		DefaultMaxAttempts: job.MaxAttempts, DefaultDelay: job.MaxDelay}
	b.settle("other", defaults)
	if b.h.Reopen != nil {
		b.reopen()
		if q := b.queue("fresh"); q.Settings != only {
			b.t.Fatalf("settings after a restart %+v, want %+v", q.Settings, only)
		}
		if q := b.queue("other"); q.Settings != defaults {
			b.t.Fatalf("settings of other after a restart %+v, want %+v", q.Settings, defaults)
		}
	}
	b.settle("fresh", job.QueueSettings{})
	if q := b.queue("fresh"); !q.Settings.IsZero() {
		b.t.Fatalf("cleared settings %+v", q.Settings)
	}
	b.settle("other", job.QueueSettings{})
	if q := b.queue("other"); !q.Settings.IsZero() {
		b.t.Fatalf("cleared defaults %+v", q.Settings)
	}
	if qs, err := b.s.QueueList(b.ctx); err != nil || len(qs) != 2 || !qs[0].Settings.IsZero() || !qs[1].Settings.IsZero() {
		b.t.Fatalf("queue list after clearing %+v, %v", qs, err)
	}
}

// letterJob returns the parameters of a job of queue with everything a
// dead-letter copy carries over set: payload, priority, group, tags, the
// store's first durability, a retry policy and a lease, and a unique key
// the copy leaves behind.
func (b *bundle) letterJob(queue string, maxAttempts int) store.JobInsertParams {
	p := newJob(queue, withMaxAttempts(maxAttempts), withPriority(7), withLease(45*time.Second), withUnique("once", 0),
		withBackoff(job.Backoff{Kind: job.BackoffExponential, Base: 2 * time.Second, Max: time.Minute, Jitter: 0.25}))
	p.Payload = json.RawMessage(`{"order":42}`)
	p.Tags = []string{"billing", "eu"}
	p.Group = "tenant-7"
	p.Durability = b.h.durabilities()[0]
	p.TraceParent = traceA
	return p
}

// failID claims job id of queue at now and fails it with message.
func (b *bundle) failID(now time.Time, queue, id, message string, noRetry bool) job.Outcome {
	b.t.Helper()
	j := b.claimID(now, queue, id)
	return b.fail(now, job.FailItem{ID: id, Token: j.LeaseToken, Message: message, NoRetry: noRetry})[0]
}

// wantLetter fails unless copyID names the dead-letter copy, in dlq, of
// the dead job origID as it is stored now, made at made: a new available
// job with no attempts and its own id that carries the dead job's work,
// settings and errors, and names it.
func (b *bundle) wantLetter(copyID, dlq, origID string, made time.Time) *job.Job {
	b.t.Helper()
	orig, c := b.get(origID), b.get(copyID)
	if orig.State != job.StateDead {
		b.t.Fatalf("the original %s is %s, want it dead where it was", origID, orig.State)
	}
	want := job.DeadLetter(orig, dlq, copyID, made)
	want.Durability = levelOf(want.Durability)
	if c.ID == orig.ID || c.Queue != dlq || c.State != job.StateAvailable || c.Attempt != 0 || !c.RunAt.Equal(made) ||
		!c.CreatedAt.Equal(made) || c.DeadLetterOf != (job.JobRef{Queue: orig.Queue, ID: orig.ID}) {
		b.t.Fatalf("copy %+v\nof %+v", c, orig)
	}
	if d := diffJob(c, want); d != "" {
		b.t.Fatalf("copy of %s: %s", origID, d)
	}
	if c.Group != orig.Group || levelOf(c.Durability) != levelOf(orig.Durability) || c.UniqueKey != "" ||
		c.TraceParent != orig.TraceParent || c.Worker != "" {
		b.t.Fatalf("copy group %q, durability %q, unique key %q, traceparent %q, worker %q; the original's group %q, durability %q, traceparent %q",
			c.Group, c.Durability, c.UniqueKey, c.TraceParent, c.Worker, orig.Group, orig.Durability, orig.TraceParent)
	}
	return c
}

// levelOf is a job's durability as the contract reads it: empty is full.
func levelOf(d job.Durability) job.Durability {
	if d == "" {
		return job.DurabilityFull
	}
	return d
}

// lettersIn lists the jobs of queue dlq.
func (b *bundle) lettersIn(dlq string) []*job.Job {
	b.t.Helper()
	return b.listAll(dlq, "", 100)
}

// A job that fails its last attempt stays dead in its queue, and the same
// call puts a copy with its history into the dead-letter queue, which a
// fetch then hands out.
func testDeadLetterExhausted(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	id := b.add(b.letterJob("orders", 2))[0]
	if o := b.failID(t0, "orders", id, "card declined", false); o.State != job.StateRetrying || !o.DeadLetter.IsZero() {
		b.t.Fatalf("first failure: %+v, want retrying without a copy", o)
	}
	if n := len(b.lettersIn("orders-dlq")); n != 0 {
		b.t.Fatalf("a retrying job left %d copies", n)
	}
	died := at(time.Minute)
	if _, err := b.s.JobPromoteDue(b.ctx, died, 10); err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	o := b.failID(died, "orders", id, "card declined again", false)
	if o.State != job.StateDead || o.DeadLetter.Queue != "orders-dlq" || o.DeadLetter.ID == "" {
		b.t.Fatalf("last failure: %+v, want dead with a copy in orders-dlq", o)
	}
	c := b.wantLetter(o.DeadLetter.ID, "orders-dlq", id, died)
	if len(c.Errors) != 2 || c.Errors[1].Message != "card declined again" {
		b.t.Fatalf("copy errors %+v", c.Errors)
	}
	if got := b.lettersIn("orders-dlq"); len(got) != 1 || got[0].ID != c.ID {
		b.t.Fatalf("dead-letter queue holds %v, want only %s", idsOf(got), c.ID)
	}
	b.wantCounts("orders", map[job.State]int64{job.StateDead: 1})
	b.wantCounts("orders-dlq", map[job.State]int64{job.StateAvailable: 1})
	got := b.claimID(died, "orders-dlq", c.ID)
	if got.Attempt != 1 || got.DeadLetterOf != c.DeadLetterOf || !bytes.Equal(got.Payload, c.Payload) {
		b.t.Fatalf("claimed copy %+v", got)
	}
}

// A failure the worker marks as final kills the job on its first attempt,
// and that death leaves a copy too.
func testDeadLetterNoRetry(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	id := b.add(b.letterJob("orders", 5))[0]
	o := b.failID(t0, "orders", id, "bad input", true)
	if o.State != job.StateDead || o.DeadLetter.Queue != "orders-dlq" {
		b.t.Fatalf("failure without retry: %+v", o)
	}
	c := b.wantLetter(o.DeadLetter.ID, "orders-dlq", id, t0)
	if len(c.Errors) != 1 || c.Errors[0].Attempt != 1 || c.Errors[0].Message != "bad input" {
		b.t.Fatalf("copy errors %+v", c.Errors)
	}
}

// A job whose lease runs out on its last attempt dies when it is rescued,
// and the rescue puts its copy in the dead-letter queue and names that
// queue among those with jobs made available.
func testDeadLetterLeaseExpiry(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	id := b.add(b.letterJob("orders", 1))[0]
	b.claimID(t0, "orders", id)
	expiry := at(45 * time.Second)
	res, err := b.s.JobRescueExpired(b.ctx, expiry, 10)
	if err != nil || res.Count != 1 || !slices.Contains(res.Available, "orders-dlq") {
		b.t.Fatalf("rescue: %+v, %v; want one job rescued and orders-dlq available", res, err)
	}
	letters := b.lettersIn("orders-dlq")
	if len(letters) != 1 {
		b.t.Fatalf("dead-letter queue holds %d jobs, want 1", len(letters))
	}
	c := b.wantLetter(letters[0].ID, "orders-dlq", id, expiry)
	if len(c.Errors) != 1 || c.Errors[0].Message != job.LeaseExpiredMessage {
		b.t.Fatalf("copy errors %+v", c.Errors)
	}
}

// Only a death leaves a copy: a job cancelled while it waits or while it
// runs, a completed job, and a dead job deleted leave none, and the dead
// job deleted takes nothing with it.
func testDeadLetterNotOnCancel(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	waiting := b.add(b.letterJob("orders", 1))[0]
	b.cancel(waiting, t0)
	running := b.add(newJob("orders", withPriority(topPriority), withMaxAttempts(1)))[0]
	j := b.claimID(t0, "orders", running)
	b.cancel(running, t0)
	b.accepted("fail", b.fail(t0, job.FailItem{ID: running, Token: j.LeaseToken, Message: "stopped", NoRetry: true}), job.StateCancelled)
	done := b.add(newJob("orders", withPriority(topPriority)))[0]
	j = b.claimID(t0, "orders", done)
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: done, Token: j.LeaseToken}), job.StateCompleted)
	if n := len(b.lettersIn("orders-dlq")); n != 0 {
		b.t.Fatalf("cancels and a completion left %d copies", n)
	}
	dead := b.add(newJob("orders", withPriority(topPriority), withMaxAttempts(1)))[0]
	o := b.failID(t0, "orders", dead, "x", false)
	if err := b.s.JobDelete(b.ctx, dead); err != nil {
		b.t.Fatalf("delete the dead job: %v", err)
	}
	if got := b.lettersIn("orders-dlq"); len(got) != 1 || got[0].ID != o.DeadLetter.ID {
		b.t.Fatalf("after deleting the dead job the dead-letter queue holds %v, want its copy %s", idsOf(got), o.DeadLetter.ID)
	}
}

// A copy is where a death ends: when it dies in its dead-letter queue, by
// a failure or a lease that runs out, it stays dead there and leaves no
// copy, though that queue has a dead-letter queue of its own, which still
// gets the copies of the jobs enqueued into the queue itself. A retry by
// hand of the dead copy keeps it a copy.
func testDeadLetterCopyIsFinal(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "retry-slow"})
	b.settle("retry-slow", job.QueueSettings{DeadLetterQueue: "graveyard"})
	id := b.add(b.letterJob("orders", 1))[0]
	first := b.failID(t0, "orders", id, "first death", false).DeadLetter
	if first.Queue != "retry-slow" {
		b.t.Fatalf("first copy %+v", first)
	}
	later := at(time.Minute)
	if o := b.failID(later, "retry-slow", first.ID, "second death", false); o.State != job.StateDead || !o.DeadLetter.IsZero() {
		b.t.Fatalf("death of a copy: %+v, want dead without a copy", o)
	}
	c := b.get(first.ID)
	if c.State != job.StateDead || c.DeadLetterOf != (job.JobRef{Queue: "orders", ID: id}) || len(c.Errors) != 2 ||
		c.Errors[0].Message != "first death" || c.Errors[1].Message != "second death" {
		b.t.Fatalf("dead copy %+v", c)
	}
	if _, err := b.s.JobRetry(b.ctx, first.ID, later); err != nil {
		b.t.Fatalf("retry the dead copy: %v", err)
	}
	b.claimID(later, "retry-slow", first.ID)
	expiry := later.Add(45 * time.Second)
	if res, err := b.s.JobRescueExpired(b.ctx, expiry, 10); err != nil || res.Count != 1 || slices.Contains(res.Available, "graveyard") {
		b.t.Fatalf("rescue of the copy: %+v, %v; want one job rescued and no copy", res, err)
	}
	if st := b.get(first.ID).State; st != job.StateDead {
		b.t.Fatalf("copy after its lease ran out on its last attempt: %s, want dead", st)
	}
	if got := b.lettersIn("graveyard"); len(got) != 0 {
		b.t.Fatalf("the deaths of a copy left %v in the next dead-letter queue", idsOf(got))
	}
	own := b.add(newJob("retry-slow", withMaxAttempts(1), withPriority(topPriority)))[0]
	if o := b.failID(later, "retry-slow", own, "own death", false); o.DeadLetter.Queue != "graveyard" {
		b.t.Fatalf("death of a job enqueued into the dead-letter queue: %+v, want a copy in graveyard", o)
	}
	b.wantCounts("retry-slow", map[job.State]int64{job.StateDead: 2})
	b.wantCounts("graveyard", map[job.State]int64{job.StateAvailable: 1})
}

// Queues that name each other as dead-letter queues, in a ring of two or
// of three, each with a maximum wait, and no worker: the job dies of its
// wait into one copy, the copy dies of its wait in its turn, and that is
// all, however often the sweep runs.
func testDeadLetterRing(b *bundle) {
	for _, ring := range [][]string{{"ping", "pong"}, {"r1", "r2", "r3"}} {
		for i, q := range ring {
			b.settle(q, job.QueueSettings{DeadLetterQueue: ring[(i+1)%len(ring)], MaxWait: time.Millisecond})
		}
		id := b.add(newJob(ring[0]))[0]
		now := t0
		for range 10 {
			now = now.Add(time.Second)
			b.sweep(now, 100)
		}
		var all []*job.Job
		for _, q := range ring {
			all = append(all, b.listAll(q, "", 100)...)
		}
		if len(all) != 2 {
			b.t.Fatalf("ring %v holds %d jobs after ten sweeps, want the job and one copy", ring, len(all))
		}
		if j := b.get(id); j.State != job.StateDead {
			b.t.Fatalf("ring %v: the job is %s, want dead", ring, j.State)
		}
		copies := b.lettersIn(ring[1])
		if len(copies) != 1 {
			b.t.Fatalf("ring %v: %s holds %d jobs, want the copy", ring, ring[1], len(copies))
		}
		c := copies[0]
		if c.State != job.StateDead || c.DeadLetterOf != (job.JobRef{Queue: ring[0], ID: id}) || len(c.Errors) != 2 ||
			c.Errors[1].Message != job.MaxWaitMessage {
			b.t.Fatalf("ring %v: copy %+v, want dead of its wait", ring, c)
		}
	}
}

// Without a dead-letter queue a death makes no copy; clearing the
// setting stops the copies.
func testDeadLetterNone(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	b.settle("orders", job.QueueSettings{MaxWait: time.Hour})
	id := b.add(newJob("orders", withMaxAttempts(1)))[0]
	if o := b.failID(t0, "orders", id, "x", false); o.State != job.StateDead || !o.DeadLetter.IsZero() {
		b.t.Fatalf("death without a dead-letter queue: %+v", o)
	}
	qs, err := b.s.QueueList(b.ctx)
	if err != nil {
		b.t.Fatalf("list queues: %v", err)
	}
	for _, q := range qs {
		if q.Name == "orders-dlq" && q.Counts[job.StateAvailable] != 0 {
			b.t.Fatalf("orders-dlq counts %v", q.Counts)
		}
	}
}

// A copy keeps its origin and history over a restart, and a retry by
// hand of the dead original lets it die once more, into another copy.
func testDeadLetterRestart(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq"})
	id := b.add(b.letterJob("orders", 1))[0]
	first := b.failID(t0, "orders", id, "x", false).DeadLetter
	if b.h.Reopen != nil {
		b.reopen()
	}
	b.wantLetter(first.ID, "orders-dlq", id, t0)
	later := at(time.Minute)
	if _, err := b.s.JobRetry(b.ctx, id, later); err != nil {
		b.t.Fatalf("retry the dead job: %v", err)
	}
	again := b.failID(later, "orders", id, "y", false).DeadLetter
	if again.ID == "" || again.ID == first.ID {
		b.t.Fatalf("second death: copy %+v, first copy %+v", again, first)
	}
	b.wantLetter(again.ID, "orders-dlq", id, later)
	b.wantCounts("orders-dlq", map[job.State]int64{job.StateAvailable: 2})
}

// wantExpired fails unless job id died of its wait at died, into a copy
// in dlq (none when dlq is empty), and returns the dead job.
func (b *bundle) wantExpired(id, dlq string, died time.Time) *job.Job {
	b.t.Helper()
	j := b.get(id)
	last := job.AttemptError{}
	if n := len(j.Errors); n > 0 {
		last = j.Errors[n-1]
	}
	if j.State != job.StateDead || !j.FinishedAt.Equal(died) || last.Message != job.MaxWaitMessage ||
		last.Attempt != j.Attempt+1 || !last.At.Equal(died) {
		b.t.Fatalf("job %s: %s at %v with errors %+v; want dead at %v of %q", id, j.State, j.FinishedAt, j.Errors, died, job.MaxWaitMessage)
	}
	if dlq == "" {
		return j
	}
	for _, c := range b.lettersIn(dlq) {
		if c.DeadLetterOf.ID == id {
			b.wantLetter(c.ID, dlq, id, died)
			return j
		}
	}
	b.t.Fatalf("no copy of %s in %s", id, dlq)
	return nil
}

// sweep runs JobExpireWaiting at now and returns its result.
func (b *bundle) sweep(now time.Time, limit int) *store.MaintenanceResult {
	b.t.Helper()
	res, err := b.s.JobExpireWaiting(b.ctx, now, limit)
	if err != nil {
		b.t.Fatalf("expire waiting jobs at %v: %v", now, err)
	}
	return res
}

// A claim never hands out a job past its wait: it kills it, with its copy
// in the dead-letter queue (named in the claim's result), and hands out
// the next job instead. Just before the deadline the job still goes out.
func testMaxWaitClaim(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Minute})
	// Without a group, so that the claim goes in claim order and meets it
	// first.
	first := b.letterJob("orders", 3)
	first.Group = ""
	old := b.add(first)[0]
	fresh := b.add(newJob("orders", withRunAt(at(30*time.Second))))[0]
	b.add(newJob("orders", withRunAt(at(40*time.Second))))
	early := b.add(newJob("early", withRunAt(t0)))[0]
	b.settle("early", job.QueueSettings{MaxWait: time.Minute})
	if got := b.claimID(at(time.Minute-time.Millisecond), "early", early); got.Attempt != 1 {
		b.t.Fatalf("claim a millisecond before the deadline: %+v", got)
	}
	deadline := at(time.Minute)
	res := b.claimResult(deadline, 1, "orders")
	if len(res.Jobs) != 1 || res.Jobs[0].ID != fresh {
		b.t.Fatalf("claim at the deadline: %v, want %s (the job past its wait goes out never)", idsOf(res.Jobs), fresh)
	}
	if !slices.Contains(res.Available, "orders-dlq") {
		b.t.Fatalf("claim result's Available %v, want orders-dlq", res.Available)
	}
	b.wantExpired(old, "orders-dlq", deadline)
	b.wantCounts("orders", map[job.State]int64{job.StateDead: 1, job.StateActive: 1, job.StateAvailable: 1})
}

// A claim that meets several jobs past their wait kills every one of
// them, not the first alone, and hands out the job behind them: in a
// queue claimed the plain way, alone or with another, in a queue with
// group limits, in an ordered queue, and in a claim of one group. No
// sweep runs here: the jobs die at the claim's moment, of the claim.
func testMaxWaitClaimKillsAll(b *bundle) {
	const stale = 5
	claimAt := at(2 * time.Minute)
	for _, c := range []struct {
		queue  string
		with   string // another queue the claim names, before queue
		limits job.Limits
		group  string
		claim  string // the group a claim of one group names
	}{
		{queue: "plain"},
		{queue: "second", with: "first"},
		{queue: "grouped", limits: job.Limits{GroupMaxActive: 1}, group: "g"},
		{queue: "ordered", limits: job.Limits{Ordered: true}, group: "g"},
		{queue: "one-group", limits: job.Limits{GroupMaxActive: 1}, group: "g", claim: "g"},
	} {
		b.settle(c.queue, job.QueueSettings{DeadLetterQueue: c.queue + "-dlq", MaxWait: time.Minute})
		if c.limits != (job.Limits{}) {
			b.limit(c.queue, c.limits)
		}
		old := newJobs(c.queue, stale)
		for i := range old {
			old[i].Group = c.group
		}
		oldIDs := b.add(old...)
		young := newJob(c.queue, withRunAt(at(90*time.Second)))
		young.Group = c.group
		fresh := b.add(young)[0]
		queues := []string{c.queue}
		var otherIDs []string
		if c.with != "" {
			b.settle(c.with, job.QueueSettings{MaxWait: time.Minute})
			otherIDs = b.add(newJobs(c.with, stale)...)
			queues = []string{c.with, c.queue}
		}
		res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: 1, Now: claimAt, Group: c.claim})
		if err != nil {
			b.t.Fatalf("%s: claim: %v", c.queue, err)
		}
		if len(res.Jobs) != 1 || res.Jobs[0].ID != fresh {
			b.t.Fatalf("%s: claim got %v, want %s behind the %d jobs past their wait", c.queue, idsOf(res.Jobs), fresh, stale)
		}
		for _, id := range oldIDs {
			b.wantExpired(id, c.queue+"-dlq", claimAt)
		}
		for _, id := range otherIDs {
			b.wantExpired(id, "", claimAt)
		}
		if !slices.Contains(res.Available, c.queue+"-dlq") {
			b.t.Fatalf("%s: claim result's Available %v, want %s-dlq", c.queue, res.Available, c.queue)
		}
		b.wantCounts(c.queue, map[job.State]int64{job.StateDead: stale, job.StateActive: 1})
	}
}

// Only a job never started ages: one started before its deadline and
// back to wait after a failure goes out whenever it is due.
func testMaxWaitStarted(b *bundle) {
	b.settle("q", job.QueueSettings{MaxWait: time.Minute})
	id := b.add(newJob("q"))[0]
	b.failID(at(10*time.Second), "q", id, "flaky", false)
	later := at(time.Hour)
	if _, err := b.s.JobPromoteDue(b.ctx, later, 10); err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	if res := b.sweep(later, 10); res.Count != 0 {
		b.t.Fatalf("sweep killed %d started jobs", res.Count)
	}
	if got := b.claimID(later, "q", id); got.Attempt != 2 {
		b.t.Fatalf("claim of a started job an hour on: %+v", got)
	}
}

// The sweep kills the jobs past their wait that no claim met, in queues
// nobody fetches from and paused ones alike, with their copies, and
// leaves the others; a full pass stops at its limit.
func testMaxWaitSweep(b *bundle) {
	b.settle("orders", job.QueueSettings{DeadLetterQueue: "orders-dlq", MaxWait: time.Minute})
	b.settle("paused", job.QueueSettings{MaxWait: time.Minute})
	if err := b.s.QueueSetPaused(b.ctx, "paused", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	old := b.add(newJobs("orders", 3)...)
	young := b.add(newJob("orders", withRunAt(at(time.Minute))))[0]
	scheduled := b.add(newJob("orders", scheduledAt(at(10*time.Second))))[0]
	held := b.add(newJob("paused"))[0]
	other := b.add(newJob("plain"))[0]
	now := at(time.Minute + time.Second)
	if res := b.sweep(now, 2); res.Count != 2 || !slices.Equal(res.Available, []string{"orders-dlq"}) {
		b.t.Fatalf("sweep with a limit of 2: %+v", res)
	}
	res := b.sweep(now, 10)
	if res.Count != 2 {
		b.t.Fatalf("second sweep: %+v, want the 2 jobs left past their wait", res)
	}
	for _, id := range old {
		b.wantExpired(id, "orders-dlq", b.get(id).FinishedAt)
	}
	b.wantExpired(held, "", now)
	if !res.Next.IsZero() && res.Next.After(at(2*time.Minute)) {
		b.t.Fatalf("next deadline %v, after that of the youngest job, %v", res.Next, at(2*time.Minute))
	}
	for _, id := range []string{young, scheduled, other} {
		if st := b.get(id).State; st == job.StateDead {
			b.t.Fatalf("job %s died though not past a wait", id)
		}
	}
	// A scheduled job waits from its run time, not from its enqueue.
	if _, err := b.s.JobPromoteDue(b.ctx, now, 10); err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	if res := b.sweep(at(time.Minute+5*time.Second), 10); res.Count != 0 {
		b.t.Fatalf("sweep before the scheduled job's deadline: %+v", res)
	}
	if res := b.sweep(at(2*time.Minute+10*time.Second), 10); res.Count != 2 {
		b.t.Fatalf("sweep past both deadlines: %+v", res)
	}
	b.wantExpired(scheduled, "orders-dlq", at(2*time.Minute+10*time.Second))
	if n := len(b.lettersIn("orders-dlq")); n != 5 {
		b.t.Fatalf("orders-dlq holds %d copies, want 5", n)
	}
	if res := b.sweep(at(time.Hour), 10); res.Count != 0 {
		b.t.Fatalf("sweep with nothing left: %+v", res)
	}
}

// A job handed out before its deadline runs on past it: the sweep leaves
// it, and its ack goes through.
func testMaxWaitSweepActive(b *bundle) {
	b.settle("q", job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Minute})
	id := b.add(newJob("q", withLease(time.Hour)))[0]
	j := b.claimID(at(30*time.Second), "q", id)
	if res := b.sweep(at(10*time.Minute), 10); res.Count != 0 {
		b.t.Fatalf("sweep killed %d active jobs", res.Count)
	}
	b.accepted("complete", b.complete(at(10*time.Minute), job.CompleteItem{ID: id, Token: j.LeaseToken}), job.StateCompleted)
	if n := len(b.lettersIn("q-dlq")); n != 0 {
		b.t.Fatalf("%d copies of a completed job", n)
	}
}

// A maximum wait set on a queue holds for the jobs already waiting in it,
// from their run times; cleared, it holds for none.
func testMaxWaitSetLater(b *bundle) {
	ids := b.add(newJobs("q", 2)...)
	b.settle("q", job.QueueSettings{MaxWait: time.Minute})
	b.settle("q", job.QueueSettings{MaxWait: time.Hour})
	if res := b.sweep(at(10*time.Minute), 10); res.Count != 0 {
		b.t.Fatalf("sweep within the longer wait: %+v", res)
	}
	b.settle("q", job.QueueSettings{MaxWait: 5 * time.Minute})
	if res := b.sweep(at(10*time.Minute), 1); res.Count != 1 {
		b.t.Fatalf("sweep past the shorter wait: %+v", res)
	}
	b.settle("q", job.QueueSettings{})
	if res := b.sweep(at(time.Hour), 10); res.Count != 0 {
		b.t.Fatalf("sweep with the wait cleared: %+v", res)
	}
	if got := b.claimAt(at(time.Hour), 5, "q"); len(got) != 1 {
		b.t.Fatalf("claim with the wait cleared: %v, want the job left", idsOf(got))
	}
	if st := b.get(ids[0]).State; st != job.StateDead && b.get(ids[1]).State != job.StateDead {
		b.t.Fatalf("neither job died: %s", st)
	}
}

// A job retried by hand, dead of its wait, waits afresh from the retry.
func testMaxWaitRetry(b *bundle) {
	b.settle("q", job.QueueSettings{MaxWait: time.Minute})
	id := b.add(newJob("q"))[0]
	if res := b.sweep(at(time.Minute), 10); res.Count != 1 {
		b.t.Fatalf("sweep: %+v", res)
	}
	retried := at(time.Hour)
	if _, err := b.s.JobRetry(b.ctx, id, retried); err != nil {
		b.t.Fatalf("retry: %v", err)
	}
	if res := b.sweep(retried.Add(59*time.Second), 10); res.Count != 0 {
		b.t.Fatalf("sweep within the new wait: %+v", res)
	}
	if res := b.sweep(retried.Add(time.Minute), 10); res.Count != 1 {
		b.t.Fatalf("sweep past the new wait: %+v", res)
	}
	if j := b.wantExpired(id, "", retried.Add(time.Minute)); len(j.Errors) != 2 {
		b.t.Fatalf("errors after two deaths: %+v", j.Errors)
	}
	if _, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateDead, Now: at(2 * time.Hour)}); err != nil {
		b.t.Fatalf("retry many: %v", err)
	}
	if got := b.claimAt(at(2*time.Hour+30*time.Second), 1, "q"); len(got) != 1 {
		b.t.Fatalf("claim within the wait after a bulk retry: %v", idsOf(got))
	}
}

// Under a cap, a rate and their group forms, a job past its wait that a
// claim meets takes no place and counts as no start: the claim kills it
// and hands out the jobs the limits let start without it.
func testMaxWaitUnderLimits(b *bundle) {
	claimAt := at(2 * time.Minute)
	for _, c := range []struct {
		queue  string
		limits job.Limits
		group  string
		want   int
	}{
		{"capped", job.Limits{MaxActive: 2}, "", 2},
		{"rated", job.Limits{Rate: job.Rate{Limit: 2, Period: time.Hour}}, "", 2},
		{"group-capped", job.Limits{GroupMaxActive: 1}, "g", 1},
		{"group-rated", job.Limits{GroupRate: job.Rate{Limit: 1, Period: time.Hour}}, "g", 1},
	} {
		b.settle(c.queue, job.QueueSettings{DeadLetterQueue: c.queue + "-dlq", MaxWait: time.Minute})
		b.limit(c.queue, c.limits)
		old := newJobs(c.queue, 3, withPriority(topPriority))
		fresh := newJobs(c.queue, 3, withRunAt(at(90*time.Second)))
		for i := range old {
			old[i].Group, fresh[i].Group = c.group, c.group
		}
		oldIDs, freshIDs := b.add(old...), b.add(fresh...)
		got := b.claimResult(claimAt, 10, c.queue)
		if len(got.Jobs) != c.want {
			b.t.Fatalf("%s: claim got %v, want %d of %v", c.queue, idsOf(got.Jobs), c.want, freshIDs)
		}
		for _, j := range got.Jobs {
			if !slices.Contains(freshIDs, j.ID) {
				b.t.Fatalf("%s: claim handed out %s, which is past its wait", c.queue, j.ID)
			}
		}
		// The claim met at least the first of the old jobs; the sweep
		// kills any it did not.
		b.wantExpired(oldIDs[0], c.queue+"-dlq", claimAt)
		b.sweep(claimAt, 10)
		for _, id := range oldIDs {
			b.wantExpired(id, c.queue+"-dlq", b.get(id).FinishedAt)
		}
		if more := b.claimAt(claimAt, 10, c.queue); len(more) != 0 {
			b.t.Fatalf("%s: a second claim got %v past the limits", c.queue, idsOf(more))
		}
	}
}

// The settings, the wait deadlines and the copies' origins hold over a
// restart.
func testMaxWaitRestart(b *bundle) {
	if b.h.Reopen == nil {
		return
	}
	b.settle("q", job.QueueSettings{DeadLetterQueue: "q-dlq", MaxWait: time.Minute})
	id := b.add(newJob("q"))[0]
	young := b.add(newJob("q", withRunAt(at(time.Hour))))[0]
	b.reopen()
	if q := b.queue("q"); q.Settings.MaxWait != time.Minute {
		b.t.Fatalf("settings after a restart: %+v", q.Settings)
	}
	if res := b.sweep(at(time.Minute), 10); res.Count != 1 {
		b.t.Fatalf("sweep after a restart: %+v", res)
	}
	b.wantExpired(id, "q-dlq", at(time.Minute))
	b.reopen()
	b.wantExpired(id, "q-dlq", at(time.Minute))
	if got := b.claimAt(at(time.Hour+time.Second), 1, "q"); len(got) != 1 || got[0].ID != young {
		b.t.Fatalf("claim after the restarts: %v, want %s", idsOf(got), young)
	}
}
