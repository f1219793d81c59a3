package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/client"
)

// orderedJobs makes queue ordered and enqueues each of groups' jobs
// 0 to n-1, the groups' jobs interleaved, with their number as payload.
// It returns each group's job ids in enqueue order.
func (b *bundle) orderedJobs(queue string, groups []string, n int) map[string][]string {
	b.t.Helper()
	if _, err := b.c.SetQueueLimits(b.ctx, queue, client.Limits{Ordered: true}); err != nil {
		b.t.Fatal(err)
	}
	var ps []client.EnqueueParams
	for i := range n {
		for _, g := range groups {
			ps = append(ps, client.EnqueueParams{Queue: queue, Kind: "k", Group: g, Payload: map[string]int{"n": i}})
		}
	}
	res, err := b.c.EnqueueBatch(b.ctx, ps)
	if err != nil {
		b.t.Fatal(err)
	}
	ids := map[string][]string{}
	for i, r := range res {
		ids[ps[i].Group] = append(ids[ps[i].Group], r.ID)
	}
	return ids
}

// A fetch with Runs takes a free ordered group's jobs as one run, in
// enqueue order; without it the group gives one job.
func TestFetchRuns(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		withRuns := b.orderedJobs("with-runs", []string{"g"}, 5)["g"]
		without := b.orderedJobs("without-runs", []string{"g"}, 5)["g"]

		jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"with-runs"}, Max: 10, Runs: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		if !slices.Equal(got, withRuns) {
			t.Fatalf("fetch with runs: %v, want the group's 5 jobs in enqueue order %v", got, withRuns)
		}

		jobs, err = b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"without-runs"}, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].ID != without[0] {
			t.Fatalf("fetch without runs: %d jobs, want the group's first alone (%s)", len(jobs), without[0])
		}
	})
}

// A fetch with Runs and MaxGroups 1 takes one free group's run, in
// enqueue order, and leaves the other groups' jobs to the next fetch; a
// MaxGroups past 1000 is refused naming max_groups.
func TestFetchRunsMaxGroups(t *testing.T) {
	t.Parallel()
	eachTransport(t, func(t *testing.T, b *bundle) {
		ids := b.orderedJobs("one-group", []string{"g0", "g1", "g2"}, 3)

		seen := map[string]bool{}
		for range 2 {
			jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"one-group"}, Max: 10, Runs: true, MaxGroups: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) == 0 {
				t.Fatal("fetch with max groups 1: no jobs")
			}
			g := jobs[0].Group
			var got []string
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if !slices.Equal(got, ids[g]) {
				t.Fatalf("fetch with max groups 1: %v, want group %s's 3 jobs in enqueue order %v", got, g, ids[g])
			}
			if seen[g] {
				t.Fatalf("group %s gave a second run while its first is active", g)
			}
			seen[g] = true
		}

		_, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"one-group"}, Max: 10, Runs: true, MaxGroups: 1001})
		var apiErr *client.Error
		if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrInvalidArgument) || apiErr.Field != "max_groups" {
			t.Fatalf("fetch with max groups 1001: %v, want invalid_argument naming max_groups", err)
		}
	})
}

// A Worker sends its MaxGroups with each fetch: one the server refuses
// stops the worker with the server's error naming max_groups.
func TestWorkerMaxGroupsSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.worker(client.WorkerConfig{Queues: []string{"ordered"}, Runs: true, MaxGroups: 1001})
	w.Handle("k", func(context.Context, *client.Job) (any, error) { return nil, nil })
	err := recv(t, runWorker(t, w), 10*time.Second, "Run to return")
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Field != "max_groups" {
		t.Fatalf("run with max groups 1001: %v, want invalid_argument naming max_groups", err)
	}
}

// A Worker with Runs completes each group's jobs of an ordered queue in
// enqueue order, one at a time, although a job in the middle of a run
// fails its first attempt: the jobs after it are dropped unrun, not
// failed, and run again after it.
func TestWorkerRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	groups := []string{"g0", "g1", "g2"}
	const each = 20
	ids := b.orderedJobs("ordered", groups, each)

	// Concurrency 20 fetches 20 jobs at first, shared over the 3 groups:
	// g0's run holds more than its first 3 jobs.
	w := b.worker(client.WorkerConfig{Queues: []string{"ordered"}, Concurrency: 20, Runs: true})
	var (
		mu       sync.Mutex
		done     = map[string][]int{}
		running  = map[string]int{}
		problems []string
	)
	finished := make(chan struct{}, len(groups)*each)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, client.NoRetry(err)
		}
		mu.Lock()
		running[j.Group]++
		if running[j.Group] > 1 {
			problems = append(problems, fmt.Sprintf("group %s ran two jobs at once", j.Group))
		}
		mu.Unlock()
		time.Sleep(time.Millisecond) // a job of the group that ran alongside would show
		mu.Lock()
		defer mu.Unlock()
		running[j.Group]--
		if j.Group == "g0" && p.N == 2 && j.Attempt == 1 {
			return nil, client.RetryAfter(errors.New("not yet"), 20*time.Millisecond)
		}
		done[j.Group] = append(done[j.Group], p.N)
		finished <- struct{}{}
		return nil, nil
	})
	run := runWorker(t, w)
	for range len(groups) * each {
		recv(t, finished, 20*time.Second, "the handlers")
	}
	stopWorker(t, w, run)

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	want := make([]int, each)
	for i := range want {
		want[i] = i
	}
	for _, g := range groups {
		if !slices.Equal(done[g], want) {
			t.Errorf("group %s completed %v, want 0 to %d in order", g, done[g], each-1)
		}
	}
	if n := client.Dropped(w); n == 0 {
		t.Error("no job of g0's run was dropped after its job 2 failed")
	}
	for _, g := range groups {
		for i, id := range ids[g] {
			j := b.get(id)
			wantErrors := 0
			if g == "g0" && i == 2 {
				wantErrors = 1
			}
			if j.State != client.StateCompleted || len(j.Errors) != wantErrors {
				t.Errorf("group %s job %d: %s with %d errors, want completed with %d", g, i, j.State, len(j.Errors), wantErrors)
			}
		}
	}
}

