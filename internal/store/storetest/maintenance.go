package storetest

import (
	"slices"
	"sort"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func maintenanceTests() []group {
	return []group{
		{"JobPromoteDue", []test{
			{"PromotesOnlyDueScheduledAndRetryingJobs", testPromote},
			{"LimitBoundsAPass", testPromoteLimit},
		}},
		{"JobRescueExpired", []test{
			{"TakesBackExpiredLeases", testRescue},
			{"LimitBoundsAPass", testRescueLimit},
		}},
		{"JobPrune", []test{
			{"AgeDeletesFinishedBeforeCutoff", testPruneAge},
			{"CountKeepsNewest", testPruneCount},
			{"OnlyFinalJobs", testPruneOnlyFinal},
			{"LimitBoundsAPass", testPruneLimit},
		}},
	}
}

// JobPromoteDue makes available the scheduled and retrying jobs whose
// RunAt is at or before now, names their queues once each, and reports
// the earliest RunAt still waiting.
func testPromote(b *bundle) {
	sched := b.add(newJob("q", scheduledAt(at(time.Minute))), newJob("q", scheduledAt(at(2*time.Minute))),
		newJob("q", scheduledAt(at(3*time.Minute))))
	r := b.jobIn(job.StateActive, "r")
	b.accepted("fail", b.fail(t0, job.FailItem{ID: r.ID, Token: r.LeaseToken, Message: "x", RetryAfter: 90 * time.Second}), job.StateRetrying)
	b.jobIn(job.StateActive, "s")
	b.jobIn(job.StateAvailable, "s")
	b.jobIn(job.StateRetrying, "late", func(p *store.JobInsertParams) { p.Backoff.Base = time.Hour })
	before := []*job.Job{b.get(sched[0]), b.get(sched[1]), b.get(r.ID)}

	res, err := b.s.JobPromoteDue(b.ctx, at(2*time.Minute), 10)
	if err != nil {
		b.t.Fatalf("promote: %v", err)
	}
	avail := slices.Clone(res.Available)
	sort.Strings(avail)
	if res.Count != 3 || !slices.Equal(avail, []string{"q", "r"}) || !res.Next.Equal(at(3*time.Minute)) {
		b.t.Fatalf("promote: %+v, want 3 jobs of q and r, next at %v", res, at(3*time.Minute))
	}
	for _, j := range before {
		want := *j
		want.State = job.StateAvailable
		b.unchanged("checking a promoted job", &want)
	}
	res, err = b.s.JobPromoteDue(b.ctx, at(2*time.Minute), 10)
	if err != nil || res.Count != 0 || len(res.Available) != 0 || !res.Next.Equal(at(3*time.Minute)) {
		b.t.Fatalf("promote again: %+v, %v; want nothing, next at %v", res, err, at(3*time.Minute))
	}
	got := b.claimAt(at(2*time.Minute), 10, "q", "r")
	if want := []string{r.ID, sched[0], sched[1]}; !slices.Equal(idsOf(got), want) {
		b.t.Fatalf("claim after promote: %v, want %v", idsOf(got), want)
	}
	b.wantCounts("s", map[job.State]int64{job.StateActive: 1, job.StateAvailable: 1})
	res, err = b.s.JobPromoteDue(b.ctx, at(2*time.Hour), 10)
	if err != nil || res.Count != 2 || !res.Next.IsZero() {
		b.t.Fatalf("promote the rest: %+v, %v; want 2 and no next", res, err)
	}
}

// A pass promotes at most limit jobs; Next then reports a job already due.
func testPromoteLimit(b *bundle) {
	var ps []store.JobInsertParams
	for i := range 5 {
		ps = append(ps, newJob("q", scheduledAt(at(time.Duration(i+1)*time.Minute))))
	}
	b.add(ps...)
	res, err := b.s.JobPromoteDue(b.ctx, at(time.Hour), 2)
	if err != nil || res.Count != 2 {
		b.t.Fatalf("promote 2: %+v, %v", res, err)
	}
	var earliest time.Time
	for _, j := range b.listAll("q", job.StateScheduled, 100) {
		if earliest.IsZero() || j.RunAt.Before(earliest) {
			earliest = j.RunAt
		}
	}
	if !res.Next.Equal(earliest) || res.Next.After(at(time.Hour)) {
		b.t.Fatalf("next after a bounded pass %v, want %v (already due)", res.Next, earliest)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 2, job.StateScheduled: 3})
	res, err = b.s.JobPromoteDue(b.ctx, at(time.Hour), 10)
	if err != nil || res.Count != 3 || !res.Next.IsZero() {
		b.t.Fatalf("promote the rest: %+v, %v", res, err)
	}
}

