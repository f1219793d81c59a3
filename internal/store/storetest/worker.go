package storetest

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func workerTests() []group {
	return []group{
		{"JobClaimWorker", []test{
			{"AClaimRecordsItsWorker", testWorkerClaim},
			{"ALaterClaimReplacesIt", testWorkerReplaced},
			{"ItOutlivesTheLease", testWorkerKept},
			{"ItSurvivesARestart", testWorkerRestart},
			{"AFlowQueuesClaimRecordsItToo", testWorkerFlowClaim},
		}},
		{"JobCountActiveByWorker", []test{
			{"CountsTheActiveJobsOfEachNamedWorker", testWorkerCount},
		}},
		{"JobListByWorker", []test{
			{"ListsTheActiveJobsOfOneWorker", testWorkerList},
			{"GoesOnlyWithStateActive", testWorkerListNeedsActive},
		}},
		{"TraceParent", []test{
			{"IsKeptWithTheJob", testTraceParentKept},
			{"ReachesConsumerGroupsCopies", testTraceParentLanes},
		}},
	}
}

// Traceparents the suite gives its jobs.
const (
	traceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
)

func withTraceParent(tp string) func(*store.JobInsertParams) {
	return func(p *store.JobInsertParams) { p.TraceParent = tp }
}

// claimBy claims up to max jobs of queues at now for worker.
func (b *bundle) claimBy(worker string, now time.Time, max int, queues ...string) []*job.Job {
	b.t.Helper()
	res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: max, Worker: worker, Now: now})
	if err != nil {
		b.t.Fatalf("claim %d from %v for %q: %v", max, queues, worker, err)
	}
	return res.Jobs
}

// claimIDBy claims the next job of queue at now for worker and fails
// unless it is id.
func (b *bundle) claimIDBy(worker string, now time.Time, queue, id string) *job.Job {
	b.t.Helper()
	js := b.claimBy(worker, now, 1, queue)
	if len(js) != 1 || js[0].ID != id {
		b.t.Fatalf("claim from %s for %q: got %v, want job %s", queue, worker, idsOf(js), id)
	}
	return js[0]
}

// wantWorker fails unless job id, as the store reads it, is in state and
// names worker.
func (b *bundle) wantWorker(id string, state job.State, worker string) {
	b.t.Helper()
	if j := b.get(id); j.State != state || j.Worker != worker {
		b.t.Fatalf("job %s: %s by %q, want %s by %q", id, j.State, j.Worker, state, worker)
	}
}

// countBy counts the active jobs of workers.
func (b *bundle) countBy(workers ...string) map[string]int {
	b.t.Helper()
	got, err := b.s.JobCountActiveByWorker(b.ctx, &store.JobCountActiveByWorkerParams{Workers: workers})
	if err != nil {
		b.t.Fatalf("count active jobs of %v: %v", workers, err)
	}
	return got
}

// wantCount fails unless the active jobs of workers count as want (a
// worker left out of want holds none, and is left out of the answer).
func (b *bundle) wantCount(want map[string]int, workers ...string) {
	b.t.Helper()
	if got := b.countBy(workers...); !maps.Equal(got, want) {
		b.t.Fatalf("active jobs by worker %v: %v, want %v", workers, got, want)
	}
}

// listBy lists, in pages of limit, the active jobs of queue (every queue
// when empty) that worker holds.
func (b *bundle) listBy(worker, queue string, limit int) []string {
	b.t.Helper()
	var ids []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			b.t.Fatalf("list the jobs of %q: no last page", worker)
		}
		p, err := b.s.JobList(b.ctx, &job.ListParams{Queue: queue, State: job.StateActive, Worker: worker, Cursor: cursor, Limit: limit})
		if err != nil {
			b.t.Fatalf("list the jobs of %q in %q: %v", worker, queue, err)
		}
		if len(p.Jobs) > limit {
			b.t.Fatalf("list the jobs of %q: %d on a page of %d", worker, len(p.Jobs), limit)
		}
		for _, j := range p.Jobs {
			if j.State != job.StateActive || j.Worker != worker || (queue != "" && j.Queue != queue) {
				b.t.Fatalf("the jobs of %q in %q list %s, %s in %s by %q", worker, queue, j.ID, j.State, j.Queue, j.Worker)
			}
			ids = append(ids, j.ID)
		}
		if p.Next == "" {
			return ids
		}
		cursor = p.Next
	}
}

