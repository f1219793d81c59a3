package server

import (
	"net/http"
	"testing"
	"time"
)

// A transaction over HTTP on PostgreSQL, on one node of two: refused
// whole for a stale token, then applied whole, and the fetch parked on the
// other node for its queue wakes at once.
func TestSharedStoreTransaction(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 2)
	a, b := ns[0], ns[1]
	first := a.enqueue(obj{"queue": "work", "kind": "k"})
	second := a.enqueue(obj{"queue": "work", "kind": "k"})
	leased := b.fetch("work", 2, 0)
	if len(leased) != 2 {
		t.Fatalf("fetched %d jobs, want 2", len(leased))
	}
	token := func(j obj) float64 { return j["lease"].(obj)["token"].(float64) }
	ack, fail := leased[0], leased[1]

	status, out := a.call("POST", "/v1/transactions", obj{
		"ack":     []obj{{"id": ack["id"], "token": token(ack)}},
		"fail":    []obj{{"id": fail["id"], "token": token(fail) + 1, "error": "x"}},
		"enqueue": []obj{{"id": "follow-up", "queue": "next", "kind": "k"}},
	})
	if e, _ := out["error"].(obj); status != http.StatusConflict || e["code"] != "lease_lost" || e["field"] != "fail[0].token" {
		t.Fatalf("a stale token: %d %v, want 409 lease_lost on fail[0].token", status, out)
	}
	if c := a.counts("work"); c["active"] != 2 {
		t.Fatalf("counts after a refused transaction: %v", c)
	}
	if status, _ := b.call("GET", "/v1/jobs/follow-up", nil); status != http.StatusNotFound {
		t.Fatalf("the job of a refused transaction: %d, want 404", status)
	}

	got := make(chan []obj, 1)
	go func() { got <- b.fetch("next", 1, 10*time.Second) }()
	b.waitFor("the fetch to park", 5*time.Second, func() bool { return b.srv.Engine().Waiting() == 1 })
	start := time.Now()
	out = a.must(http.StatusOK, "POST", "/v1/transactions", obj{
		"ack":     []obj{{"id": ack["id"], "token": token(ack), "result": obj{"ok": true}}},
		"fail":    []obj{{"id": fail["id"], "token": token(fail), "error": "x", "no_retry": true}},
		"enqueue": []obj{{"id": "follow-up", "queue": "next", "kind": "k"}},
	})
	if objs(out["acked"])[0]["state"] != "completed" || objs(out["failed"])[0]["state"] != "dead" || objs(out["jobs"])[0]["id"] != "follow-up" {
		t.Fatalf("transaction: %v", out)
	}
	select {
	case jobs := <-got:
		if len(jobs) != 1 || jobs[0]["id"] != "follow-up" {
			t.Fatalf("the parked fetch got %v, want the enqueued job", jobs)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("the parked fetch woke %v after the transaction on the other node", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked fetch never woke")
	}
	for _, id := range []string{first, second} {
		if s := b.get(id)["state"]; s != "completed" && s != "dead" {
			t.Fatalf("job %s is %v after the transaction", id, s)
		}
	}
}
