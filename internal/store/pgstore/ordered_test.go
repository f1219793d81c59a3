package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// orderedJobs returns the parameters of n jobs for each of the partitions
// p0…p(partitions-1) of queue, the partitions' jobs interleaved, and the
// ids of each partition in enqueue order.
func orderedJobs(queue string, partitions, n int) ([]store.JobInsertParams, map[string][]string) {
	var ps []store.JobInsertParams
	ids := make(map[string][]string, partitions)
	for range n {
		for p := range partitions {
			jp := newParams(job.DurabilityFull)
			jp.Queue, jp.Group = queue, fmt.Sprintf("p%d", p)
			ps = append(ps, jp)
			ids[jp.Group] = append(ids[jp.Group], jp.ID)
		}
	}
	return ps, ids
}

// Two nodes claiming one ordered queue at once, with workers that fail or
// release some of their jobs, never hand out two jobs of a partition at
// once, and every partition's jobs complete in enqueue order.
func TestOrderedPartitionsAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	nodes := []*Store{open(t, url), open(t, url)}
	const partitions, perPartition, workers = 300, 4, 6
	ps, parts := orderedJobs("q", partitions, perPartition)
	for i := range ps {
		ps[i].MaxAttempts = 1000
	}
	mustInsert(t, nodes[0], ps)
	if err := nodes[1].QueueSetLimits(ctx, "q", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	total := int64(len(ps))
	var clock atomic.Int64 // ms after t0, moved on by every call
	now := func() time.Time { return t0.Add(time.Duration(clock.Add(1)) * time.Millisecond) }
	var (
		mu        sync.Mutex
		active    = map[string]string{}   // partition → the job out
		completed = map[string][]string{} // partition → ids in completion order
		done      atomic.Int64
		stop      = make(chan struct{})
		promoter  sync.WaitGroup
	)
	promoter.Add(1)
	go func() { // retries come back after their millisecond
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
			s := nodes[w%2]
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			deadline := time.Now().Add(2 * time.Minute)
			for done.Load() < total && time.Now().Before(deadline) {
				js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1 + rnd.IntN(20), Now: now()}))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				for _, j := range js {
					if other, ok := active[j.Group]; ok {
						t.Errorf("partition %s: %s handed out while %s is out", j.Group, j.ID, other)
					}
					active[j.Group] = j.ID
				}
				mu.Unlock()
				for _, j := range js {
					// The job leaves the map before its end is sent: the
					// partition's next job cannot go out before it commits.
					mu.Lock()
					delete(active, j.Group)
					switch r := rnd.IntN(10); {
					case r == 0:
						mu.Unlock()
						out, err := s.JobFail(ctx, &store.JobFailParams{Now: now(),
							Items: []store.JobFailItem{{ID: j.ID, Token: j.LeaseToken, Message: "random", RetryAfter: time.Millisecond}}})
						if err != nil || out[0].Err != nil || out[0].State != job.StateRetrying {
							t.Errorf("fail %s: %v %+v", j.ID, err, out)
						}
					case r == 1:
						mu.Unlock()
						out, err := s.JobRelease(ctx, &store.JobReleaseParams{Now: now(),
							Items: []store.JobReleaseItem{{ID: j.ID, Token: j.LeaseToken}}})
						if err != nil || out[0].Err != nil {
							t.Errorf("release %s: %v %+v", j.ID, err, out)
						}
					default:
						completed[j.Group] = append(completed[j.Group], j.ID)
						mu.Unlock()
						out, err := s.JobComplete(ctx, &store.JobCompleteParams{Now: now(),
							Items: []store.JobCompleteItem{{ID: j.ID, Token: j.LeaseToken}}})
						if err != nil || out[0].Err != nil {
							t.Errorf("complete %s: %v %+v", j.ID, err, out)
							continue
						}
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
			t.Fatalf("partition %s completed %v, enqueued %v", p, completed[p], ids)
		}
	}
}

// A waiting job that held its group in an ordered queue and is cancelled
// or deleted wakes the fetches parked on the queue on other nodes, since
// the group's next job may go; in a queue that is not ordered it sends
// nothing.
func TestOrderedFreedGroupWakesOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	next := listenOn(t, url, s)
	ps, _ := orderedJobs("o", 1, 3)
	mustInsert(t, s, append(ps, groupJobs("plain", "", 1)...))
	if qs := next(); !slices.Equal(qs, []string{"o", "plain"}) {
		t.Fatalf("after an insert: woken for %v", qs)
	}
	if err := s.QueueSetLimits(ctx, "o", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after setting limits: woken for %v", qs)
	}
	// retrying claims the next job of queue and fails it into a retry,
	// which announces the ordered queue (its job stops being active).
	retrying := func(queue string) *job.Job {
		t.Helper()
		js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 5, Now: t0}))
		if err != nil || len(js) != 1 {
			t.Fatalf("claim %s: %v, %v; want one job", queue, idsOf(js), err)
		}
		if err := accepted(s.JobFail(ctx, &store.JobFailParams{Now: t0,
			Items: []store.JobFailItem{{ID: js[0].ID, Token: js[0].LeaseToken, Message: "x", RetryAfter: time.Hour}}})); err != nil {
			t.Fatal(err)
		}
		return js[0]
	}
	plain := retrying("plain")
	held := retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"o"}, Max: 5, Now: t0})); err != nil || len(js) != 0 {
		t.Fatalf("claim while the partition's job retries: %v, %v", idsOf(js), err)
	}
	// The plain queue's cancel sends nothing: the next notification is
	// the ordered queue's.
	if _, err := s.JobCancel(ctx, plain.ID, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobCancel(ctx, held.ID, t0); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a cancel: woken for %v, want the ordered queue", qs)
	}
	held = retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if err := s.JobDelete(ctx, held.ID); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a delete: woken for %v, want the ordered queue", qs)
	}
	retrying("o")
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a fail: woken for %v, want the ordered queue", qs)
	}
	if n, err := s.JobDeleteMany(ctx, &store.JobBulkParams{Queue: "o", State: job.StateRetrying}); err != nil || n != 1 {
		t.Fatalf("delete the retrying jobs: %d, %v", n, err)
	}
	if qs := next(); !slices.Equal(qs, []string{"o"}) {
		t.Fatalf("after a bulk delete: woken for %v, want the ordered queue", qs)
	}
}