// A claim gives each job it hands out the claiming worker's name, which
// the job shows while it is active, wherever it is read; a claim without
// a name leaves it empty.
func testWorkerClaim(b *bundle) {
	ids := b.add(newJobs("q", 3)...)
	js := b.claimBy("host-1/pid-7", t0, 2, "q")
	if len(js) != 2 {
		b.t.Fatalf("claimed %d jobs, want 2", len(js))
	}
	for _, j := range js {
		if j.Worker != "host-1/pid-7" {
			b.t.Fatalf("claimed job %s names worker %q", j.ID, j.Worker)
		}
		b.wantWorker(j.ID, job.StateActive, "host-1/pid-7")
	}
	anon := b.claimIDBy("", t0, "q", ids[2])
	if anon.Worker != "" {
		b.t.Fatalf("a claim without a worker gave job %s worker %q", anon.ID, anon.Worker)
	}
	b.wantWorker(ids[2], job.StateActive, "")
	for _, j := range b.listAll("q", job.StateActive, 10) {
		want := "host-1/pid-7"
		if j.ID == ids[2] {
			want = ""
		}
		if j.Worker != want {
			b.t.Fatalf("listed job %s names worker %q, want %q", j.ID, j.Worker, want)
		}
	}
	if j := b.get(ids[0]); j.TraceParent != "" {
		b.t.Fatalf("a job enqueued without a traceparent has %q", j.TraceParent)
	}
}

// The next claim of a job names its own worker, or none: the name is
// always that of the latest hand-out.
func testWorkerReplaced(b *bundle) {
	id := b.add(newJob("q", withMaxAttempts(5)))[0]
	first := b.claimIDBy("worker-a", t0, "q", id)
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: id, Token: first.LeaseToken}), job.StateAvailable)
	second := b.claimIDBy("worker-b", t0, "q", id)
	if second.Worker != "worker-b" {
		b.t.Fatalf("second claim names %q, want worker-b", second.Worker)
	}
	b.wantWorker(id, job.StateActive, "worker-b")
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: id, Token: second.LeaseToken}), job.StateAvailable)
	third := b.claimIDBy("", t0, "q", id)
	b.wantWorker(id, job.StateActive, "")
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: id, Token: third.LeaseToken}), job.StateCompleted)
	b.wantWorker(id, job.StateCompleted, "")
}

// After its lease ends, whatever ends it (an ack, a failure that retries
// or kills, a release, an expiry), a job still names the worker that
// held it last.
func testWorkerKept(b *bundle) {
	ps := newJobs("q", 5, withMaxAttempts(2))
	ids := b.add(ps...)
	js := b.claimBy("w", t0, 5, "q")
	if len(js) != 5 {
		b.t.Fatalf("claimed %d jobs, want 5", len(js))
	}
	token := make(map[string]int64)
	for _, j := range js {
		token[j.ID] = j.LeaseToken
	}
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: ids[0], Token: token[ids[0]]}), job.StateCompleted)
	b.accepted("fail", b.fail(t0, job.FailItem{ID: ids[1], Token: token[ids[1]], Message: "later"}), job.StateRetrying)
	b.accepted("fail", b.fail(t0, job.FailItem{ID: ids[2], Token: token[ids[2]], Message: "never", NoRetry: true}), job.StateDead)
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: ids[3], Token: token[ids[3]]}), job.StateAvailable)
	res, err := b.s.JobRescueExpired(b.ctx, at(time.Hour), 10)
	if err != nil || res.Count != 1 {
		b.t.Fatalf("rescue: %+v, %v; want the one job left active rescued", res, err)
	}
	for i, st := range []job.State{job.StateCompleted, job.StateRetrying, job.StateDead, job.StateAvailable, job.StateAvailable} {
		b.wantWorker(ids[i], st, "w")
	}
	b.wantCount(map[string]int{}, "w")
	if got := b.listBy("w", "", 10); len(got) != 0 {
		b.t.Fatalf("worker w lists %v after its leases ended", got)
	}
}