// JobRescueExpired takes back active jobs whose lease ended at or before
// now: each gets "lease expired" as its attempt's error and ends available
// (attempts left), dead (none left) or cancelled (cancel requested). Only
// queues that got available jobs are named; Next is the earliest lease
// still running.
func testRescue(b *bundle) {
	ids := b.add(newJob("q", withLease(10*time.Second)), newJob("q", withLease(20*time.Second)),
		newJob("q", withLease(time.Minute)), newJob("q", withLease(10*time.Second), withMaxAttempts(1)),
		newJob("q", withLease(10*time.Second)))
	lastOnly := b.add(newJob("d", withLease(10*time.Second), withMaxAttempts(1)))[0]
	js := b.claimAt(t0, 10, "q", "d")
	if len(js) != 6 {
		b.t.Fatalf("claimed %d jobs, want 6", len(js))
	}
	held := make(map[string]*job.Job)
	for _, j := range js {
		held[j.ID] = j
	}
	b.cancel(ids[4], t0)

	now := at(20 * time.Second)
	res, err := b.s.JobRescueExpired(b.ctx, now, 10)
	if err != nil {
		b.t.Fatalf("rescue: %v", err)
	}
	if res.Count != 5 || !slices.Equal(res.Available, []string{"q"}) || !res.Next.Equal(at(time.Minute)) {
		b.t.Fatalf("rescue: %+v, want 5 jobs, only q available, next at %v", res, at(time.Minute))
	}
	expired := []job.AttemptError{{Attempt: 1, Message: "lease expired", At: now}}
	for _, tc := range []struct {
		id    string
		state job.State
	}{{ids[0], job.StateAvailable}, {ids[1], job.StateAvailable}, {ids[3], job.StateDead}, {ids[4], job.StateCancelled}, {lastOnly, job.StateDead}} {
		want := *held[tc.id]
		want.State, want.Errors, want.LeaseExpiresAt = tc.state, expired, time.Time{}
		want.CancelRequested = tc.id == ids[4]
		if tc.state.Final() {
			want.FinishedAt = now
		}
		b.unchanged("checking a rescued job", &want)
		b.wantErr("ack after the lease expired", b.complete(now, job.CompleteItem{ID: tc.id, Token: held[tc.id].LeaseToken})[0].Err, job.ErrLeaseLost)
	}
	b.unchanged("rescue of a running lease", held[ids[2]])
	again := b.claimAt(now, 10, "q")
	if !slices.Equal(idsOf(again), ids[:2]) {
		b.t.Fatalf("claim after rescue: %v, want %v", idsOf(again), ids[:2])
	}
	for _, j := range again {
		if j.Attempt != 2 || j.LeaseToken <= held[j.ID].LeaseToken {
			b.t.Fatalf("second hand-out of %s: attempt %d, token %d; want 2 and above %d", j.ID, j.Attempt, j.LeaseToken, held[j.ID].LeaseToken)
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateActive: 3, job.StateDead: 1, job.StateCancelled: 1})
	b.wantCounts("d", map[job.State]int64{job.StateDead: 1})
	res, err = b.s.JobRescueExpired(b.ctx, at(time.Hour), 10)
	if err != nil || res.Count != 3 || !res.Next.IsZero() {
		b.t.Fatalf("rescue the rest: %+v, %v; want 3 and no next", res, err)
	}
	if res, err := b.s.JobRescueExpired(b.ctx, at(time.Hour), 10); err != nil || res.Count != 0 || len(res.Available) != 0 || !res.Next.IsZero() {
		b.t.Fatalf("rescue with no active job: %+v, %v", res, err)
	}
}

