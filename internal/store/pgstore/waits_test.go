package pgstore

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// wrongDeadlines counts the pending jobs of queue whose wait deadline is
// not the one job.WaitDeadline gives them for the maximum wait maxWait.
func wrongDeadlines(t *testing.T, s *Store, queue string, maxWait time.Duration) int {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT id, attempt, run_at, wait_until FROM spool_jobs WHERE queue = $1`, queue)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	var id string
	var attempt int32
	var runAt time.Time
	var stored *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &attempt, &runAt, &stored}, func() error {
		want := job.WaitDeadline(int(attempt), runAt.UTC(), maxWait)
		if got := utc(stored); !got.Equal(want) {
			t.Logf("job %s (attempt %d, run at %v): deadline %v, want %v", id, attempt, runAt, got, want)
			wrong++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return wrong
}

// The reads of the jobs past their wait, of every queue or of some, and
// of the next deadline, seek the wait index: they cost what is past its
// wait, not the backlog.
func TestWaitReadsSeekTheWaitIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetSettings(ctx, "q", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, groupJobs("q", "", 50))
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// Tables this small are read whole unless the planner must use indexes.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	seek := regexp.MustCompile(`"Index Name": "spool_jobs_wait",[^}]*"Index Cond": "\(wait_until [<>]=? `)
	now := micro(t0)
	for _, c := range []struct {
		name, query string
		args        []any
	}{
		{"sweep", sqlPastWait, []any{now, 10}},
		{"read of a claim", sqlPastWaitOf, []any{now, 10, []string{"q"}}},
		{"next deadline", sqlNextWait, []any{now}},
	} {
		var plan string
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.query, c.args...).Scan(&plan); err != nil {
			t.Fatalf("explain the %s: %v", c.name, err)
		}
		if !seek.MatchString(plan) {
			t.Errorf("the %s does not seek the wait index:\n%s", c.name, plan)
		}
	}
}

// A database of schema version 13 brought to the current version gives
// the jobs waiting unstarted in a queue with a maximum wait their
// deadlines, and no other job one: the sweep kills the first at their
// deadline, a job started before lives on.
func TestWaitDeadlinesAfterTheUpgrade(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var steps []string
	steps = append(steps, `INSERT INTO spool_queues (name, max_wait_ns) VALUES ('q', 60000000000)`)
	for i, c := range []struct {
		queue, state string
		attempt      int
	}{{"q", "available", 0}, {"q", "scheduled", 0}, {"q", "retrying", 1}, {"plain", "available", 0}} {
		steps = append(steps, fmt.Sprintf(`INSERT INTO spool_jobs (seq, id, queue, kind, state, run_at, max_attempts,
			backoff_kind, backoff_base, backoff_max, backoff_jitter, lease_ns, unique_for, durability, created_at, priority, attempt)
		VALUES (%d, 'old%d', '%s', 'k', '%s', '2026-11-22 12:00:00+00', 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full',
			'2026-11-22 12:00:00+00', 0, %d)`, i+1, i, c.queue, c.state, c.attempt))
	}
	s := open(t, oldDatabase(t, 13, steps...))
	if n := wrongDeadlines(t, s, "q", time.Minute) + wrongDeadlines(t, s, "plain", 0); n != 0 {
		t.Fatalf("%d jobs with a wrong deadline after the upgrade", n)
	}
	res, err := s.JobExpireWaiting(ctx, t0.Add(time.Minute), 10)
	if err != nil || res.Count != 1 {
		t.Fatalf("sweep at the deadline: %+v, %v; want the available job killed", res, err)
	}
	if j, err := s.JobGet(ctx, "old0"); err != nil || j.State != job.StateDead {
		t.Fatalf("job old0 after the sweep: %+v, %v", j, err)
	}
}

// A job handed back unrun from its first attempt waits unstarted again:
// it gets its deadline back, from its run time, and dies of it; one
// handed back from a later attempt has none.
func TestReleaseGivesTheWaitBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetSettings(ctx, "q", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	mustInsert(t, s, groupJobs("q", "", 2))
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 2, Now: t0}))
	if err != nil || len(js) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	if n := wrongDeadlines(t, s, "q", time.Minute); n != 0 {
		t.Fatalf("%d claimed jobs with a wrong deadline", n)
	}
	// The second job fails once and comes back for a second attempt,
	// which is then handed back unrun.
	if err := accepted(s.JobFail(ctx, &store.JobFailParams{Now: t0, Items: []job.FailItem{
		{ID: js[1].ID, Token: js[1].LeaseToken, Message: "flaky", RetryAfter: time.Nanosecond}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobPromoteDue(ctx, t0.Add(time.Second), 10); err != nil {
		t.Fatal(err)
	}
	again, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1, Now: t0.Add(time.Second)}))
	if err != nil || len(again) != 1 || again[0].ID != js[1].ID {
		t.Fatalf("second claim: %v, %v", again, err)
	}
	items := []job.ReleaseItem{{ID: js[0].ID, Token: js[0].LeaseToken}, {ID: again[0].ID, Token: again[0].LeaseToken}}
	if err := accepted(s.JobRelease(ctx, &store.JobReleaseParams{Now: t0.Add(time.Second), Items: items})); err != nil {
		t.Fatal(err)
	}
	if n := wrongDeadlines(t, s, "q", time.Minute); n != 0 {
		t.Fatalf("%d released jobs with a wrong deadline", n)
	}
	res, err := s.JobExpireWaiting(ctx, t0.Add(time.Hour), 10)
	if err != nil || res.Count != 1 {
		t.Fatalf("sweep an hour on: %+v, %v; want the job released from its first attempt killed", res, err)
	}
	if j, err := s.JobGet(ctx, js[0].ID); err != nil || j.State != job.StateDead {
		t.Fatalf("job released from its first attempt: %+v, %v", j, err)
	}
}

