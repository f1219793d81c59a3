package server

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m, removeSpool) }

// onPostgres points a config at db, a schema of the test PostgreSQL.
func onPostgres(db string) func(*config.Config) {
	return func(c *config.Config) { c.DB = db }
}

// nodes starts n servers on one fresh PostgreSQL schema.
func nodes(t *testing.T, n int, change ...func(*config.Config)) []*bundle {
	t.Helper()
	db := pgtest.Schema(t)
	out := make([]*bundle, n)
	for i := range out {
		out[i] = setup(t, append([]func(*config.Config){onPostgres(db)}, change...)...)
	}
	return out
}

// leaderOf returns the index of the node that runs the maintenance
// services, waiting up to limit for one to be elected; it fails unless
// exactly one leads.
func leaderOf(t *testing.T, ns []*bundle, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		lead := -1
		count := 0
		for i, n := range ns {
			if n.srv.bg.leading() {
				lead, count = i, count+1
			}
		}
		if count > 1 {
			t.Fatalf("%d nodes lead at once", count)
		}
		if count == 1 {
			return lead
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node was elected leader within %v", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A job enqueued on one node wakes a fetch parked on another at once
// (LISTEN/NOTIFY), long before any maintenance pass could.
func TestSharedStoreWakesFetchesOnOtherNodes(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 2)
	for round := range 3 {
		got := make(chan []obj, 1)
		go func() { got <- ns[1].fetch("wake", 1, 10*time.Second) }()
		ns[1].waitFor("the fetch to park", 5*time.Second, func() bool { return ns[1].srv.Engine().Waiting() == 1 })
		start := time.Now()
		id := ns[0].enqueue(obj{"queue": "wake", "kind": "k"})
		select {
		case jobs := <-got:
			if len(jobs) != 1 || jobs[0]["id"] != id {
				t.Fatalf("round %d: parked fetch got %v, want job %s", round, jobs, id)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Fatalf("round %d: the parked fetch woke %v after the enqueue on the other node", round, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the parked fetch never woke", round)
		}
	}
}

// Exactly one node runs the scheduler, rescuer and pruner; when it stops,
// another takes over within seconds and scheduled jobs still come due.
func TestSharedStoreElectsOneLeader(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 3)
	lead := leaderOf(t, ns, 10*time.Second)
	time.Sleep(1500 * time.Millisecond) // the others campaign and lose
	if again := leaderOf(t, ns, time.Second); again != lead {
		t.Fatalf("leadership moved from %d to %d without a failure", lead, again)
	}
	others := append(append([]*bundle{}, ns[:lead]...), ns[lead+1:]...)
	stopped := time.Now()
	ns[lead].stop()
	next := leaderOf(t, others, 5*time.Second)
	t.Logf("node %d took over %v after the leader stopped", next, time.Since(stopped))
	id := others[1-next].enqueue(obj{"queue": "due", "kind": "k", "delay_ms": 300})
	others[next].waitFor("the scheduled job to come due", 5*time.Second, func() bool {
		return others[next].get(id)["state"] == "available"
	})
}

// The job life cycle over HTTP on PostgreSQL: enqueue, fetch, fail, retry
// after backoff, ack, with counts and listings agreeing across nodes.
func TestSharedStoreLifecycle(t *testing.T) {
	t.Parallel()
	ns := nodes(t, 2)
	a, b := ns[0], ns[1]
	id := a.enqueue(obj{"queue": "life", "kind": "k", "payload": obj{"n": 1}, "backoff": obj{"type": "fixed", "base_ms": 200}})
	j := b.fetch("life", 1, 0)[0]
	if j["id"] != id || j["state"] != "active" {
		t.Fatalf("fetched %v", j)
	}
	out := a.must(200, "POST", "/v1/jobs/"+id+"/fail", obj{"token": token(j), "error": "boom"})
	if out["state"] != "retrying" {
		t.Fatalf("fail: %v", out)
	}
	again := b.fetch("life", 1, 5*time.Second)
	if len(again) != 1 || token(again[0]) <= token(j) {
		t.Fatalf("retry: %v", again)
	}
	if out := b.call2xx("POST", "/v1/jobs/"+id+"/ack", obj{"token": token(j)}); out != 409 {
		t.Fatalf("ack with the stale token: status %d, want 409", out)
	}
	a.must(200, "POST", "/v1/jobs/"+id+"/ack", obj{"token": token(again[0]), "result": obj{"ok": true}})
	got := b.get(id)
	if got["state"] != "completed" || len(got["errors"].([]any)) != 1 {
		t.Fatalf("job after ack: %v", got)
	}
	if c := a.counts("life"); c["completed"] != 1 || c["available"] != 0 {
		t.Fatalf("counts: %v", c)
	}
	list := b.must(200, "GET", "/v1/jobs?queue=life&state=completed", nil)
	if jobs := objs(list["jobs"]); len(jobs) != 1 || jobs[0]["id"] != id {
		t.Fatalf("listing: %v", list)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Engine().Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
}

// call2xx sends a request and returns its status.
func (b *bundle) call2xx(method, path string, body any) int {
	b.t.Helper()
	status, _ := b.call(method, path, body)
	return status
}

// onBothStores runs test on a server over SQLite and on one over
// PostgreSQL, each started with change.
func onBothStores(t *testing.T, test func(t *testing.T, b *bundle), change ...func(*config.Config)) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cs := slices.Clone(change)
			if name == "postgres" {
				cs = append(cs, onPostgres(pgtest.Schema(t)))
			}
			test(t, setup(t, cs...))
		})
	}
}