// A Worker with Runs that stops while a run's job runs lets that job
// finish and starts none after it: it releases the rest of the run, and
// the group gives them all again, in order, unfailed. On an ordered queue
// the server sends the rest back with the first released; on any other
// queue each is released.
func TestWorkerRunsStop(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			t.Parallel()
			testWorkerRunsStop(t, ordered)
		})
	}
}

func testWorkerRunsStop(t *testing.T, ordered bool) {
	b := setup(t)
	var ids []string
	if ordered {
		ids = b.orderedJobs("q", []string{"g"}, 5)["g"]
	} else {
		ids = b.groupJobs("q", "g", 5, 10*time.Minute)
	}
	w := b.worker(client.WorkerConfig{Queues: []string{"q"}, Concurrency: 10, Runs: true})
	started := make(chan string, 5)
	finish := make(chan struct{})
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		started <- j.ID
		<-finish
		return nil, nil
	})
	run := runWorker(t, w)
	if id := recv(t, started, 10*time.Second, "the run's first job"); id != ids[0] {
		t.Fatalf("first job run: %s, want %s", id, ids[0])
	}
	client.BeginStop(w)
	close(finish)
	stopWorker(t, w, run)
	select {
	case id := <-started:
		t.Fatalf("job %s started after the stop began", id)
	default:
	}

	if j := b.get(ids[0]); j.State != client.StateCompleted {
		t.Fatalf("the running job: %s, want completed", j.State)
	}
	for i, id := range ids[1:] {
		if j := b.get(id); j.State != client.StateAvailable || len(j.Errors) != 0 {
			t.Errorf("job %d after the stop: %s with %d errors, want available without", i+1, j.State, len(j.Errors))
		}
	}
	if n := client.Dropped(w); n != 4 {
		t.Errorf("dropped %d jobs of the run, want 4", n)
	}
	jobs, err := b.c.Fetch(b.ctx, client.FetchParams{Queues: []string{"q"}, Max: 10, Runs: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID)
	}
	if !slices.Equal(got, ids[1:]) {
		t.Fatalf("fetch after the stop: %v, want %v", got, ids[1:])
	}
}

// groupJobs enqueues jobs 0 to n-1 of group on queue, which is not
// ordered, each leased for lease at a fetch, with their number as
// payload. It returns their ids in enqueue order.
func (b *bundle) groupJobs(queue, group string, n int, lease time.Duration) []string {
	b.t.Helper()
	var ps []client.EnqueueParams
	for i := range n {
		ps = append(ps, client.EnqueueParams{Queue: queue, Kind: "k", Group: group, Payload: map[string]int{"n": i}, Lease: lease})
	}
	res, err := b.c.EnqueueBatch(b.ctx, ps)
	if err != nil {
		b.t.Fatal(err)
	}
	var ids []string
	for _, r := range res {
		ids = append(ids, r.ID)
	}
	return ids
}

// On a queue that is not ordered, a Worker with Runs whose handler fails
// a run's second job with retries left releases the jobs after it, which
// the server does not send back by itself: they are available again long
// before their 10-minute leases run out, unfailed, and all complete.
func TestWorkerRunsReleaseDroppedJobsOfUnorderedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const queue = "unordered"
	ids := b.groupJobs(queue, "g", 5, 10*time.Minute)
	w := b.worker(client.WorkerConfig{Queues: []string{queue}, Concurrency: 5, Runs: true})
	completed := make(chan int, 5)
	w.Handle("k", func(ctx context.Context, j *client.Job) (any, error) {
		var p struct{ N int }
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			return nil, client.NoRetry(err)
		}
		if p.N == 1 && j.Attempt == 1 {
			// The queue paused, the worker fetches nothing more: the
			// released jobs stay available for the test to see.
			if _, err := b.c.PauseQueue(ctx, queue); err != nil {
				return nil, client.NoRetry(err)
			}
			return nil, client.RetryAfter(errors.New("not yet"), 10*time.Millisecond)
		}
		completed <- p.N
		return nil, nil
	})
	run := runWorker(t, w)

	// The worker counts the dropped jobs once their release was answered.
	deadline := time.Now().Add(20 * time.Second)
	for client.Dropped(w) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("dropped %d jobs of the run after 20s, want 3", client.Dropped(w))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, id := range ids[2:] {
		if j := b.get(id); j.State != client.StateAvailable || len(j.Errors) != 0 {
			t.Errorf("job %d after job 1 failed: %s with %d errors, want available without", i+2, j.State, len(j.Errors))
		}
	}

	if _, err := b.c.ResumeQueue(b.ctx, queue); err != nil {
		t.Fatal(err)
	}
	for range ids {
		recv(t, completed, 20*time.Second, "the handlers")
	}
	stopWorker(t, w, run)
	for i, id := range ids {
		wantErrors := 0
		if i == 1 {
			wantErrors = 1
		}
		if j := b.get(id); j.State != client.StateCompleted || len(j.Errors) != wantErrors {
			t.Errorf("job %d: %s with %d errors, want completed with %d", i, j.State, len(j.Errors), wantErrors)
		}
	}
	if n := client.Dropped(w); n != 3 {
		t.Errorf("dropped %d jobs, want 3", n)
	}
}
