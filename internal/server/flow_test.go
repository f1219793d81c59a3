package server

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"
)

// enqueueGroup enqueues n jobs of group g into queue q in batches.
func (b *bundle) enqueueGroup(q, g string, n int) {
	b.t.Helper()
	for done := 0; done < n; {
		size := min(1000, n-done)
		jobs := make([]obj, size)
		for i := range jobs {
			jobs[i] = obj{"queue": q, "kind": "k", "group": g}
		}
		b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
		done += size
	}
}

// One group with 100,000 available jobs, enqueued first, and 100 groups
// with 10 each: every small group's first job starts within the first 200
// claims, on both stores.
func TestFairnessOfABigGroupAndSmallOnes(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, change...)
			b.enqueueGroup("fair", "big", 100_000)
			for g := range 100 {
				b.enqueueGroup("fair", fmt.Sprintf("small-%03d", g), 10)
			}
			first := map[string]int{} // group → the claim that started its first job
			for claim := 1; claim <= 200; claim++ {
				jobs := b.fetch("fair", 1, 0)
				if len(jobs) != 1 {
					t.Fatalf("claim %d: %d jobs", claim, len(jobs))
				}
				g := jobs[0]["group"].(string)
				if _, ok := first[g]; !ok {
					first[g] = claim
				}
			}
			for g := range 100 {
				name := fmt.Sprintf("small-%03d", g)
				if _, ok := first[name]; !ok {
					t.Fatalf("group %s got no job in the first 200 claims", name)
				}
			}
			last := 0
			for _, c := range first {
				last = max(last, c)
			}
			t.Logf("every one of the 101 groups started its first job by claim %d", last)
		})
	}
}

// A cap of N active jobs holds for workers fetching at once: counted from
// each job's hand-out to its ack, never more than N at a time.
func TestCapHoldsForConcurrentWorkers(t *testing.T) {
	t.Parallel()
	for name, store := range stores() {
		t.Run(name, func(t *testing.T) {
			change := store(t)
			t.Parallel()
			b := setup(t, change...)
			const capN, jobs = 3, 300
			b.must(200, "PUT", "/v1/queues/capped/limits", obj{"max_active": capN})
			for g := range 10 {
				b.enqueueGroup("capped", fmt.Sprintf("g%d", g), jobs/10)
			}
			intervals := runWorkers(t, []string{b.base}, "capped", 6, jobs)
			if peak := peakOverlap(intervals); peak > capN {
				t.Fatalf("%d jobs active at once under a cap of %d", peak, capN)
			}
		})
	}
}

// Three nodes on one PostgreSQL database, with workers on each: a queue's
// cap of N and a group's cap of 1 hold across them, checked from every
// job's interval between its hand-out and its ack.
func TestCapsHoldAcrossNodes(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 3)
	const capN, groups, jobs = 4, 6, 240
	ns[0].must(200, "PUT", "/v1/queues/shared/limits", obj{"max_active": capN, "group_max_active": 1})
	for g := range groups {
		ns[g%3].enqueueGroup("shared", fmt.Sprintf("g%d", g), jobs/groups)
	}
	bases := []string{ns[0].base, ns[1].base, ns[2].base}
	intervals := runWorkers(t, bases, "shared", 9, jobs)
	if peak := peakOverlap(intervals); peak > capN {
		t.Fatalf("%d jobs active at once across 3 nodes under a cap of %d", peak, capN)
	}
	byGroup := map[string][]interval{}
	for _, iv := range intervals {
		byGroup[iv.group] = append(byGroup[iv.group], iv)
	}
	if len(byGroup) != groups {
		t.Fatalf("jobs of %d groups ran, want %d", len(byGroup), groups)
	}
	for g, ivs := range byGroup {
		if peak := peakOverlap(ivs); peak > 1 {
			t.Fatalf("group %s had %d jobs active at once under a group cap of 1", g, peak)
		}
	}
	if peak := peakOverlap(intervals); peak < 2 {
		t.Fatalf("at most %d job active at once: the workers did not run side by side", peak)
	}
}

// interval is one job's time held by a worker: from the answer of the
// fetch that handed it out to the ack sent for it.
type interval struct {
	from, to time.Time
	group    string
}

// runWorkers runs n workers, the i-th on bases[i%len(bases)], fetching one
// job at a time from queue until total jobs are acked, and returns each
// job's interval. The workers give up when no job is acked for
// workerStall, so that a slow machine makes them slower, not failed.
func runWorkers(t *testing.T, bases []string, queue string, n, total int) []interval {
	t.Helper()
	const workerStall = 30 * time.Second
	var mu sync.Mutex
	var out []interval
	progress := time.Now() // of the latest ack, under mu
	var wg sync.WaitGroup
	for i := range n {
		base := bases[i%len(bases)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done, stalled := len(out) >= total, time.Since(progress) > workerStall
				mu.Unlock()
				if done || stalled {
					return
				}
				status, body, err := post(base, "/v1/fetch", obj{"queues": []string{queue}, "max": 1, "wait_ms": 200})
				if err != nil || status != http.StatusOK {
					t.Errorf("fetch: %d %v", status, err)
					return
				}
				for _, j := range objs(body["jobs"]) {
					from := time.Now()
					time.Sleep(2 * time.Millisecond)
					to := time.Now()
					status, _, err := post(base, "/v1/jobs/"+j["id"].(string)+"/ack", obj{"token": token(j)})
					if err != nil || status != http.StatusOK {
						t.Errorf("ack: %d %v", status, err)
						return
					}
					group, _ := j["group"].(string)
					mu.Lock()
					out, progress = append(out, interval{from, to, group}), time.Now()
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(out) < total {
		t.Fatalf("%d of %d jobs acked (the workers stop at an error, or when none is acked for %v)", len(out), total, workerStall)
	}
	return out
}

// peakOverlap is the most intervals that overlap at one moment.
func peakOverlap(ivs []interval) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, iv := range ivs {
		edges = append(edges, edge{iv.from, 1}, edge{iv.to, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at.Equal(edges[j].at) {
			return edges[i].delta < edges[j].delta
		}
		return edges[i].at.Before(edges[j].at)
	})
	peak, cur := 0, 0
	for _, e := range edges {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
