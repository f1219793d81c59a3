package server

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

// expireUnfetched gives queue q a maximum wait of 200 ms and a dead-letter
// queue, enqueues a job nobody fetches, and checks that the server's
// sweep kills it into the dead-letter queue within about a second of its
// deadline, and that a fetch parked on the dead-letter queue wakes for
// the copy.
func expireUnfetched(t *testing.T, enqueueOn, fetchOn *bundle) {
	t.Helper()
	enqueueOn.must(200, "PUT", "/v1/queues/q/settings", obj{"dead_letter_queue": "q-dlq", "max_wait_ms": 200})
	id := enqueueOn.enqueue(obj{"queue": "q", "kind": "k"})
	start := time.Now()
	copies := fetchOn.fetch("q-dlq", 1, 5*time.Second)
	if len(copies) != 1 {
		t.Fatalf("no copy reached the dead-letter queue within 5s")
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Fatalf("the copy came %v after the enqueue, want about 200ms plus at most a second", d)
	}
	of, _ := copies[0]["dead_letter_of"].(obj)
	if of["queue"] != "q" || of["id"] != id {
		t.Fatalf("copy %v", copies[0])
	}
	j := fetchOn.get(id)
	errs, _ := j["errors"].([]any)
	if j["state"] != "dead" || len(errs) != 1 || errs[0].(obj)["message"] != "not started within max wait" {
		t.Fatalf("the job past its wait: %v", j)
	}
}

// A job past its maximum wait that no fetch meets is killed by the
// expirer, and a fetch parked on its dead-letter queue gets the copy.
func TestExpirerKillsJobsNoFetchMeets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	expireUnfetched(t, b, b)
}

// On PostgreSQL the elected node's expirer does it, for a job enqueued
// on another node, and the copy wakes a fetch parked on a third.
func TestExpirerRunsOnTheLeader(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 3)
	lead := leaderOf(t, ns, 10*time.Second)
	expireUnfetched(t, ns[(lead+1)%3], ns[(lead+2)%3])
}

// Settings hold over a restart, and a job that fails for good leaves its
// copy in the dead-letter queue.
func TestDeadLettersSurviveARestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(200, "PUT", "/v1/queues/orders/settings", obj{"dead_letter_queue": "orders-dlq"})
	b = b.restart()
	id := b.enqueue(obj{"queue": "orders", "kind": "k", "max_attempts": 1})
	j := b.fetch("orders", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(j), "error": "boom"})
	b = b.restart()
	copies := b.fetch("orders-dlq", 1, 0)
	if len(copies) != 1 || copies[0]["dead_letter_of"].(obj)["id"] != id {
		t.Fatalf("dead-letter queue after a restart: %v", copies)
	}
}

// expirerRuns waits until the expirer has made n passes from now on: it
// gives each of n jobs of a queue with a maximum wait of 1 ms the time to
// die of it, one after the other.
func (b *bundle) expirerRuns(n int) {
	b.t.Helper()
	b.must(200, "PUT", "/v1/queues/probe/settings", obj{"max_wait_ms": 1})
	for range n {
		id := b.enqueue(obj{"queue": "probe", "kind": "probe"})
		b.waitFor("the expirer to kill a probe job", 10*time.Second, func() bool { return b.get(id)["state"] == "dead" })
	}
}

// deadLetterRing makes the queues of ring each other's dead-letter queue
// with a maximum wait of 1 ms, enqueues one job of 1 KB into the first,
// with no worker, and checks that the job dies into one copy in the
// second queue and the copy dies in its turn, and that is all, however
// often the expirer runs.
func deadLetterRing(t *testing.T, b *bundle, ring ...string) {
	t.Helper()
	for i, q := range ring {
		b.must(200, "PUT", "/v1/queues/"+q+"/settings", obj{"dead_letter_queue": ring[(i+1)%len(ring)], "max_wait_ms": 1})
	}
	id := b.enqueue(obj{"queue": ring[0], "kind": "k", "payload": obj{"pad": strings.Repeat("x", 1000)}})
	b.waitFor("the copy to die", 10*time.Second, func() bool { return b.counts(ring[1])["dead"] > 0 })
	b.expirerRuns(3)
	for i, q := range ring {
		want := map[string]int{}
		if i < 2 {
			want["dead"] = 1
		}
		got := b.counts(q)
		maps.DeleteFunc(got, func(_ string, n int) bool { return n == 0 })
		if !maps.Equal(got, want) {
			t.Fatalf("ring %v: queue %s counts %v after the expirer ran on, want %v", ring, q, got, want)
		}
	}
	copies := objs(b.must(200, "GET", "/v1/jobs?queue="+ring[1], nil)["jobs"])
	if len(copies) != 1 {
		t.Fatalf("%s lists %d jobs, want the copy", ring[1], len(copies))
	}
	of, _ := copies[0]["dead_letter_of"].(obj)
	errs, _ := copies[0]["errors"].([]any)
	if of["id"] != id || copies[0]["state"] != "dead" || len(errs) != 2 {
		t.Fatalf("copy %v", copies[0])
	}
}

// Two queues that name each other as dead-letter queues, and three in a
// ring, with a maximum wait and no worker, end with the job and one copy.
func TestDeadLetterRingEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deadLetterRing(t, b, "ping", "pong")
	deadLetterRing(t, b, "r1", "r2", "r3")
}

// The same holds on PostgreSQL, where the elected node's expirer kills
// the jobs.
func TestDeadLetterRingEndsOnPostgres(t *testing.T) {
	t.Parallel()
	b := nodes(t, 1)[0]
	deadLetterRing(t, b, "ping", "pong")
	deadLetterRing(t, b, "r1", "r2", "r3")
}

// errorHistory fails a job many more times than its history keeps and
// checks that it answers its first error and its latest 20, with
// errors_dropped counting those between.
func errorHistory(t *testing.T, b *bundle) {
	t.Helper()
	const failures = 30
	id := b.enqueue(obj{"queue": "flaky", "kind": "k", "max_attempts": failures + 1})
	for i := 1; i <= failures; i++ {
		js := b.fetch("flaky", 1, 5*time.Second)
		if len(js) != 1 {
			t.Fatalf("fetch %d: no job within 5s", i)
		}
		b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(js[0]), "error": fmt.Sprintf("failure %d", i), "retry_after_ms": 1})
	}
	j := b.get(id)
	errs := objs(j["errors"])
	const kept = 20
	if len(errs) != kept+1 || j["errors_dropped"] != float64(failures-kept-1) {
		t.Fatalf("job after %d failures: %d errors, errors_dropped %v; want %d and %d", failures, len(errs), j["errors_dropped"], kept+1, failures-kept-1)
	}
	if errs[0]["message"] != "failure 1" || errs[1]["message"] != fmt.Sprintf("failure %d", failures-kept+1) ||
		errs[kept]["message"] != fmt.Sprintf("failure %d", failures) {
		t.Fatalf("errors %v, want the first and the latest %d", errs, kept)
	}
}

// A job's error history is bounded, and says how many errors it dropped.
func TestErrorHistoryIsBounded(t *testing.T) {
	t.Parallel()
	errorHistory(t, setup(t))
}

func TestErrorHistoryIsBoundedOnPostgres(t *testing.T) {
	t.Parallel()
	errorHistory(t, nodes(t, 1)[0])
}
