package server

import (
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