// A restart keeps who holds each active job (the leases the store
// honours after it) and who ran each finished job.
func testWorkerRestart(b *bundle) {
	if b.h.Reopen == nil {
		b.t.Skip("the harness has no restart")
	}
	ids := b.add(newJobs("q", 3)...)
	js := b.claimBy("w-1", t0, 3, "q")
	if len(js) != 3 {
		b.t.Fatalf("claimed %d jobs, want 3", len(js))
	}
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: js[0].ID, Token: js[0].LeaseToken}), job.StateCompleted)
	b.reopen()
	b.wantWorker(ids[0], job.StateCompleted, "w-1")
	b.wantWorker(ids[1], job.StateActive, "w-1")
	b.wantCount(map[string]int{"w-1": 2}, "w-1", "w-2")
	if got := b.listBy("w-1", "q", 1); !slices.Equal(got, ids[1:]) {
		b.t.Fatalf("worker w-1 lists %v after a restart, want %v", got, ids[1:])
	}
	b.accepted("fail", b.fail(t0, job.FailItem{ID: ids[1], Token: js[1].LeaseToken, Message: "x", NoRetry: true}), job.StateDead)
	b.wantWorker(ids[1], job.StateDead, "w-1")
	b.reopen()
	b.wantWorker(ids[1], job.StateDead, "w-1")
	b.wantWorker(ids[2], job.StateActive, "w-1")
}

// The claims of queues with flow control, by group or not, record the
// worker as plain claims do.
func testWorkerFlowClaim(b *bundle) {
	b.limit("flow", job.Limits{MaxActive: 10})
	b.add(append(grouped("flow", "g1", 2), grouped("flow", "g2", 1)...)...)
	js := b.claimBy("flow-worker", t0, 2, "flow")
	if len(js) != 2 {
		b.t.Fatalf("claimed %d jobs, want 2", len(js))
	}
	res, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"flow"}, Max: 5, Group: "g1", Worker: "g1-worker", Now: t0})
	if err != nil || len(res.Jobs) != 1 {
		b.t.Fatalf("claim group g1: %+v, %v", res, err)
	}
	for _, j := range append(js, res.Jobs...) {
		want := "flow-worker"
		if j == res.Jobs[0] {
			want = "g1-worker"
		}
		if j.Worker != want {
			b.t.Fatalf("claimed job %s names %q, want %q", j.ID, j.Worker, want)
		}
		b.wantWorker(j.ID, job.StateActive, want)
	}
	b.wantCount(map[string]int{"flow-worker": 2, "g1-worker": 1}, "flow-worker", "g1-worker")
}

// The count names each worker that holds active jobs, once, with how
// many, across queues, and follows its leases as they end.
func testWorkerCount(b *bundle) {
	b.add(newJobs("a", 3)...)
	b.add(newJobs("b", 2)...)
	x := b.claimBy("x", t0, 2, "a")
	b.claimBy("y", t0, 1, "a")
	b.claimBy("x", t0, 2, "b")
	b.wantCount(map[string]int{"x": 4, "y": 1}, "x", "y", "nobody")
	b.wantCount(map[string]int{"y": 1}, "y")
	b.wantCount(map[string]int{}, "nobody")
	b.wantCount(map[string]int{})
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: x[0].ID, Token: x[0].LeaseToken}), job.StateCompleted)
	b.wantCount(map[string]int{"x": 3, "y": 1}, "x", "y")
}

