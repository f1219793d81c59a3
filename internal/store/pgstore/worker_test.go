package pgstore

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// The count of a worker's active jobs and the listing of them seek the
// worker index, so that they cost what the worker holds, not what the
// store holds.
func TestWorkerQueriesSeekTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	var ps []store.JobInsertParams
	for range 50 {
		ps = append(ps, store.JobInsertParams{ID: job.NewID(t0), Queue: "q", Kind: "k", State: job.StateAvailable, RunAt: t0,
			MaxAttempts: 1, LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed}})
	}
	mustInsert(t, s, ps)
	for _, w := range []string{"a", "b", ""} {
		if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 10, Worker: w, Now: t0})); err != nil || len(js) != 10 {
			t.Fatalf("claim for %q: %d jobs, %v", w, len(js), err)
		}
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Tables this small are read whole unless the planner must use indexes.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	seek := regexp.MustCompile(`"Index Name": "spool_jobs_worker",[^}]*"Index Cond": "[^"]*worker = `)
	list, listArgs := listQuery(&job.ListParams{Queue: "q", State: job.StateActive, Worker: "a"}, 0, 5)
	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"count", sqlCountByWorker, []any{[]string{"a", "b", "c"}}},
		{"listing", list, listArgs},
	} {
		var plan string
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.query, c.args...).Scan(&plan); err != nil {
			t.Fatalf("explain the %s: %v", c.name, err)
		}
		if !seek.MatchString(plan) {
			t.Errorf("the %s does not seek the worker index:\n%s", c.name, plan)
		}
	}
}

// A database of schema version 8 brought to the current version keeps its
// jobs, none of which names a worker or a traceparent, and its leases; a
// claim then records its worker.
func TestWorkerAfterTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := oldDatabase(t, 8,
		`INSERT INTO spool_jobs (seq, id, queue, kind, state, run_at, max_attempts, backoff_kind, backoff_base, backoff_max,
			backoff_jitter, lease_ns, unique_for, durability, created_at, priority, attempt, lease_token)
		VALUES (1, 'held', 'q', 'k', 'active', now(), 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full', now(), 0, 1, 7),
			(2, 'waiting', 'q', 'k', 'available', now(), 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full', now(), 0, 0, 0)`,
		`INSERT INTO spool_leases (seq, expires_at) VALUES (1, now() + interval '1 hour')`)
	s := open(t, url)
	for _, id := range []string{"held", "waiting"} {
		j, err := s.JobGet(ctx, id)
		if err != nil || j.Worker != "" || j.TraceParent != "" {
			t.Fatalf("job %s after the upgrade: %+v, %v", id, j, err)
		}
	}
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 5, Worker: "w", Now: time.Now()}))
	if err != nil || len(js) != 1 || js[0].ID != "waiting" || js[0].Worker != "w" {
		t.Fatalf("claim after the upgrade: %+v, %v", js, err)
	}
	n, err := s.JobCountActiveByWorker(ctx, &store.JobCountActiveByWorkerParams{Workers: []string{"w", ""}})
	if err != nil || len(n) != 1 || n["w"] != 1 {
		t.Fatalf("active jobs by worker after the upgrade: %v, %v", n, err)
	}
}
