package server

import (
	"net/http"
	"testing"
)

// ids returns the ids of jobs, in order.
func ids(jobs []obj) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i], _ = j["id"].(string)
	}
	return out
}

// A memory job and a full one live side by side: both are listed (the
// durable one first) and fetched (the memory one first); a graceful
// restart loses the memory job and keeps the full one.
func TestMemoryJobsAreLostOnRestart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	full := b.enqueue(obj{"queue": "tiers", "kind": "k", "payload": obj{"keep": true}})
	memory := b.enqueue(obj{"queue": "tiers", "kind": "k", "durability": "memory"})
	if got := b.get(full)["durability"]; got != "full" {
		t.Fatalf("job enqueued without a level: durability %v, want full", got)
	}
	if got := b.get(memory)["durability"]; got != "memory" {
		t.Fatalf("job enqueued as memory: durability %v", got)
	}

	listed := objs(b.must(200, "GET", "/v1/jobs?queue=tiers", nil)["jobs"])
	if got := ids(listed); len(got) != 2 || got[0] != full || got[1] != memory {
		t.Fatalf("listing %v, want [%s %s]: durable jobs, then memory ones", got, full, memory)
	}
	fetched := b.fetch("tiers", 2, 0)
	if got := ids(fetched); len(got) != 2 || got[0] != memory || got[1] != full {
		t.Fatalf("fetch handed out %v, want [%s %s]: memory jobs first", got, memory, full)
	}
	for _, j := range fetched {
		if j["state"] != "active" || j["durability"] == nil {
			t.Fatalf("fetched job %v", j)
		}
	}
	if c := b.counts("tiers"); c["active"] != 2 {
		t.Fatalf("counts %v, want both jobs active", c)
	}

	b = b.restart()

	if status, out := b.call("GET", "/v1/jobs/"+memory, nil); status != http.StatusNotFound || errorCode(out) != "not_found" {
		t.Fatalf("memory job after a restart: %d %v, want 404 not_found", status, out)
	}
	kept := b.get(full)
	if kept["durability"] != "full" || kept["payload"].(obj)["keep"] != true {
		t.Fatalf("full job after a restart: %v", kept)
	}
	listed = objs(b.must(200, "GET", "/v1/jobs?queue=tiers", nil)["jobs"])
	if got := ids(listed); len(got) != 1 || got[0] != full {
		t.Fatalf("listing after a restart %v, want only %s", got, full)
	}
	if c := b.counts("tiers"); c["active"] != 1 {
		t.Fatalf("counts after a restart %v, want the full job alone", c)
	}
}

// A queue set to process gives the jobs enqueued later that level and
// leaves the earlier ones as they were; a job that names its level keeps
// it. The queue's level outlives a restart.
func TestQueueDurability(t *testing.T) {
	t.Parallel()
	b := setup(t)
	earlier := b.enqueue(obj{"queue": "relaxed", "kind": "k"})
	if q := b.must(200, "GET", "/v1/queues/relaxed", nil); q["durability"] != "full" {
		t.Fatalf("new queue: %v, want durability full", q)
	}
	q := b.must(200, "POST", "/v1/queues/relaxed/durability", obj{"durability": "process"})
	if q["name"] != "relaxed" || q["durability"] != "process" || q["paused"] != false {
		t.Fatalf("set queue durability: %v", q)
	}
	later := b.enqueue(obj{"queue": "relaxed", "kind": "k"})
	named := b.enqueue(obj{"queue": "relaxed", "kind": "k", "durability": "full"})
	for id, want := range map[string]string{earlier: "full", later: "process", named: "full"} {
		if got := b.get(id)["durability"]; got != want {
			t.Errorf("job %s: durability %v, want %s", id, got, want)
		}
	}

	// An unknown queue is created, as pause does.
	if q := b.must(200, "POST", "/v1/queues/untouched/durability", obj{"durability": "memory"}); q["durability"] != "memory" {
		t.Fatalf("set durability of an unknown queue: %v", q)
	}

	b = b.restart()

	levels := map[string]any{}
	for _, q := range objs(b.must(200, "GET", "/v1/queues", nil)["queues"]) {
		levels[q["name"].(string)] = q["durability"]
	}
	if levels["relaxed"] != "process" || levels["untouched"] != "memory" {
		t.Fatalf("queue levels after a restart: %v", levels)
	}
	for id, want := range map[string]string{earlier: "full", later: "process", named: "full"} {
		if got := b.get(id)["durability"]; got != want {
			t.Errorf("job %s after a restart: durability %v, want %s", id, got, want)
		}
	}
	// The memory queue's jobs take memory.
	volatile := b.enqueue(obj{"queue": "untouched", "kind": "k"})
	if got := b.get(volatile)["durability"]; got != "memory" {
		t.Fatalf("job of a memory queue: durability %v", got)
	}
}

// Bad levels are refused naming the field, and a batch mixing memory jobs
// with others stores nothing.
func TestDurabilityRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		path  string
		body  any
		field string
	}{
		{"/v1/jobs", obj{"queue": "bad", "kind": "k", "durability": "disk"}, "durability"},
		{"/v1/jobs", obj{"queue": "bad", "kind": "k", "durability": ""}, "durability"},
		{"/v1/jobs/batch", obj{"jobs": []obj{{"queue": "bad", "kind": "k"}, {"queue": "bad", "kind": "k", "durability": "fast"}}}, "jobs[1].durability"},
		{"/v1/queues/bad/durability", obj{"durability": "disk"}, "durability"},
		{"/v1/queues/bad/durability", obj{}, "durability"},
		{"/v1/jobs/batch", obj{"jobs": []obj{
			{"queue": "bad", "kind": "k", "durability": "memory"},
			{"queue": "bad", "kind": "k", "durability": "full"},
		}}, "jobs"},
		{"/v1/jobs/batch", obj{"jobs": []obj{
			{"queue": "bad", "kind": "k"},
			{"queue": "bad", "kind": "k", "durability": "memory"},
		}}, "jobs"},
	} {
		status, out := b.call("POST", tc.path, tc.body)
		e, _ := out["error"].(obj)
		if status != http.StatusBadRequest || errorCode(out) != "invalid_argument" || e["field"] != tc.field {
			t.Errorf("POST %s %v: %d %v, want 400 invalid_argument naming %s", tc.path, tc.body, status, out, tc.field)
		}
	}
	if status, out := b.call("GET", "/v1/queues/bad", nil); status != http.StatusNotFound {
		t.Errorf("the refused calls created queue bad: %d %v", status, out)
	}
	if jobs := objs(b.must(200, "GET", "/v1/jobs", nil)["jobs"]); len(jobs) != 0 {
		t.Errorf("the refused calls stored %d jobs: %v", len(jobs), ids(jobs))
	}
	if jobs := b.fetch("bad", 10, 0); len(jobs) != 0 {
		t.Errorf("the refused calls left %d jobs to fetch", len(jobs))
	}
}
