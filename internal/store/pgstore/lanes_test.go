package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// Consumer groups created and deleted on one node while two nodes insert
// jobs into their queue, and a worker finishes jobs and copies: every job
// of the queue ends with exactly one copy in each group that starts at the
// beginning, however its insert fell against the creation, and a deleted
// group's lane ends empty.
func TestLanesCreatedWhileNodesInsert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	nodes := []*Store{open(t, url), open(t, url)}
	admin := nodes[1]
	var wg sync.WaitGroup
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer halt()
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	batches := make(chan struct{}, 1)
	for n, s := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopped(); i++ {
				// Jobs with a group, in a queue known to be grouped, take
				// no lock of their queue: only the wait of the creation
				// stands between them and a start that misses them.
				ps := groupJobs("q", fmt.Sprintf("tenant-%d", n), 1+i%3)
				if i%4 == 1 {
					ps = groupJobs("q", "", 2)
				}
				if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
					t.Errorf("node %d: insert: %v", n, err)
					return
				}
				select {
				case batches <- struct{}{}:
				default:
				}
			}
		}()
	}
	lanes := []string{"q", job.LaneName("q", "g0"), job.LaneName("q", "g1"), job.LaneName("q", "g2")}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stopped() {
			js, err := store.ClaimedJobs(nodes[0].JobClaim(ctx, &store.JobClaimParams{Queues: lanes, Max: 5, Now: t0}))
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			items := make([]job.CompleteItem, len(js))
			for i, j := range js {
				items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
			}
			// A copy of the group deleted meanwhile is not found.
			if _, err := nodes[0].JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: t0}); err != nil {
				t.Errorf("complete: %v", err)
				return
			}
		}
	}()
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-batches:
			case <-time.After(10 * time.Second):
				t.Fatal("the inserts stopped")
			}
		}
	}
	wait(20)
	for g := range 3 {
		created, err := admin.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: "q", Name: fmt.Sprintf("g%d", g),
			Start: job.StartBeginning, Now: t0})
		if err != nil || !created {
			t.Fatalf("create group g%d: created %v, %v", g, created, err)
		}
		wait(10)
	}
	if err := admin.ConsumerGroupDelete(ctx, "q", "g1"); err != nil {
		t.Fatalf("delete group g1: %v", err)
	}
	wait(10)
	halt()

	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var originals int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM (
		SELECT id FROM spool_jobs WHERE queue = 'q' UNION ALL SELECT id FROM spool_jobs_done WHERE queue = 'q') o`,
	).Scan(&originals); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"g0", "g2"} {
		var copies, strays, missing int
		err := conn.QueryRow(context.Background(), `WITH o AS (
			SELECT id FROM spool_jobs WHERE queue = 'q' UNION ALL SELECT id FROM spool_jobs_done WHERE queue = 'q'
		), c AS (
			SELECT id FROM spool_jobs WHERE queue = 'q@' || $1 UNION ALL SELECT id FROM spool_jobs_done WHERE queue = 'q@' || $1
		)
		SELECT (SELECT count(*) FROM c),
			(SELECT count(*) FROM c WHERE NOT EXISTS (SELECT 1 FROM o WHERE o.id || '@' || $1 = c.id)),
			(SELECT count(*) FROM o WHERE NOT EXISTS (SELECT 1 FROM c WHERE c.id = o.id || '@' || $1))`, g,
		).Scan(&copies, &strays, &missing)
		if err != nil {
			t.Fatal(err)
		}
		if copies != originals || strays != 0 || missing != 0 {
			t.Errorf("group %s: %d copies of %d jobs, %d copies of no job, %d jobs without a copy", g, copies, originals, strays, missing)
		}
	}
	var left int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM (
		SELECT id FROM spool_jobs WHERE queue = 'q@g1' UNION ALL SELECT id FROM spool_jobs_done WHERE queue = 'q@g1') c`,
	).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("the deleted group g1 keeps %d jobs", left)
	}
	gs, err := nodes[0].ConsumerGroupList(context.Background(), "q")
	if err != nil || len(gs) != 2 || gs[0].Name != "g0" || gs[1].Name != "g2" {
		t.Fatalf("groups %+v, %v; want g0 and g2", gs, err)
	}
	t.Logf("%d jobs, each copied into g0 and g2", originals)
}