// A maximum wait set on one node while another inserts, alone, in shared
// rounds and through the full insert, leaves every job of the queue with
// the deadline of the wait: the inserts that the change missed wrote
// theirs for what their node believed, and either the change rewrote
// them or their statement found the new wait.
func TestWaitDeadlinesFollowAChangeOnAnotherNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := open(t, url), open(t, url)
	mustInsert(t, a, groupJobs("q", "", 1)) // a reads the maximum waits: none
	if _, err := a.waiting(ctx, a.pool); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ps := groupJobs("q", "", 1+w%2*3)
				if w == 3 {
					ps[0].UniqueKey = job.NewID(t0) // the full insert
				}
				if _, err := a.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, wait := range []time.Duration{time.Minute, time.Hour, 2 * time.Minute} {
		time.Sleep(20 * time.Millisecond)
		if err := b.QueueSetSettings(ctx, "q", job.QueueSettings{MaxWait: wait}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("insert: %v", err)
	}
	if n := wrongDeadlines(t, a, "q", 2*time.Minute); n != 0 {
		t.Fatalf("%d jobs with a wrong deadline", n)
	}
}

// A dead-letter copy joins its queue as any job put into it does: with
// the wait deadline of the queue's maximum wait, its group (the empty one
// in a queue with flow control), and a copy in the lane of each of the
// queue's consumer groups.
func TestDeadLetterCopiesJoinTheirQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetSettings(ctx, "q", job.QueueSettings{DeadLetterQueue: "dlq"}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetSettings(ctx, "dlq", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetLimits(ctx, "dlq", job.Limits{MaxActive: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: "dlq", Name: "g", Start: job.StartNew, Now: t0}); err != nil {
		t.Fatal(err)
	}
	ps := append(groupJobs("q", "a", 1), groupJobs("q", "", 1)...)
	for i := range ps {
		ps[i].MaxAttempts = 1
	}
	mustInsert(t, s, ps)
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 2, Now: t0}))
	if err != nil || len(js) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	died := t0.Add(time.Second)
	out, err := s.JobFail(ctx, &store.JobFailParams{Now: died, Items: []job.FailItem{
		{ID: js[0].ID, Token: js[0].LeaseToken, Message: "boom"}, {ID: js[1].ID, Token: js[1].LeaseToken, Message: "boom"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range out {
		if o.Err != nil || o.DeadLetter.Queue != "dlq" {
			t.Fatalf("failure %d: %+v", i, o)
		}
		c, err := s.JobGet(ctx, o.DeadLetter.ID)
		if err != nil || c.Group != js[i].Group || c.DeadLetterOf.ID != js[i].ID || len(c.Errors) != 1 {
			t.Fatalf("copy of %s: %+v, %v", js[i].ID, c, err)
		}
		if _, err := s.JobGet(ctx, job.CopyID(c.ID, "g")); err != nil {
			t.Fatalf("the copy of %s in the lane of g: %v", c.ID, err)
		}
	}
	var ungrouped int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM spool_jobs WHERE queue = 'dlq' AND grp IS NULL`).Scan(&ungrouped); err != nil {
		t.Fatal(err)
	}
	if ungrouped != 0 {
		t.Fatalf("%d copies without a group in a queue with flow control", ungrouped)
	}
	if n := wrongDeadlines(t, s, "dlq", time.Minute); n != 0 {
		t.Fatalf("%d copies with a wrong deadline", n)
	}
	if res, err := s.JobExpireWaiting(ctx, died.Add(time.Minute), 10); err != nil || res.Count != 2 {
		t.Fatalf("sweep at the copies' deadline: %+v, %v", res, err)
	}
}

// An insert that finds its job's id taken, in a queue whose maximum wait
// its node did not know, leaves the deadline of the job that has the id
// as it was.
func TestWaitDeadlineOfADuplicateStays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := open(t, url), open(t, url)
	ps := groupJobs("q", "", 1)
	mustInsert(t, a, ps)
	if _, err := a.waiting(ctx, a.pool); err != nil { // a reads the maximum waits: none
		t.Fatal(err)
	}
	if err := b.QueueSetSettings(ctx, "q", job.QueueSettings{MaxWait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	again := ps[0]
	again.RunAt = t0.Add(time.Hour)
	// A queue to create sends the insert down the full path at once.
	res, err := a.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{again}, Now: t0,
		Create: []store.QueueConfig{{Name: "other"}}})
	if err != nil || !res[0].Duplicate {
		t.Fatalf("insert of a taken id: %+v, %v", res, err)
	}
	if n := wrongDeadlines(t, a, "q", time.Minute); n != 0 {
		t.Fatalf("%d jobs with a wrong deadline", n)
	}
}