// A pass rescues at most limit jobs; Next then reports a lease already
// expired.
func testRescueLimit(b *bundle) {
	var ps []store.JobInsertParams
	for i := range 4 {
		ps = append(ps, newJob("q", withLease(time.Duration(i+1)*time.Second)))
	}
	b.add(ps...)
	b.claimAt(t0, 10, "q")
	res, err := b.s.JobRescueExpired(b.ctx, at(time.Minute), 3)
	if err != nil || res.Count != 3 {
		b.t.Fatalf("rescue 3: %+v, %v", res, err)
	}
	active := b.listAll("q", job.StateActive, 10)
	if len(active) != 1 || !res.Next.Equal(active[0].LeaseExpiresAt) {
		b.t.Fatalf("next after a bounded pass %v, want the expiry of the one left", res.Next)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 3, job.StateActive: 1})
}

// finishAt makes a job of queue reach final state st at when.
func (b *bundle) finishAt(st job.State, queue string, when time.Time) string {
	b.t.Helper()
	j := b.jobIn(job.StateActive, queue)
	switch st {
	case job.StateCompleted:
		b.accepted("complete", b.complete(when, job.CompleteItem{ID: j.ID, Token: j.LeaseToken}), st)
	case job.StateDead:
		b.accepted("fail", b.fail(when, job.FailItem{ID: j.ID, Token: j.LeaseToken, NoRetry: true}), st)
	case job.StateCancelled:
		b.cancel(j.ID, when)
		b.accepted("release", b.release(when, job.ReleaseItem{ID: j.ID, Token: j.LeaseToken}), st)
	default:
		b.t.Fatalf("finishAt: %s is not final", st)
	}
	return j.ID
}

// pending makes one job in every pending state of queue and returns them.
func (b *bundle) pending(queue string) []*job.Job {
	b.t.Helper()
	var out []*job.Job
	for _, st := range job.States {
		if st.Pending() {
			out = append(out, b.jobIn(st, queue))
		}
	}
	return out
}