// A group's creation waits for the inserts under way into its queue,
// even one that waits itself on another insert of one of its ids, and
// the jobs they insert get their copies all the same.
func TestLanesStartWaitsForInsertsUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := open(t, url), open(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The queue is grouped, and node a knows it.
	mustInsert(t, a, groupJobs("q", "t", 1))
	withID := func(id string) store.JobInsertParams {
		p := groupJobs("q", "t", 1)[0]
		p.ID = id
		return p
	}
	holder, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := a.insert(ctx, holder, []store.JobInsertParams{withID("y")}, t0, true); err != nil {
		t.Fatal(err)
	}
	inserted := make(chan error, 1)
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := tx.Conn().PgConn().PID()
	go func() {
		_, err := a.insert(ctx, tx, []store.JobInsertParams{withID("y"), withID("x")}, t0, true)
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		inserted <- err
	}()
	waitUntil(t, conn, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`, pid)
	created := make(chan error, 1)
	go func() {
		_, err := b.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: "q", Name: "g", Start: job.StartBeginning, Now: t0})
		created <- err
	}()
	waitUntil(t, conn, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`)
	// The insert goes on, and then the creation.
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-inserted; err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatalf("create group: %v", err)
	}
	for _, id := range []string{"x", "y"} {
		if _, err := b.JobGet(ctx, job.CopyID(id, "g")); err != nil {
			t.Errorf("the copy of job %s: %v", id, err)
		}
	}
}

// waitUntil waits until query, run with args, returns true.
func waitUntil(t *testing.T, conn *pgx.Conn, query string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		if err := conn.QueryRow(context.Background(), query, args...).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still false after 10s: %s", query)
		}
		time.Sleep(time.Millisecond)
	}
}

// A group's lane takes its queue's pause and limits when it is created and
// follows every later change of them; it gets flow control with its
// queue, by limits or by a job with a group, and then its copies without a
// group join the empty group, as its queue's jobs do.
func TestLanesFollowTheirQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	create := func(queue string) string {
		t.Helper()
		if _, err := s.ConsumerGroupCreate(ctx, &store.ConsumerGroupParams{Queue: queue, Name: "g", Start: job.StartNew, Now: t0}); err != nil {
			t.Fatalf("create group of %s: %v", queue, err)
		}
		return job.LaneName(queue, "g")
	}
	want := func(lane string, paused bool, l job.Limits) {
		t.Helper()
		q, err := s.QueueGet(ctx, lane)
		if err != nil {
			t.Fatal(err)
		}
		if q.Paused != paused || q.Limits != l {
			t.Fatalf("lane %s: paused %v, limits %+v; want %v, %+v", lane, q.Paused, q.Limits, paused, l)
		}
	}
	limits := job.Limits{MaxActive: 3, GroupMaxActive: 1}
	if err := s.QueueSetLimits(ctx, "q", limits); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetPaused(ctx, "q", true); err != nil {
		t.Fatal(err)
	}
	lane := create("q")
	want(lane, true, limits)
	later := job.Limits{Rate: job.Rate{Limit: 5, Period: time.Second}}
	if err := s.QueueSetLimits(ctx, "q", later); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetPaused(ctx, "q", false); err != nil {
		t.Fatal(err)
	}
	want(lane, false, later)

	ungrouped := func(lane string) (n int, flow bool) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM spool_jobs WHERE queue = $1 AND grp IS NULL),
			(SELECT flow FROM spool_queues WHERE name = $1)`, lane).Scan(&n, &flow); err != nil {
			t.Fatal(err)
		}
		return n, flow
	}
	for queue, grouping := range map[string]func(){
		"by-limits": func() {
			if err := s.QueueSetLimits(ctx, "by-limits", job.Limits{GroupMaxActive: 1}); err != nil {
				t.Fatal(err)
			}
		},
		"by-job": func() { mustInsert(t, s, groupJobs("by-job", "tenant", 1)) },
	} {
		lane := create(queue)
		mustInsert(t, s, groupJobs(queue, "", 3))
		if n, flow := ungrouped(lane); n != 3 || flow {
			t.Fatalf("lane %s of a plain queue: %d copies without a group, flow %v; want 3 and none", lane, n, flow)
		}
		grouping()
		if n, flow := ungrouped(lane); n != 0 || !flow {
			t.Fatalf("lane %s of a grouped queue: %d copies without a group, flow %v; want none and flow control", lane, n, flow)
		}
		mustInsert(t, s, groupJobs(queue, "", 1))
		if n, _ := ungrouped(lane); n != 0 {
			t.Fatalf("lane %s of a grouped queue: a new copy without a group", lane)
		}
	}
}
