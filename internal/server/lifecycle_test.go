package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestEnqueueFetchAckRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "emails", "kind": "welcome", "payload": obj{"user": 42}, "tags": []string{"signup"}})
	if j := b.get(id); j["state"] != "available" || j["attempt"].(float64) != 0 {
		t.Fatalf("new job: %v", j)
	}
	jobs := b.fetch("emails", 10, 0)
	if len(jobs) != 1 || jobs[0]["id"] != id {
		t.Fatalf("fetch: %v", jobs)
	}
	j := jobs[0]
	if j["state"] != "active" || j["attempt"].(float64) != 1 || j["payload"].(obj)["user"].(float64) != 42 {
		t.Fatalf("fetched job: %v", j)
	}
	out := b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(j), "result": obj{"sent": true}})
	if out["state"] != "completed" {
		t.Fatalf("ack: %v", out)
	}
	done := b.get(id)
	if done["state"] != "completed" || done["result"].(obj)["sent"] != true || done["finished_at"] == nil {
		t.Fatalf("acked job: %v", done)
	}
	if _, leased := done["lease"]; leased {
		t.Fatalf("completed job still shows a lease: %v", done)
	}
	if c := b.counts("emails"); c["completed"] != 1 || c["active"] != 0 || c["available"] != 0 {
		t.Fatalf("counts: %v", c)
	}
}

func TestBatchEnqueueIsAtomic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	status, out := b.call("POST", "/v1/jobs/batch", obj{"jobs": []obj{
		{"queue": "batch", "kind": "a"}, {"queue": "batch", "kind": "b"}, {"queue": "batch"},
	}})
	if status != http.StatusBadRequest || errorCode(out) != "invalid_argument" || out["error"].(obj)["field"] != "jobs[2].kind" {
		t.Fatalf("invalid batch: %d %v", status, out)
	}
	if status, _ := b.call("GET", "/v1/queues/batch", nil); status != http.StatusNotFound {
		t.Fatalf("a rejected batch left a queue behind: status %d", status)
	}
	jobs := make([]obj, 1000)
	for i := range jobs {
		jobs[i] = obj{"queue": "batch", "kind": "k", "payload": i}
	}
	out = b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
	if got := len(objs(out["jobs"])); got != 1000 {
		t.Fatalf("batch answered %d results", got)
	}
	if c := b.counts("batch"); c["available"] != 1000 {
		t.Fatalf("counts after batch: %v", c)
	}
}

func TestExpiredLeaseIsRescued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const lease = 300 * time.Millisecond
	id := b.enqueue(obj{"queue": "rescue", "kind": "slow", "lease_ms": lease.Milliseconds(), "max_attempts": 5})
	first := b.fetch("rescue", 1, 0)[0]
	fetchedAt := time.Now()
	// A long poll wakes when the rescuer makes the job available again.
	again := b.fetch("rescue", 1, 5*time.Second)
	took := time.Since(fetchedAt)
	if len(again) != 1 || again[0]["id"] != id {
		t.Fatalf("job not handed out again after its lease ran out: %v", again)
	}
	if took > lease+time.Second {
		t.Fatalf("rescued after %v, want within lease + 1s (%v)", took, lease+time.Second)
	}
	second := again[0]
	if second["attempt"].(float64) != 2 || token(second) <= token(first) {
		t.Fatalf("second hand-out: attempt %v token %v (first token %v)", second["attempt"], token(second), token(first))
	}
	errs := second["errors"].([]any)
	if len(errs) != 1 || errs[0].(obj)["message"] != "lease expired" {
		t.Fatalf("errors after rescue: %v", errs)
	}
	// The first worker's late ack is refused and changes nothing.
	status, out := b.call("POST", "/v1/jobs/"+id+"/ack", obj{"token": token(first)})
	if status != http.StatusConflict || errorCode(out) != "lease_lost" {
		t.Fatalf("late ack: %d %v", status, out)
	}
	b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(second), "result": "second"})
	if j := b.get(id); j["state"] != "completed" || j["result"] != "second" {
		t.Fatalf("job after second ack: %v", j)
	}
}

func TestStaleTokenChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "stale", "kind": "k"})
	j := b.fetch("stale", 1, 0)[0]
	before := b.get(id)
	stale := token(j) + 1
	for _, op := range []struct {
		path string
		body obj
	}{
		{"/ack", obj{"token": stale, "result": 1}},
		{"/fail", obj{"token": stale, "error": "boom"}},
		{"/extend", obj{"token": stale, "lease_ms": 60000}},
		{"/progress", obj{"token": stale, "progress": 50}},
	} {
		status, out := b.call("POST", "/v1/jobs/"+id+op.path, op.body)
		if status != http.StatusConflict || errorCode(out) != "lease_lost" {
			t.Errorf("%s with a stale token: %d %v", op.path, status, out)
		}
	}
	after := b.get(id)
	for _, field := range []string{"state", "attempt", "lease", "errors", "progress", "result"} {
		if fmt.Sprint(before[field]) != fmt.Sprint(after[field]) {
			t.Errorf("%s changed: %v → %v", field, before[field], after[field])
		}
	}
	status, out := b.call("POST", "/v1/jobs/nosuchjob/ack", obj{"token": 1})
	if status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Fatalf("ack of unknown job: %d %v", status, out)
	}
}

func TestFailRetriesWithBackoffThenDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const base = 100 * time.Millisecond
	id := b.enqueue(obj{"queue": "flaky", "kind": "k", "max_attempts": 3,
		"backoff": obj{"type": "fixed", "base_ms": base.Milliseconds(), "jitter": 0}})
	var failedAt, retryAt time.Time
	for attempt := 1; attempt <= 3; attempt++ {
		jobs := b.fetch("flaky", 1, 5*time.Second)
		if len(jobs) != 1 {
			t.Fatalf("attempt %d: no job handed out", attempt)
		}
		// Both times are the server's: the hand-out may not come before
		// the run time the failure set.
		if started := parseTime(t, jobs[0]["started_at"]); attempt > 1 && started.Before(retryAt) {
			t.Fatalf("attempt %d started at %v, before its retry time %v", attempt, started, retryAt)
		}
		if got := jobs[0]["attempt"].(float64); int(got) != attempt {
			t.Fatalf("attempt field %v, want %d", got, attempt)
		}
		out := b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(jobs[0]), "error": fmt.Sprintf("boom %d", attempt)})
		failedAt = time.Now()
		want := "retrying"
		if attempt == 3 {
			want = "dead"
		}
		if out["state"] != want {
			t.Fatalf("attempt %d: state %v, want %s", attempt, out["state"], want)
		}
		if want == "retrying" {
			retryAt = parseTime(t, out["run_at"])
			if d := retryAt.Sub(failedAt); d < base-50*time.Millisecond || d > base+50*time.Millisecond {
				t.Fatalf("retry scheduled %v ahead, want about %v", d, base)
			}
		}
	}
	j := b.get(id)
	errs := j["errors"].([]any)
	if j["state"] != "dead" || len(errs) != 3 || errs[2].(obj)["message"] != "boom 3" || errs[2].(obj)["attempt"].(float64) != 3 {
		t.Fatalf("dead job: %v", j)
	}
	if extra := b.fetch("flaky", 1, 200*time.Millisecond); len(extra) != 0 {
		t.Fatalf("dead job handed out again: %v", extra)
	}
}

func TestFailWithoutRetryGoesDead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "q", "kind": "k", "max_attempts": 10})
	j := b.fetch("q", 1, 0)[0]
	out := b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(j), "error": "bad input", "no_retry": true})
	if out["state"] != "dead" {
		t.Fatalf("fail with no_retry: %v", out)
	}
}

func TestUniqueKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.enqueue(obj{"queue": "u", "kind": "k", "unique_key": "report-7"})
	out := b.must(200, "POST", "/v1/jobs", obj{"queue": "u", "kind": "k", "unique_key": "report-7"})
	if out["id"] != first || out["duplicate"] != true {
		t.Fatalf("duplicate enqueue: %v", out)
	}
	if c := b.counts("u"); c["available"] != 1 {
		t.Fatalf("duplicate created a job: %v", c)
	}
	// The same key in another queue is a different job.
	if other := b.enqueue(obj{"queue": "u2", "kind": "k", "unique_key": "report-7"}); other == first {
		t.Fatal("unique key leaked across queues")
	}
	// Without a window, uniqueness lasts while the job is pending.
	j := b.fetch("u", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+first+"/ack", obj{"token": token(j)})
	if again := b.enqueue(obj{"queue": "u", "kind": "k", "unique_key": "report-7"}); again == first {
		t.Fatal("finished job still blocks its unique key without a window")
	}
	// With a window, uniqueness outlives completion.
	w := b.enqueue(obj{"queue": "w", "kind": "k", "unique_key": "daily", "unique_for_ms": 3600000})
	j = b.fetch("w", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+w+"/ack", obj{"token": token(j)})
	out = b.must(200, "POST", "/v1/jobs", obj{"queue": "w", "kind": "k", "unique_key": "daily", "unique_for_ms": 3600000})
	if out["id"] != w || out["duplicate"] != true {
		t.Fatalf("enqueue inside the unique window: %v", out)
	}
}

func TestClientChosenIDIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"id": "order-1001", "queue": "orders", "kind": "charge", "payload": 1})
	if id != "order-1001" {
		t.Fatalf("id = %q", id)
	}
	out := b.must(200, "POST", "/v1/jobs", obj{"id": "order-1001", "queue": "orders", "kind": "charge", "payload": 2})
	if out["duplicate"] != true || out["id"] != "order-1001" {
		t.Fatalf("second enqueue with the same id: %v", out)
	}
	if j := b.get("order-1001"); j["payload"].(float64) != 1 {
		t.Fatalf("duplicate overwrote the job: %v", j)
	}
	if c := b.counts("orders"); c["available"] != 1 {
		t.Fatalf("counts: %v", c)
	}
}

func TestExtendAndProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "long", "kind": "k", "lease_ms": 400})
	j := b.fetch("long", 1, 0)[0]
	// Heartbeat past the original lease: the job is not rescued.
	for i := 0; i < 4; i++ {
		time.Sleep(200 * time.Millisecond)
		out := b.must(200, "POST", "/v1/jobs/extend", obj{"items": []obj{{"id": id, "token": token(j), "lease_ms": 400}}})
		res := objs(out["results"])[0]
		if res["error"] != nil || res["cancel_requested"] != false {
			t.Fatalf("heartbeat %d: %v", i, res)
		}
	}
	b.must(200, "POST", "/v1/jobs/"+id+"/progress", obj{"token": token(j), "progress": obj{"pct": 80}})
	got := b.get(id)
	if got["state"] != "active" || got["attempt"].(float64) != 1 || got["progress"].(obj)["pct"].(float64) != 80 {
		t.Fatalf("job after heartbeats: %v", got)
	}
}

func TestBatchAckAppliesEachItem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := 0; i < 3; i++ {
		b.enqueue(obj{"queue": "ba", "kind": "k"})
	}
	jobs := b.fetch("ba", 3, 0)
	items := []obj{
		{"id": jobs[0]["id"], "token": token(jobs[0])},
		{"id": jobs[1]["id"], "token": token(jobs[1]) + 5},
		{"id": jobs[2]["id"], "token": token(jobs[2]), "result": "ok"},
	}
	results := objs(b.must(200, "POST", "/v1/jobs/ack", obj{"items": items})["results"])
	if results[0]["state"] != "completed" || results[2]["state"] != "completed" {
		t.Fatalf("valid items: %v", results)
	}
	if errorCode(results[1]) != "lease_lost" {
		t.Fatalf("stale item: %v", results[1])
	}
	if c := b.counts("ba"); c["completed"] != 2 || c["active"] != 1 {
		t.Fatalf("counts: %v", c)
	}
}