// A listing by worker holds that worker's active jobs alone, in enqueue
// order and page by page, of one queue or of all.
func testWorkerList(b *bundle) {
	ids := b.add(append(newJobs("a", 4), newJobs("b", 3)...)...)
	mine := b.claimBy("me", t0, 2, "a")
	b.claimBy("other", t0, 1, "a")
	mine = append(mine, b.claimBy("me", t0, 3, "b")...)
	b.claimBy("", t0, 1, "a")
	want := idsOf(mine)
	if !slices.Equal(want, []string{ids[0], ids[1], ids[4], ids[5], ids[6]}) {
		b.t.Fatalf("claims took %v", want)
	}
	for _, limit := range []int{1, 2, 100} {
		if got := b.listBy("me", "", limit); !slices.Equal(got, want) {
			b.t.Fatalf("jobs of me in pages of %d: %v, want %v", limit, got, want)
		}
	}
	if got := b.listBy("me", "b", 2); !slices.Equal(got, want[2:]) {
		b.t.Fatalf("jobs of me in b: %v, want %v", got, want[2:])
	}
	if got := b.listBy("other", "", 10); !slices.Equal(got, []string{ids[2]}) {
		b.t.Fatalf("jobs of other: %v, want %v", got, ids[2:3])
	}
	if got := b.listBy("nobody", "", 10); len(got) != 0 {
		b.t.Fatalf("jobs of nobody: %v", got)
	}
}

// A listing by worker of any state but active is refused as bad input.
func testWorkerListNeedsActive(b *bundle) {
	b.jobIn(job.StateCompleted, "q")
	for _, st := range []job.State{"", job.StateCompleted, job.StateAvailable} {
		_, err := b.s.JobList(b.ctx, &job.ListParams{Queue: "q", State: st, Worker: "w"})
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != "worker" {
			b.t.Fatalf("list by worker in state %q: %v, want an input error naming worker", st, err)
		}
	}
}

// A job's traceparent is kept as given, through its claims and outcomes,
// its listing and a restart; a job without one has none.
func testTraceParentKept(b *bundle) {
	ids := b.add(newJob("q", withTraceParent(traceA)), newJob("q"), newJob("q", withTraceParent(traceB), scheduledAt(at(time.Hour))))
	for i, want := range []string{traceA, "", traceB} {
		if j := b.get(ids[i]); j.TraceParent != want {
			b.t.Fatalf("job %d has traceparent %q, want %q", i, j.TraceParent, want)
		}
	}
	j := b.claimIDBy("w", t0, "q", ids[0])
	if j.TraceParent != traceA {
		b.t.Fatalf("the claimed job has traceparent %q", j.TraceParent)
	}
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: j.ID, Token: j.LeaseToken}), job.StateCompleted)
	if got := b.get(ids[0]); got.TraceParent != traceA {
		b.t.Fatalf("the completed job has traceparent %q", got.TraceParent)
	}
	if b.h.Reopen != nil {
		b.reopen()
	}
	for i, want := range []string{traceA, "", traceB} {
		if j := b.get(ids[i]); j.TraceParent != want {
			b.t.Fatalf("job %d has traceparent %q after a restart, want %q", i, j.TraceParent, want)
		}
	}
	for _, j := range b.listAll("q", "", 10) {
		if want := map[string]string{ids[0]: traceA, ids[2]: traceB}[j.ID]; j.TraceParent != want {
			b.t.Fatalf("listed job %s has traceparent %q, want %q", j.ID, j.TraceParent, want)
		}
	}
}

// A consumer group's copy carries its job's traceparent, whether it is
// made with the job or when the group starts.
func testTraceParentLanes(b *bundle) {
	before := b.add(newJob("q", withTraceParent(traceA)))[0]
	b.createGroup("q", "g", job.StartBeginning, time.Time{})
	after := b.add(newJob("q", withTraceParent(traceB)), newJob("q"))
	for id, want := range map[string]string{before: traceA, after[0]: traceB, after[1]: ""} {
		if c := b.get(job.CopyID(id, "g")); c.TraceParent != want {
			b.t.Fatalf("the copy of %s has traceparent %q, want %q", id, c.TraceParent, want)
		}
	}
}
