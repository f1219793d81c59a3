package server

import (
	"net/http"
	"net/url"
	"testing"
)

func TestCancelQueuedAndActiveJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	queued := b.enqueue(obj{"queue": "c", "kind": "k", "delay_ms": 60000})
	if j := b.must(200, "POST", "/v1/jobs/"+queued+"/cancel", nil); j["state"] != "cancelled" {
		t.Fatalf("cancel of a scheduled job: %v", j)
	}
	active := b.enqueue(obj{"queue": "c", "kind": "k"})
	j := b.fetch("c", 1, 0)[0]
	if out := b.must(200, "POST", "/v1/jobs/"+active+"/cancel", nil); out["state"] != "active" || out["cancel_requested"] != true {
		t.Fatalf("cancel of an active job: %v", out)
	}
	res := objs(b.must(200, "POST", "/v1/jobs/extend", obj{"items": []obj{{"id": active, "token": token(j)}}})["results"])[0]
	if res["cancel_requested"] != true {
		t.Fatalf("heartbeat did not tell the worker: %v", res)
	}
	if out := b.must(200, "POST", "/v1/jobs/"+active+"/ack", obj{"token": token(j)}); out["state"] != "cancelled" {
		t.Fatalf("ack of a cancelled job: %v", out)
	}
	status, out := b.call("POST", "/v1/jobs/"+active+"/cancel", nil)
	if status != 200 || out["state"] != "cancelled" {
		t.Fatalf("second cancel: %d %v", status, out)
	}
	done := b.enqueue(obj{"queue": "c2", "kind": "k"})
	j = b.fetch("c2", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+done+"/ack", obj{"token": token(j)})
	status, out = b.call("POST", "/v1/jobs/"+done+"/cancel", nil)
	if status != http.StatusConflict || errorCode(out) != "invalid_state" {
		t.Fatalf("cancel of a completed job: %d %v", status, out)
	}
}

func TestRetryDeadJobNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "r", "kind": "k", "max_attempts": 1})
	j := b.fetch("r", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(j), "error": "x"})
	out := b.must(200, "POST", "/v1/jobs/"+id+"/retry", nil)
	if out["state"] != "available" || out["attempt"].(float64) != 0 {
		t.Fatalf("retried job: %v", out)
	}
	again := b.fetch("r", 1, 0)
	if len(again) != 1 || again[0]["id"] != id || token(again[0]) <= token(j) {
		t.Fatalf("retried job not handed out with a new token: %v", again)
	}
	status, resp := b.call("POST", "/v1/jobs/"+id+"/retry", nil)
	if status != http.StatusConflict || errorCode(resp) != "invalid_state" {
		t.Fatalf("retry of an active job: %d %v", status, resp)
	}
}

func TestDeleteJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.enqueue(obj{"queue": "del", "kind": "k"})
	b.must(http.StatusNoContent, "DELETE", "/v1/jobs/"+id, nil)
	if status, out := b.call("GET", "/v1/jobs/"+id, nil); status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Fatalf("deleted job: %d %v", status, out)
	}
	active := b.enqueue(obj{"queue": "del", "kind": "k"})
	b.fetch("del", 1, 0)
	if status, out := b.call("DELETE", "/v1/jobs/"+active, nil); status != http.StatusConflict || errorCode(out) != "invalid_state" {
		t.Fatalf("delete of an active job: %d %v", status, out)
	}
	if status, _ := b.call("DELETE", "/v1/jobs/nosuch", nil); status != http.StatusNotFound {
		t.Fatalf("delete of an unknown job: %d", status)
	}
}

func TestPurgeAndBulkOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := 0; i < 5; i++ {
		b.enqueue(obj{"queue": "bulk", "kind": "k", "max_attempts": 1})
	}
	b.enqueue(obj{"queue": "bulk", "kind": "k", "delay_ms": 60000})
	for _, j := range b.fetch("bulk", 3, 0) {
		b.must(200, "POST", "/v1/jobs/"+j["id"].(string)+"/fail", obj{"token": token(j), "error": "x"})
	}
	if c := b.counts("bulk"); c["dead"] != 3 || c["available"] != 2 || c["scheduled"] != 1 {
		t.Fatalf("counts before: %v", c)
	}
	if out := b.must(200, "POST", "/v1/queues/bulk/purge", nil); out["count"].(float64) != 2 {
		t.Fatalf("purge: %v", out)
	}
	if out := b.must(200, "POST", "/v1/queues/bulk/retry", obj{"state": "dead"}); out["count"].(float64) != 3 {
		t.Fatalf("bulk retry: %v", out)
	}
	if c := b.counts("bulk"); c["dead"] != 0 || c["available"] != 3 || c["scheduled"] != 1 {
		t.Fatalf("counts after retry: %v", c)
	}
	if out := b.must(200, "POST", "/v1/queues/bulk/delete", obj{"state": "available"}); out["count"].(float64) != 3 {
		t.Fatalf("bulk delete: %v", out)
	}
	if c := b.counts("bulk"); c["available"] != 0 || c["scheduled"] != 1 {
		t.Fatalf("counts after delete: %v", c)
	}
	status, out := b.call("POST", "/v1/queues/bulk/delete", obj{"state": "active"})
	if status != http.StatusBadRequest || out["error"].(obj)["field"] != "state" {
		t.Fatalf("bulk delete of active jobs: %d %v", status, out)
	}
}

func TestListJobsWithCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jobs := make([]obj, 25)
	for i := range jobs {
		jobs[i] = obj{"queue": "list", "kind": "k", "payload": i}
	}
	want := objs(b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})["jobs"])
	b.enqueue(obj{"queue": "other", "kind": "k"})
	var got []string
	cursor := ""
	for pages := 0; pages < 10; pages++ {
		q := url.Values{"queue": {"list"}, "state": {"available"}, "limit": {"10"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		out := b.must(200, "GET", "/v1/jobs?"+q.Encode(), nil)
		for _, j := range objs(out["jobs"]) {
			got = append(got, j["id"].(string))
		}
		next, _ := out["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d jobs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i]["id"] {
			t.Fatalf("listing order differs at %d: %s vs %v", i, got[i], want[i]["id"])
		}
	}
	status, out := b.call("GET", "/v1/jobs?state=bogus", nil)
	if status != http.StatusBadRequest || out["error"].(obj)["field"] != "state" {
		t.Fatalf("bad state filter: %d %v", status, out)
	}
}

func TestQueueListing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(obj{"queue": "alpha", "kind": "k"})
	b.must(200, "POST", "/v1/queues/beta/pause", nil)
	out := b.must(200, "GET", "/v1/queues", nil)
	qs := objs(out["queues"])
	if len(qs) != 2 || qs[0]["name"] != "alpha" || qs[1]["name"] != "beta" || qs[1]["paused"] != true {
		t.Fatalf("queues: %v", qs)
	}
	counts := qs[0]["counts"].(obj)
	for _, s := range []string{"scheduled", "available", "active", "retrying", "completed", "dead", "cancelled"} {
		if _, ok := counts[s]; !ok {
			t.Fatalf("counts lack %s: %v", s, counts)
		}
	}
	if status, _ := b.call("GET", "/v1/queues/nosuch", nil); status != http.StatusNotFound {
		t.Fatalf("unknown queue: %d", status)
	}
}
