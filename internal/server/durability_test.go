package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
)

func TestRestartKeepsJobsAndLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	jobs := make([]obj, 50)
	for i := range jobs {
		jobs[i] = obj{"queue": "keep", "kind": "k", "payload": obj{"n": i}, "priority": i % 3}
	}
	b.must(200, "POST", "/v1/jobs/batch", obj{"jobs": jobs})
	// Due well after the restart, however slow the machine: the counts
	// compared across it must not see the job come due.
	scheduled := b.enqueue(obj{"queue": "keep", "kind": "k", "delay_ms": 4000})
	leased := b.fetch("keep", 5, 0)
	b.must(200, "POST", "/v1/queues/keep/pause", nil)
	before := b.counts("keep")

	b = b.restart()

	if after := b.counts("keep"); len(after) != len(before) {
		t.Fatalf("counts after restart %v, before %v", after, before)
	} else {
		for state, n := range before {
			if after[state] != n {
				t.Fatalf("counts after restart %v, before %v", after, before)
			}
		}
	}
	q := b.must(200, "GET", "/v1/queues/keep", nil)
	if q["paused"] != true {
		t.Fatal("pause lost on restart")
	}
	// A lease taken before the restart is still honoured after it.
	j := leased[0]
	if out := b.must(200, "POST", "/v1/jobs/"+j["id"].(string)+"/ack", obj{"token": token(j)}); out["state"] != "completed" {
		t.Fatalf("ack after restart: %v", out)
	}
	b.must(200, "POST", "/v1/queues/keep/resume", nil)
	// The scheduled job still comes due after the restart.
	b.waitFor("the scheduled job to come due", 60*time.Second, func() bool {
		return b.get(scheduled)["state"] == "available"
	})
	rest := b.fetch("keep", 100, 0)
	if len(rest) != 46 {
		t.Fatalf("after restart %d jobs were available, want 46", len(rest))
	}
	for _, r := range rest {
		if r["id"] != scheduled && r["payload"].(obj)["n"] == nil {
			t.Fatalf("payload lost: %v", r)
		}
	}
}

func TestRetentionPrunesFinishedJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) {
		c.RetainCompleted = 200 * time.Millisecond
		c.PruneInterval = time.Second
	})
	id := b.enqueue(obj{"queue": "ret", "kind": "k"})
	pending := b.enqueue(obj{"queue": "ret", "kind": "k", "delay_ms": 60000})
	j := b.fetch("ret", 1, 0)[0]
	b.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(j)})
	b.waitFor("the completed job to be pruned", 5*time.Second, func() bool {
		status, _ := b.call("GET", "/v1/jobs/"+id, nil)
		return status == http.StatusNotFound
	})
	if got := b.get(pending); got["state"] != "scheduled" {
		t.Fatalf("pruning touched a pending job: %v", got)
	}
}

func TestRetentionCapsFinishedJobCount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *config.Config) {
		c.MaxDead = 2
		c.PruneInterval = time.Second
	})
	var ids []string
	for i := 0; i < 5; i++ {
		id := b.enqueue(obj{"queue": "cap", "kind": "k"})
		j := b.fetch("cap", 1, 0)[0]
		b.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(j), "error": "x", "no_retry": true})
		ids = append(ids, id)
	}
	b.waitFor("dead jobs to be capped at 2", 5*time.Second, func() bool { return b.counts("cap")["dead"] == 2 })
	for _, id := range ids[3:] {
		b.get(id) // the newest two are kept
	}
}

func TestGracefulShutdownAnswersParkedFetches(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	b := start(t, cfg)
	parked := make(chan int, 1)
	go func() {
		status, _ := b.call("POST", "/v1/fetch", obj{"queues": []string{"x"}, "wait_ms": 60000})
		parked <- status
	}()
	b.waitFor("the fetch to park", 5*time.Second, func() bool { return b.srv.Engine().Waiting() == 1 })
	id := b.enqueue(obj{"queue": "y", "kind": "k"})
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(stopped); took > 3*time.Second {
		t.Fatalf("shutdown waited %v for a parked fetch", took)
	}
	if status := <-parked; status != 200 {
		t.Fatalf("parked fetch answered %d during shutdown", status)
	}
	b2 := start(t, cfg)
	if j := b2.get(id); j["state"] != "available" {
		t.Fatalf("job after graceful restart: %v", j)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if out := b.must(200, "GET", "/healthz", nil); out["status"] != "ok" {
		t.Fatalf("healthz: %v", out)
	}
	if out := b.must(200, "GET", "/readyz", nil); out["status"] != "ready" {
		t.Fatalf("readyz: %v", out)
	}
	status, out := b.call("GET", "/v1/openapi.json", nil)
	if status != 200 || out["openapi"] == nil {
		t.Fatalf("openapi: %d", status)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(obj{"queue": "bad", "kind": "k"})
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code, field        string
	}{
		{"malformed json", "POST", "/v1/jobs", `{"queue": "bad", "kind":`, 400, "invalid_json", ""},
		{"unknown field", "POST", "/v1/jobs", obj{"queue": "bad", "kind": "k", "colour": "red"}, 400, "invalid_json", ""},
		{"wrong type", "POST", "/v1/jobs", obj{"queue": "bad", "kind": "k", "priority": "high"}, 400, "invalid_json", "priority"},
		{"bad queue charset", "POST", "/v1/jobs", obj{"queue": "no spaces", "kind": "k"}, 400, "invalid_argument", "queue"},
		{"negative delay", "POST", "/v1/jobs", obj{"queue": "bad", "kind": "k", "delay_ms": -1}, 400, "invalid_argument", "delay_ms"},
		{"absurd lease", "POST", "/v1/jobs", obj{"queue": "bad", "kind": "k", "lease_ms": 1e12}, 400, "invalid_argument", "lease_ms"},
		{"fetch wait too long", "POST", "/v1/fetch", obj{"queues": []string{"bad"}, "wait_ms": 3600000}, 400, "invalid_argument", "wait_ms"},
		{"unknown job", "GET", "/v1/jobs/nosuchjob", nil, 404, "not_found", ""},
		{"unknown route", "GET", "/v1/nothing", nil, 404, "not_found", ""},
		{"wrong method", "PUT", "/v1/jobs/batch", obj{}, 405, "method_not_allowed", ""},
	}
	for _, tc := range cases {
		status, out := b.call(tc.method, tc.path, tc.body)
		if status != tc.status || errorCode(out) != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, status, out, tc.status, tc.code)
			continue
		}
		if tc.field != "" && out["error"].(obj)["field"] != tc.field {
			t.Errorf("%s: field %v, want %s", tc.name, out["error"].(obj)["field"], tc.field)
		}
	}
	if c := b.counts("bad"); c["available"] != 1 {
		t.Fatalf("bad input changed the queue: %v", c)
	}
}