// survivors returns the ids of the listed jobs in state st, sorted.
func (b *bundle) survivors(st job.State) []string {
	b.t.Helper()
	ids := idsOf(b.listAll("", st, 1000))
	sort.Strings(ids)
	return ids
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

// Age retention deletes completed and cancelled jobs finished before
// CompletedBefore and dead jobs finished before DeadBefore; a zero cutoff
// deletes nothing.
func testPruneAge(b *bundle) {
	var done []string
	for i := range 5 {
		done = append(done, b.finishAt(job.StateCompleted, []string{"a", "b"}[i%2], at(time.Duration(i+1)*time.Minute)))
	}
	cancelled := b.finishAt(job.StateCancelled, "a", at(150*time.Second))
	var dead []string
	for i := range 3 {
		dead = append(dead, b.finishAt(job.StateDead, "b", at(time.Duration(i+1)*time.Minute)))
	}
	pend := b.pending("a")

	prune := func(p store.JobPruneParams, want int) {
		b.t.Helper()
		p.Limit = 100
		if n, err := b.s.JobPrune(b.ctx, &p); err != nil || n != want {
			b.t.Fatalf("prune %+v: %d, %v; want %d", p, n, err, want)
		}
	}
	prune(store.JobPruneParams{}, 0)
	prune(store.JobPruneParams{CompletedBefore: at(3 * time.Minute)}, 3)
	if got := b.survivors(job.StateCompleted); !slices.Equal(got, sorted(done[2:]...)) {
		b.t.Fatalf("completed after age pruning: %v, want %v", got, sorted(done[2:]...))
	}
	if got := b.survivors(job.StateCancelled); len(got) != 0 {
		b.t.Fatalf("cancelled job %s finished before the cutoff survived", cancelled)
	}
	if got := b.survivors(job.StateDead); !slices.Equal(got, sorted(dead...)) {
		b.t.Fatalf("dead jobs pruned by the completed cutoff: %v left", got)
	}
	prune(store.JobPruneParams{DeadBefore: at(2*time.Minute + time.Second)}, 2)
	if got := b.survivors(job.StateDead); !slices.Equal(got, dead[2:]) {
		b.t.Fatalf("dead after age pruning: %v, want %v", got, dead[2:])
	}
	for _, j := range pend {
		b.unchanged("prune", j)
	}
}

// Count retention keeps the newest KeepCompleted completed and cancelled
// jobs together, and the newest KeepDead dead jobs, across all queues.
func testPruneCount(b *bundle) {
	var done []string
	for i := range 5 {
		done = append(done, b.finishAt(job.StateCompleted, []string{"a", "b"}[i%2], at(time.Duration(i+1)*time.Minute)))
	}
	cancelled := b.finishAt(job.StateCancelled, "b", at(270*time.Second))
	var dead []string
	for i := range 3 {
		dead = append(dead, b.finishAt(job.StateDead, []string{"a", "b"}[i%2], at(time.Duration(3-i)*time.Minute)))
	}
	pend := b.pending("b")
	p := &store.JobPruneParams{KeepCompleted: 2, KeepDead: 1, Limit: 100}
	if n, err := b.s.JobPrune(b.ctx, p); err != nil || n != 6 {
		b.t.Fatalf("prune %+v: %d, %v; want 6", p, n, err)
	}
	if got := b.survivors(job.StateCompleted); !slices.Equal(got, done[4:]) {
		b.t.Fatalf("completed after count pruning: %v, want %v", got, done[4:])
	}
	if got := b.survivors(job.StateCancelled); !slices.Equal(got, []string{cancelled}) {
		b.t.Fatalf("cancelled after count pruning: %v, want %s (second newest)", got, cancelled)
	}
	if got := b.survivors(job.StateDead); !slices.Equal(got, dead[:1]) {
		b.t.Fatalf("dead after count pruning: %v, want the newest %s", got, dead[0])
	}
	if n, err := b.s.JobPrune(b.ctx, p); err != nil || n != 0 {
		b.t.Fatalf("prune again: %d, %v; want 0", n, err)
	}
	for _, j := range pend {
		b.unchanged("prune", j)
	}
}

// Retention never touches pending jobs, including ones that were final
// before a retry.
func testPruneOnlyFinal(b *bundle) {
	pend := b.pending("q")
	b.finishAt(job.StateCompleted, "q", at(time.Second))
	b.finishAt(job.StateDead, "q", at(time.Second))
	b.finishAt(job.StateCancelled, "q", at(time.Second))
	revived := b.finishAt(job.StateDead, "q", at(time.Second))
	if _, err := b.s.JobRetry(b.ctx, revived, at(2*time.Second)); err != nil {
		b.t.Fatalf("retry: %v", err)
	}
	pend = append(pend, b.get(revived))
	far := at(1000 * time.Hour)
	n, err := b.s.JobPrune(b.ctx, &store.JobPruneParams{CompletedBefore: far, DeadBefore: far, KeepCompleted: 1, KeepDead: 1, Limit: 100})
	if err != nil || n != 3 {
		b.t.Fatalf("prune everything final: %d, %v; want 3", n, err)
	}
	for _, j := range pend {
		b.unchanged("prune", j)
	}
	b.wantCounts("q", map[job.State]int64{job.StateScheduled: 1, job.StateAvailable: 2, job.StateActive: 1, job.StateRetrying: 1})
}

// One pass deletes at most Limit jobs, by age and by count alike.
func testPruneLimit(b *bundle) {
	for i := range 10 {
		b.finishAt(job.StateCompleted, "q", at(time.Duration(i+1)*time.Second))
		b.finishAt(job.StateDead, "q", at(time.Duration(i+1)*time.Second))
	}
	for _, tc := range []struct {
		p    store.JobPruneParams
		want []int
	}{
		{store.JobPruneParams{CompletedBefore: at(time.Hour), Limit: 4}, []int{4, 4, 2, 0}},
		{store.JobPruneParams{KeepDead: 1, Limit: 3}, []int{3, 3, 3, 0}},
	} {
		for i, want := range tc.want {
			if n, err := b.s.JobPrune(b.ctx, &tc.p); err != nil || n != want {
				b.t.Fatalf("prune %+v, pass %d: %d, %v; want %d", tc.p, i, n, err, want)
			}
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateDead: 1})
}
