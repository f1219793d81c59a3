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
	ctx := context.Background()
	total := int64(0)
	for _, ids := range parts {
		total += int64(len(ids))
	}
	var clock atomic.Int64 // ms after start, moved on by every call
	now := func() time.Time { return start.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	var (
		mu        sync.Mutex
		active    = map[string]string{}   // group → the job out
		completed = map[string][]string{} // group → ids in completion order
		done      atomic.Int64
		stop      = make(chan struct{})
		promoter  sync.WaitGroup
	)
	promoter.Add(1)
	go func() {
		defer promoter.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := nodes[0].JobPromoteDue(ctx, now(), 1000); err != nil {
				t.Errorf("promote: %v", err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := nodes[w%len(nodes)]
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			deadline := time.Now().Add(2 * time.Minute)
			for done.Load() < total && time.Now().Before(deadline) {
				js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 1 + rnd.IntN(25), Now: now()}))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				for _, j := range js {
					if other, ok := active[j.Group]; ok {
						t.Errorf("group %s: %s handed out while %s is out", j.Group, j.ID, other)
					}
					active[j.Group] = j.ID
				}
				mu.Unlock()
				for _, j := range js {
					if endOrdered(ctx, t, s, j, rnd.IntN(10), now, &mu, active, completed) {
						done.Add(1)
					}
				}
				if len(js) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	promoter.Wait()
	if n := done.Load(); n != total {
		t.Fatalf("%d of %d jobs completed", n, total)
	}
	for p, ids := range parts {
		if !slices.Equal(completed[p], ids) {
			t.Fatalf("group %s completed %v, enqueued %v", p, completed[p], ids)
		}
	}
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

// OrderedRunWorkers is OrderedWorkers with claims of runs: each worker
// claims runs, works each group's run in order and, after a job it fails
// or releases, drops the rest of the run, which the store sent back. It
// fails t unless every job completed, never a group's run went out while
// a job of the group was out, and every group completed in enqueue order.
func OrderedRunWorkers(t testing.TB, nodes []store.Store, queue string, parts map[string][]string, workers int, start time.Time) {
	t.Helper()
	ctx := context.Background()
	total := int64(0)
	for _, ids := range parts {
		total += int64(len(ids))
	}
	var clock atomic.Int64
	now := func() time.Time { return start.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	var (
		mu        sync.Mutex
		active    = map[string]string{}
		completed = map[string][]string{}
		done      atomic.Int64
		stop      = make(chan struct{})
		promoter  sync.WaitGroup
	)
	promoter.Add(1)
	go func() {
		defer promoter.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if _, err := nodes[0].JobPromoteDue(ctx, now(), 1000); err != nil {
				t.Errorf("promote: %v", err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := nodes[w%len(nodes)]
			rnd := rand.New(rand.NewPCG(uint64(w), 13))
			deadline := time.Now().Add(2 * time.Minute)
			for done.Load() < total && time.Now().Before(deadline) {
				js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 1 + rnd.IntN(25),
					Runs: true, Now: now()}))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				var order []string
				runs := map[string][]*job.Job{}
				mu.Lock()
				for _, j := range js {
					if len(runs[j.Group]) == 0 {
						if other, ok := active[j.Group]; ok {
							t.Errorf("group %s: %s handed out while %s is out", j.Group, j.ID, other)
						}
						order = append(order, j.Group)
					}
					active[j.Group] = j.ID
					runs[j.Group] = append(runs[j.Group], j)
				}
				mu.Unlock()
				for _, g := range order {
					for i, j := range runs[g] {
						roll := rnd.IntN(10)
						if i < len(runs[g])-1 && roll <= 1 {
							// The rest of the run goes back with this job.
							mu.Lock()
							delete(active, g)
							mu.Unlock()
						}
						if endOrdered(ctx, t, s, j, roll, now, &mu, active, completed) {
							done.Add(1)
						}
						if roll <= 1 {
							break
						}
					}
				}
				if len(js) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	promoter.Wait()
	if n := done.Load(); n != total {
		t.Fatalf("%d of %d jobs completed", n, total)
	}
	for p, ids := range parts {
		if !slices.Equal(completed[p], ids) {
			t.Fatalf("group %s completed %v, enqueued %v", p, completed[p], ids)
		}
	}
}
