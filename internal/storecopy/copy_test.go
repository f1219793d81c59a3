package storecopy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/pgstore"
	"github.com/spoolq/spool/internal/store/sqlitestore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// An embedded store with jobs in every state, leases, errors, results,
// progress, tags, unique keys, both durabilities, dead-letter copies,
// workers, traceparents, paused queues, queue durabilities and settings
// moves to PostgreSQL whole:
// every job as it was, in enqueue order; leases still honoured there; and a
// second run copies nothing more.
func TestCopyEmbeddedStoreToPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	src, err := sqlitestore.Open(ctx, sqlitestore.Config{Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.Schema(t), Migrate: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	var ps []store.JobInsertParams
	for i := range 2500 {
		p := store.JobInsertParams{
			ID: job.NewID(t0), Queue: []string{"a", "b", "c"}[i%3], Kind: "k", Payload: json.RawMessage(`{"n": 1}`),
			Priority: i % 5, State: job.StateAvailable, RunAt: t0, MaxAttempts: 2, LeaseDuration: time.Minute,
			Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour, Jitter: 0.1},
		}
		if i%7 == 0 {
			p.State, p.RunAt = job.StateScheduled, t0.Add(time.Hour)
		}
		if i%11 == 0 {
			p.UniqueKey, p.UniqueFor, p.Tags = "key"+job.NewID(t0), time.Hour, []string{"x", "y"}
		}
		if i%4 == 1 {
			p.Durability = job.DurabilityProcess
		}
		if i%13 == 0 {
			p.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		}
		ps = append(ps, p)
	}
	for i := 0; i < len(ps); i += 500 {
		if _, err := src.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps[i : i+500], Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	settings := job.QueueSettings{DeadLetterQueue: "a-dlq", MaxWait: time.Hour,
		DefaultLease: 5 * time.Minute, DefaultMaxAttempts: 3, DefaultDelay: 10 * time.Second}
	if err := src.QueueSetSettings(ctx, "a", settings); err != nil {
		t.Fatal(err)
	}
	leased, err := store.ClaimedJobs(src.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"a", "b"}, Max: 400, Worker: "host-9/pid-1", Now: t0}))
	if err != nil || len(leased) != 400 {
		t.Fatalf("claim: %d, %v", len(leased), err)
	}
	now := t0.Add(time.Second)
	var done []job.CompleteItem
	var failed []job.FailItem
	for i, j := range leased[:300] {
		if i%2 == 0 {
			done = append(done, job.CompleteItem{ID: j.ID, Token: j.LeaseToken, Result: json.RawMessage(`{"ok":true}`)})
		} else {
			failed = append(failed, job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "boom", NoRetry: i%3 == 0})
		}
	}
	if _, err := src.JobComplete(ctx, &store.JobCompleteParams{Items: done, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.JobFail(ctx, &store.JobFailParams{Items: failed, Now: now}); err != nil {
		t.Fatal(err)
	}
	held := leased[300]
	if err := src.JobProgress(ctx, &store.JobProgressParams{ID: held.ID, Token: held.LeaseToken, Progress: json.RawMessage(`{"p":5}`), Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.JobCancel(ctx, leased[301].ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := src.JobCancel(ctx, ps[2].ID, now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"c", "empty"} {
		if err := src.QueueSetPaused(ctx, q, true); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"b", "fast"} {
		if err := src.QueueSetDurability(ctx, q, job.DurabilityProcess); err != nil {
			t.Fatal(err)
		}
	}
	sched := job.Schedule{Name: "nightly", Cron: "0 3 * * *", Timezone: "Europe/Berlin", Misfire: "catch_up", MaxCatchUp: 5,
		Job: json.RawMessage(`{"queue":"a","kind":"report"}`), LastTick: t0, NextRunAt: t0.Add(time.Hour)}
	if _, _, err := src.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Schedule: sched, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ScheduleFire(ctx, &store.ScheduleFireParams{Name: "nightly", Manual: true, Now: now,
		Jobs: []store.JobInsertParams{{ID: "nightly-manual", Queue: "a", Kind: "report", State: job.StateAvailable, RunAt: now,
			MaxAttempts: 1, LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ScheduleSetPaused(ctx, "nightly", true, now); err != nil {
		t.Fatal(err)
	}
	wantSchedule, err := src.ScheduleGet(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	limits := job.Limits{MaxActive: 7, GroupRate: job.Rate{Limit: 3, Period: time.Second}, Ordered: true}.Normalized()
	if err := src.QueueSetLimits(ctx, "b", limits); err != nil {
		t.Fatal(err)
	}
	if _, err := src.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: "c", Name: "audit", Now: now}); err != nil {
		t.Fatal(err)
	}
	lane, err := src.QueueGet(ctx, job.LaneName("c", "audit"))
	if err != nil || lane.Counts[job.StateAvailable]+lane.Counts[job.StateScheduled] == 0 {
		t.Fatalf("the source's consumer group: %+v, %v", lane, err)
	}
	copies := 0
	for _, n := range lane.Counts {
		copies += int(n)
	}

	res, err := Copy(ctx, src, dst)
	if err != nil {
		t.Fatalf("copy: %v", err)
	}
	letters, err := src.QueueGet(ctx, "a-dlq")
	if err != nil || letters.Counts[job.StateAvailable] == 0 {
		t.Fatalf("dead-letter queue of the source: %+v, %v", letters, err)
	}
	jobs := 2501 + int(letters.Counts[job.StateAvailable]) + copies
	if res.Jobs != jobs || res.Copied != jobs || res.Queues != 7 || res.Schedules != 1 {
		t.Fatalf("copy result %+v, want %d jobs of 7 queues (a consumer group's lane among them)", res, jobs)
	}
	if q, err := dst.QueueGet(ctx, "b"); err != nil || q.Limits != limits {
		t.Fatalf("queue b after the copy: %+v, %v", q, err)
	}
	if q, err := dst.QueueGet(ctx, "a"); err != nil || q.Settings != settings {
		t.Fatalf("queue a after the copy: %+v, %v", q, err)
	}
	gotSchedule, err := dst.ScheduleGet(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", *gotSchedule) != fmt.Sprintf("%+v", *wantSchedule) {
		t.Fatalf("schedule after the copy:\n%+v\nwant\n%+v", *gotSchedule, *wantSchedule)
	}
	for q, want := range map[string]job.Durability{"a": job.DurabilityFull, "b": job.DurabilityProcess, "fast": job.DurabilityProcess} {
		info, err := dst.QueueGet(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if info.Durability != want {
			t.Fatalf("queue %s durability %q after the copy, want %q", q, info.Durability, want)
		}
	}
	want := listAll(t, src)
	got := listAll(t, dst)
	levels := make(map[job.Durability]int)
	for _, j := range got {
		levels[j.Durability]++
	}
	if levels[job.DurabilityFull] == 0 || levels[job.DurabilityProcess] == 0 || len(levels) != 2 {
		t.Fatalf("durabilities after the copy: %v, want full and process jobs", levels)
	}
	if len(got) != len(want) {
		t.Fatalf("%d jobs copied, source has %d", len(got), len(want))
	}
	for i := range want {
		w, _ := json.Marshal(want[i])
		g, _ := json.Marshal(got[i])
		if string(w) != string(g) {
			t.Fatalf("job %d differs:\n got %s\nwant %s", i, g, w)
		}
	}
	// A worker that held a lease before the move acks with its token.
	out, err := dst.JobComplete(ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: held.ID, Token: held.LeaseToken}}, Now: now})
	if err != nil || out[0].Err != nil || out[0].State != job.StateCompleted {
		t.Fatalf("ack after the move: %+v, %v", out, err)
	}
	// The unique keys came along.
	dup, err := dst.JobInsertMany(ctx, &store.JobInsertManyParams{Now: now, Jobs: []store.JobInsertParams{{
		ID: job.NewID(now), Queue: ps[11].Queue, Kind: "k", State: job.StateAvailable, RunAt: now, MaxAttempts: 1,
		LeaseDuration: time.Minute, UniqueKey: ps[11].UniqueKey, UniqueFor: time.Hour, Backoff: ps[11].Backoff}}})
	if err != nil || !dup[0].Duplicate || dup[0].Job.ID != ps[11].ID {
		t.Fatalf("unique key after the move: %+v, %v", dup, err)
	}
	// The group came along, and later jobs reach it.
	if _, err := dst.JobInsertMany(ctx, &store.JobInsertManyParams{Now: now, Jobs: []store.JobInsertParams{{ID: "after-move", Queue: "c",
		Kind: "k", State: job.StateAvailable, RunAt: now, MaxAttempts: 1, LeaseDuration: time.Minute, Backoff: ps[0].Backoff}}}); err != nil {
		t.Fatal(err)
	}
	if j, err := dst.JobGet(ctx, job.CopyID("after-move", "audit")); err != nil || j.Queue != job.LaneName("c", "audit") {
		t.Fatalf("consumer group audit after the move: copy %+v, %v", j, err)
	}
	// Running the copy again stores nothing twice; the check sees the ack
	// made since, so it reports the difference.
	again, err := Copy(ctx, src, dst)
	if again.Copied != 0 {
		t.Fatalf("second copy stored %d jobs", again.Copied)
	}
	if err == nil {
		t.Fatal("the check missed a job acked on the target after the copy")
	}
}

func listAll(t *testing.T, s store.Admin) []*job.Job {
	t.Helper()
	var all []*job.Job
	cursor := ""
	for {
		p, err := s.JobList(context.Background(), &job.ListParams{Cursor: cursor, Limit: 700})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Jobs...)
		if p.Next == "" {
			return all
		}
		cursor = p.Next
	}
}
