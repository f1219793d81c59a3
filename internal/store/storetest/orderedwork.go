package storetest

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// orderedRun is what the workers of OrderedWorkers and OrderedRunWorkers
// share: a clock that moves a millisecond a call from start, a promoter
// on the first node that brings retries back, the group each job out
// holds and each group's completions.
type orderedRun struct {
	t         testing.TB
	ctx       context.Context
	nodes     []store.Store
	total     int64
	clock     atomic.Int64 // ms after start
	start     time.Time
	mu        sync.Mutex
	active    map[string]string   // group → a job of it out
	completed map[string][]string // group → ids in completion order
	done      atomic.Int64
	stop      chan struct{}
	promoter  sync.WaitGroup
}

// startOrderedRun starts the promoter of a run of the jobs of parts.
func startOrderedRun(t testing.TB, nodes []store.Store, parts map[string][]string, start time.Time) *orderedRun {
	o := &orderedRun{t: t, ctx: context.Background(), nodes: nodes, start: start, active: map[string]string{},
		completed: map[string][]string{}, stop: make(chan struct{})}
	for _, ids := range parts {
		o.total += int64(len(ids))
	}
	o.promoter.Add(1)
	go func() {
		defer o.promoter.Done()
		for {
			select {
			case <-o.stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := nodes[0].JobPromoteDue(o.ctx, o.now(), 1000); err != nil {
				t.Errorf("promote: %v", err)
				return
			}
		}
	}()
	return o
}

// now is the run's clock, moved on by every call.
func (o *orderedRun) now() time.Time {
	return o.start.Add(time.Duration(o.clock.Add(1)) * time.Millisecond)
}

// work runs workers, each claiming from its node in turn with claim
// until every job completed or two minutes passed.
func (o *orderedRun) work(workers int, claim func(s store.Store, rnd *rand.Rand) int) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := o.nodes[w%len(o.nodes)]
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			deadline := time.Now().Add(2 * time.Minute)
			for o.done.Load() < o.total && time.Now().Before(deadline) {
				if claim(s, rnd) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(o.stop)
	o.promoter.Wait()
}

// check fails the test unless every job completed and every group
// completed in enqueue order.
func (o *orderedRun) check(parts map[string][]string) {
	if n := o.done.Load(); n != o.total {
		o.t.Fatalf("%d of %d jobs completed", n, o.total)
	}
	for p, ids := range parts {
		if !slices.Equal(o.completed[p], ids) {
			o.t.Fatalf("group %s completed %v, enqueued %v", p, o.completed[p], ids)
		}
	}
}

// handOut records the jobs js a claim handed out, by group, failing the
// test for a group handed out while a job of it is out; it returns each
// group's jobs in the order given, and the groups in their first order.
func (o *orderedRun) handOut(js []*job.Job) (order []string, runs map[string][]*job.Job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	runs = map[string][]*job.Job{}
	for _, j := range js {
		if len(runs[j.Group]) == 0 {
			if other, ok := o.active[j.Group]; ok {
				o.t.Errorf("group %s: %s handed out while %s is out", j.Group, j.ID, other)
			}
			order = append(order, j.Group)
		}
		o.active[j.Group] = j.ID
		runs[j.Group] = append(runs[j.Group], j)
	}
	return order, runs
}

// end ends job j with roll (endOrdered), counting its completion.
func (o *orderedRun) end(s store.Store, j *job.Job, roll int) {
	if endOrdered(o.ctx, o.t, s, j, roll, o.now, &o.mu, o.active, o.completed) {
		o.done.Add(1)
	}
}

// OrderedWorkers runs workers that claim queue from nodes in turn (one
// store, or several on one database) and end each job at random: a tenth
// fail into a retry of a millisecond, a tenth are released, the rest are
// acked; a promoter on the first node brings the retries back. The
// clock starts at start and moves a millisecond a call. It returns once
// every job of parts (each group's ids in enqueue order) completed,
// or after two minutes, and fails t unless every job completed, never
// two jobs of a group were out at once, and every group completed
// in enqueue order. The jobs need attempts enough for their failures.
func OrderedWorkers(t testing.TB, nodes []store.Store, queue string, parts map[string][]string, workers int, start time.Time) {
	t.Helper()
	o := startOrderedRun(t, nodes, parts, start)
	o.work(workers, func(s store.Store, rnd *rand.Rand) int {
		js, err := store.ClaimedJobs(s.JobClaim(o.ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 1 + rnd.IntN(25), Now: o.now()}))
		if err != nil {
			t.Errorf("claim: %v", err)
			return 0
		}
		o.handOut(js)
		for _, j := range js {
			o.end(s, j, rnd.IntN(10))
		}
		return len(js)
	})
	o.check(parts)
}

// OrderedRunWorkers is OrderedWorkers with claims of runs: each worker
// claims runs, works each group's run in order and, after a job it fails
// or releases, drops the rest of the run, which the store sent back. It
// fails t unless every job completed, never a group's run went out while
// a job of the group was out, and every group completed in enqueue order.
func OrderedRunWorkers(t testing.TB, nodes []store.Store, queue string, parts map[string][]string, workers int, start time.Time) {
	t.Helper()
	o := startOrderedRun(t, nodes, parts, start)
	o.work(workers, func(s store.Store, rnd *rand.Rand) int {
		js, err := store.ClaimedJobs(s.JobClaim(o.ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 1 + rnd.IntN(25),
			Runs: true, Now: o.now()}))
		if err != nil {
			t.Errorf("claim: %v", err)
			return 0
		}
		order, runs := o.handOut(js)
		for _, g := range order {
			for i, j := range runs[g] {
				roll := rnd.IntN(10)
				if i < len(runs[g])-1 && roll <= 1 {
					// The rest of the run goes back with this job.
					o.mu.Lock()
					delete(o.active, g)
					o.mu.Unlock()
				}
				o.end(s, j, roll)
				if roll <= 1 {
					break
				}
			}
		}
		return len(js)
	})
	o.check(parts)
}

// endOrdered ends job j of OrderedWorkers as roll says (0: fail, 1:
// release, else ack) and reports whether it completed. The job leaves
// active, and an ack is recorded in completed, before the call is sent:
// the group's next job cannot go out before the call commits.
func endOrdered(ctx context.Context, t testing.TB, s store.Store, j *job.Job, roll int, now func() time.Time,
	mu *sync.Mutex, active map[string]string, completed map[string][]string) bool {
	mu.Lock()
	delete(active, j.Group)
	if roll > 1 {
		completed[j.Group] = append(completed[j.Group], j.ID)
	}
	mu.Unlock()
	var out []job.Outcome
	var err error
	switch roll {
	case 0:
		out, err = s.JobFail(ctx, &store.JobFailParams{Now: now(),
			Items: []job.FailItem{{ID: j.ID, Token: j.LeaseToken, Message: "random", RetryAfter: time.Millisecond}}})
	case 1:
		out, err = s.JobRelease(ctx, &store.JobReleaseParams{Now: now(), Items: []job.ReleaseItem{{ID: j.ID, Token: j.LeaseToken}}})
	default:
		out, err = s.JobComplete(ctx, &store.JobCompleteParams{Now: now(), Items: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}}})
	}
	if err != nil || out[0].Err != nil {
		t.Errorf("end %s (%d): %v %+v", j.ID, roll, err, out)
		return false
	}
	return roll > 1
}
