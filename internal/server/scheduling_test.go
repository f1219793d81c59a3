package server

import (
	"sort"
	"testing"
	"time"
)

func TestPriorityThenEnqueueOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	low1 := b.enqueue(obj{"queue": "p", "kind": "k", "priority": -5})
	mid1 := b.enqueue(obj{"queue": "p", "kind": "k"})
	high := b.enqueue(obj{"queue": "p", "kind": "k", "priority": 10})
	mid2 := b.enqueue(obj{"queue": "p", "kind": "k"})
	low2 := b.enqueue(obj{"queue": "p", "kind": "k", "priority": -5})
	want = []string{high, mid1, mid2, low1, low2}
	var got []string
	for _, j := range b.fetch("p", 10, 0) {
		got = append(got, j["id"].(string))
	}
	if len(got) != len(want) {
		t.Fatalf("fetched %d jobs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fetch order %v, want %v", got, want)
		}
	}
}

func TestDelayedJobsWaitForTheirTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const delay = 400 * time.Millisecond
	enqueuedAt := time.Now()
	later := b.enqueue(obj{"queue": "d", "kind": "k", "delay_ms": delay.Milliseconds()})
	if j := b.get(later); j["state"] != "scheduled" {
		t.Fatalf("delayed job state %v", j["state"])
	}
	runAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	future := b.enqueue(obj{"queue": "d", "kind": "k", "run_at": runAt})
	now := b.enqueue(obj{"queue": "d", "kind": "k"})
	first := b.fetch("d", 10, 0)
	if len(first) != 1 || first[0]["id"] != now {
		t.Fatalf("before the delay only the immediate job may run: %v", first)
	}
	// A parked fetch gets the delayed job as soon as it is due.
	due := b.fetch("d", 10, 5*time.Second)
	took := time.Since(enqueuedAt)
	if len(due) != 1 || due[0]["id"] != later {
		t.Fatalf("after the delay: %v", due)
	}
	if took < delay-20*time.Millisecond || took > delay+500*time.Millisecond {
		t.Fatalf("delayed job ran %v after enqueue, want about %v", took, delay)
	}
	if j := b.get(future); j["state"] != "scheduled" {
		t.Fatalf("job an hour away is %v", j["state"])
	}
}

func TestLongPollWakesOnEnqueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type result struct {
		jobs []obj
		at   time.Time
	}
	got := make(chan result, 1)
	go func() {
		jobs := b.fetch("lp", 1, 30*time.Second)
		got <- result{jobs, time.Now()}
	}()
	b.waitFor("the fetch to park", 5*time.Second, func() bool { return b.srv.Engine().Waiting() == 1 })
	enqueued := time.Now()
	id := b.enqueue(obj{"queue": "lp", "kind": "k"})
	select {
	case r := <-got:
		if len(r.jobs) != 1 || r.jobs[0]["id"] != id {
			t.Fatalf("woken fetch got %v", r.jobs)
		}
		if lag := r.at.Sub(enqueued); lag > 200*time.Millisecond {
			t.Fatalf("parked fetch answered %v after the enqueue began", lag)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("parked fetch was not woken by the enqueue")
	}
}

func TestLongPollTimesOutEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Now()
	if jobs := b.fetch("empty", 5, 300*time.Millisecond); len(jobs) != 0 {
		t.Fatalf("empty queue gave %v", jobs)
	}
	if took := time.Since(start); took < 290*time.Millisecond || took > 2*time.Second {
		t.Fatalf("wait of 300ms took %v", took)
	}
}

func TestPausedQueueHandsOutNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "pz", "kind": "k"})
	out := b.must(200, "POST", "/v1/queues/pz/pause", nil)
	if out["paused"] != true {
		t.Fatalf("pause: %v", out)
	}
	if jobs := b.fetch("pz", 1, 100*time.Millisecond); len(jobs) != 0 {
		t.Fatalf("paused queue handed out %v", jobs)
	}
	got := make(chan []obj, 1)
	go func() { got <- b.fetch("pz", 1, 10*time.Second) }()
	b.waitFor("the fetch to park", 5*time.Second, func() bool { return b.srv.Engine().Waiting() == 1 })
	b.must(200, "POST", "/v1/queues/pz/resume", nil)
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0]["id"] != id {
			t.Fatalf("after resume: %v", jobs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("resume did not wake the parked fetch")
	}
}

func TestFetchAcrossQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.enqueue(obj{"queue": "qa", "kind": "k"})
	c := b.enqueue(obj{"queue": "qb", "kind": "k", "priority": 5})
	out := b.must(200, "POST", "/v1/fetch", obj{"queues": []string{"qa", "qb"}, "max": 5})
	jobs := objs(out["jobs"])
	if len(jobs) != 2 || jobs[0]["id"] != c || jobs[1]["id"] != a {
		t.Fatalf("fetch across queues: %v", jobs)
	}
}

// Many concurrent workers over HTTP: every job is handed out exactly once.
func TestConcurrentWorkersNoDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const total = 600
	jobs := make([]obj, total)
	for i := range jobs {
		jobs[i] = obj{"queue": "cw", "kind": "k", "payload": i}
	}
	b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
	seen := make(chan string, total*2)
	done := make(chan struct{})
	for w := 0; w < 8; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				got := b.fetch("cw", 7, 0)
				if len(got) == 0 {
					return
				}
				items := make([]obj, len(got))
				for i, j := range got {
					seen <- j["id"].(string)
					items[i] = obj{"id": j["id"], "token": token(j)}
				}
				b.must(200, "POST", "/v1/jobs/ack", obj{"items": items})
			}
		}()
	}
	for w := 0; w < 8; w++ {
		<-done
	}
	close(seen)
	var ids []string
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("job %s handed out twice", ids[i])
		}
	}
	if len(ids) != total {
		t.Fatalf("handed out %d jobs, want %d", len(ids), total)
	}
	if c := b.counts("cw"); c["completed"] != total {
		t.Fatalf("counts: %v", c)
	}
}
