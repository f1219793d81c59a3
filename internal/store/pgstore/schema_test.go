package pgstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// A database of schema version 1 counted tokens per job. Brought to the
// current version, it hands out tokens from one sequence that starts above
// every token of the old counters, so that no job gets a token one of its
// earlier hand-outs had.
func TestTokenSequenceStartsAboveOldTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := oldDatabase(t, 1, `INSERT INTO spool_jobs (id, queue, kind, state, run_at, max_attempts, backoff_kind, backoff_base, backoff_max,
			backoff_jitter, lease_ns, unique_for, durability, created_at, lease_token, attempt, priority)
		VALUES ('old', 'q', 'k', 'available', now(), 50, 'fixed', 0, 0, 0, 30000000000, 0, 'full', now(), 41, 41, 0)`)
	s := open(t, url)
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1, Now: time.Now()}))
	if err != nil || len(js) != 1 {
		t.Fatalf("claim: %v, %v", js, err)
	}
	if js[0].ID != "old" || js[0].LeaseToken <= 41 {
		t.Fatalf("claimed %s with token %d, want job old with a token above 41", js[0].ID, js[0].LeaseToken)
	}
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: time.Now(), Jobs: []store.JobInsertParams{{
		ID: "new", Queue: "q2", Kind: "k", State: job.StateAvailable, RunAt: time.Now(), MaxAttempts: 1,
		LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed},
	}}}); err != nil {
		t.Fatal(err)
	}
	next, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q2"}, Max: 1, Now: time.Now()}))
	if err != nil || len(next) != 1 || next[0].LeaseToken <= js[0].LeaseToken {
		t.Fatalf("next claim: %v, %v; want a token above %d", next, err, js[0].LeaseToken)
	}
}

// A database of schema version 4 brought to the current version keeps
// counting its active jobs against their group caps (the held index takes
// the place of the active index), and its queues are not ordered.
func TestActiveJobsCountAfterTheHeldIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	steps := []string{`INSERT INTO spool_queues (name, group_max_active) VALUES ('q', 1)`}
	for i, state := range []string{"active", "available"} {
		steps = append(steps, fmt.Sprintf(`INSERT INTO spool_jobs (seq, id, queue, kind, state, run_at, max_attempts, backoff_kind,
			backoff_base, backoff_max, backoff_jitter, lease_ns, unique_for, durability, created_at, priority, grp, attempt)
		VALUES (%d, 'old%d', 'q', 'k', '%s', now(), 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full', now(), 0, 'a', %d)`,
			i+1, i, state, 1-i))
	}
	steps = append(steps, `INSERT INTO spool_leases (seq, expires_at) VALUES (1, now() + interval '1 hour')`)
	url := oldDatabase(t, 4, steps...)
	s := open(t, url)
	res, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 5, Now: time.Now()})
	if err != nil || len(res.Jobs) != 0 || !slices.Equal(res.Capped, []string{"q"}) {
		t.Fatalf("claim while the group's old job is active under a cap of 1: %+v, %v", res, err)
	}
	q, err := s.QueueGet(ctx, "q")
	if err != nil || q.Limits != (job.Limits{GroupMaxActive: 1}) {
		t.Fatalf("limits after the upgrade: %+v, %v", q, err)
	}
}

// oldDatabase makes a new schema at version v of the migrations, runs
// then on it, and returns its URL: a database a node of an older release
// left, for the tests of an upgrade.
func oldDatabase(t *testing.T, v int, then ...string) string {
	t.Helper()
	ctx := context.Background()
	url := pgtest.Schema(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	steps := []string{sqlMigrationsTable}
	for i := range v {
		steps = append(steps, migrations[i], fmt.Sprintf(`INSERT INTO spool_migrations (version) VALUES (%d)`, i+1))
	}
	for _, sql := range append(steps, then...) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("make a version %d database: %v", v, err)
		}
	}
	return url
}

// A database of schema version 10 brought to the current version counts
// every job: those its fast inserts count themselves, and those a node of
// the older release inserts, which the trigger counts as before.
func TestCountsAfterFastInsertsCountThemselves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := oldDatabase(t, 10)
	s := open(t, url)
	older := connect(t, url)
	for n := 1; n <= 3; n++ { // one job alone, then two and three together
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = newParams(job.DurabilityFull)
			ps[i].FreshID = i%2 == 0 // the engine's ids, and ids of the client's
		}
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: t0, Jobs: ps}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := older.Exec(ctx, `INSERT INTO spool_jobs (id, queue, kind, state, run_at, max_attempts, backoff_kind,
			backoff_base, backoff_max, backoff_jitter, lease_ns, unique_for, durability, created_at, priority)
		VALUES ('older', 'q', 'k', 'available', now(), 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full', now(), 0)`); err != nil {
		t.Fatal(err)
	}
	q, err := s.QueueGet(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Counts[job.StateAvailable]; got != 1+2+3+1 {
		t.Fatalf("available jobs counted: %d, want 7", got)
	}
}
