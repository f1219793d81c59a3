package pgstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// groupJobs returns the parameters of n available jobs of queue in
// group g ("" for none).
func groupJobs(queue, g string, n int) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = newParams(job.DurabilityFull)
		ps[i].Queue, ps[i].Group = queue, g
	}
	return ps
}

func mustInsert(t *testing.T, s *Store, ps []store.JobInsertParams) {
	t.Helper()
	if _, err := s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
		t.Fatalf("insert %d jobs: %v", len(ps), err)
	}
}

// Two nodes claiming from one queue at once never hold more jobs active
// than its caps allow between them, although one of them first saw the
// queue without limits and took it for a plain one.
func TestFlowCapsHoldAcrossNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	nodes := []*Store{open(t, url), open(t, url)}
	mustInsert(t, nodes[0], groupJobs("q", "", 50))
	// The second node claims the queue while it has no flow control.
	js, err := store.ClaimedJobs(nodes[1].JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 2, Now: t0}))
	if err != nil || len(js) != 2 {
		t.Fatalf("plain claim: %d jobs, %v", len(js), err)
	}
	complete(t, nodes[1], js)
	// Then the first node gives it groups and caps.
	var more []store.JobInsertParams
	for g := range 6 {
		more = append(more, groupJobs("q", fmt.Sprintf("g%d", g), 15)...)
	}
	mustInsert(t, nodes[0], more)
	const maxActive, groupMax = 5, 2
	if err := nodes[0].QueueSetLimits(ctx, "q", job.Limits{MaxActive: maxActive, GroupMaxActive: groupMax}); err != nil {
		t.Fatal(err)
	}
	total := 50 + len(more) - 2
	var (
		mu     sync.Mutex
		active = map[string]int{}
		sum    int
		done   int
		wg     sync.WaitGroup
	)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := nodes[w%2]
			for round := 0; round < 3000; round++ {
				mu.Lock()
				finished := done >= total
				mu.Unlock()
				if finished {
					return
				}
				js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1 + w%3, Now: t0}))
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				for _, j := range js {
					active[j.Group]++
					sum++
					if sum > maxActive || active[j.Group] > groupMax {
						t.Errorf("%d active in group %q, %d in the queue: caps %d and %d", active[j.Group], j.Group, sum, groupMax, maxActive)
					}
				}
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				for _, j := range js {
					active[j.Group]--
					sum--
				}
				mu.Unlock()
				if len(js) > 0 {
					complete(t, s, js)
					mu.Lock()
					done += len(js)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	q, err := nodes[1].QueueGet(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if n := q.Counts[job.StateCompleted]; n != int64(total+2) {
		t.Fatalf("%d of %d jobs completed", n, total+2)
	}
}

// listenOn opens a store on url that listens as another node would, and
// returns a function that waits for the next queues it is woken for. It
// returns once the listener listens: the listener announces every known
// queue when it connects, so s makes a queue for the purpose and waits
// for its announcement.
func listenOn(t *testing.T, url string, s *Store) (next func() []string) {
	t.Helper()
	ctx := context.Background()
	woken := make(chan []string, 16)
	listener, err := Open(ctx, Config{URL: url, Migrate: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Hooks: store.Hooks{OnAvailable: func(qs []string) { woken <- qs }}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = listener.Close() })
	if err := s.QueueSetPaused(ctx, "hello", false); err != nil {
		t.Fatal(err)
	}
	for qs := range woken {
		if slices.Contains(qs, "hello") {
			break
		}
	}
	return func() []string {
		t.Helper()
		for {
			select {
			case qs := <-woken:
				if !slices.Equal(qs, []string{"hello"}) { // the listener may announce it twice
					return qs
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no notification")
				return nil
			}
		}
	}
}

func complete(t *testing.T, s *Store, js []*job.Job) {
	t.Helper()
	items := make([]job.CompleteItem, len(js))
	for i, j := range js {
		items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
	}
	if err := accepted(s.JobComplete(context.Background(), &store.JobCompleteParams{Items: items, Now: t0})); err != nil {
		t.Errorf("complete: %v", err)
	}
}

// A job of a queue with an active cap that stops being active on one node
// wakes the fetches parked on the others; a job of a queue without a cap
// sends nothing.
func TestFlowFreedPlaceWakesOtherNodes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	s := open(t, url)
	next := listenOn(t, url, s)
	mustInsert(t, s, append(groupJobs("plain", "", 2), groupJobs("capped", "", 2)...))
	if qs := next(); !slices.Equal(qs, []string{"plain", "capped"}) {
		t.Fatalf("after an insert: woken for %v", qs)
	}
	if err := s.QueueSetLimits(ctx, "capped", job.Limits{MaxActive: 2}); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"capped"}) {
		t.Fatalf("after setting limits: woken for %v", qs)
	}
	plain, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"plain"}, Max: 2, Now: t0}))
	if err != nil || len(plain) != 2 {
		t.Fatalf("claim plain: %d jobs, %v", len(plain), err)
	}
	capped, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"capped"}, Max: 2, Now: t0}))
	if err != nil || len(capped) != 2 {
		t.Fatalf("claim capped: %d jobs, %v", len(capped), err)
	}
	// Acks of the plain queue send nothing: the first notification after
	// them is the capped queue's.
	complete(t, s, plain)
	complete(t, s, capped[:1])
	if qs := next(); !slices.Equal(qs, []string{"capped"}) {
		t.Fatalf("after acks: woken for %v, want the capped queue", qs)
	}
	if err := accepted(s.JobFail(ctx, &store.JobFailParams{Now: t0,
		Items: []job.FailItem{{ID: capped[1].ID, Token: capped[1].LeaseToken, Message: "x", NoRetry: true}}})); err != nil {
		t.Fatal(err)
	}
	if qs := next(); !slices.Equal(qs, []string{"capped"}) {
		t.Fatalf("after a fail: woken for %v, want the capped queue", qs)
	}
}

// Plain jobs inserted while another node gives their queue groups all end
// up in the queue's one group of jobs without a group, none left with a
// NULL group where the group claim cannot see it.
func TestFlowGroupsOfInsertsRacingAGroupedQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Schema(t)
	a, b := open(t, url), open(t, url)
	for round := range 5 {
		queue := fmt.Sprintf("q%d", round)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if _, err := a.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: groupJobs(queue, "", 1+w), Now: t0}); err != nil {
						t.Errorf("insert: %v", err)
						return
					}
				}
			}()
		}
		mustInsert(t, b, groupJobs(queue, "g", 1))
		wg.Wait()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		var null int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM spool_jobs WHERE queue = $1 AND grp IS NULL`, queue).Scan(&null)
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if null > 0 {
			t.Fatalf("round %d: %d jobs of a grouped queue without a group have a NULL group", round, null)
		}
		js, err := store.ClaimedJobs(b.JobClaim(ctx, &store.JobClaimParams{Queues: []string{queue}, Max: 200, Now: t0}))
		if err != nil || len(js) != 101 {
			t.Fatalf("round %d: claimed %d jobs of 101, %v", round, len(js), err)
		}
	}
}

// A start log comes back from its stored form as it was, cut to the
// newest starts a rate looks at.
func TestStartLogEncoding(t *testing.T) {
	t.Parallel()
	l := job.StartLog{5, 5, 5, 7, 9, 9}
	for limit, want := range map[int]job.StartLog{10: l, 6: l, 4: {5, 7, 9, 9}, 1: {9}} {
		got, err := decodeStarts(encodeStarts(l), limit)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("limit %d: %v, %v; want %v", limit, got, err, want)
		}
	}
	if b := encodeStarts(l); len(b) != 3*16 {
		t.Fatalf("encoded %d bytes, want one pair a time", len(b))
	}
	if got, err := decodeStarts(nil, 3); err != nil || len(got) != 0 {
		t.Fatalf("empty log: %v, %v", got, err)
	}
	if _, err := decodeStarts([]byte{1, 2, 3}, 3); err == nil {
		t.Fatal("a torn log decoded")
	}
}

// BenchmarkFlowClaim claims 100 jobs at a time from a queue with flow
// control, each batch acked with the timer stopped, so that the time per
// claim compares with BenchmarkStore/Claim100 of a plain queue. An
// ordered queue of 1,000 groups compares with 1,000 groups capped at
// one active job each: the same jobs go out, and the ordered claim also
// looks up each group's holder.
func BenchmarkFlowClaim(b *testing.B) {
	for _, bc := range []struct {
		name   string
		groups int
		limits job.Limits
	}{
		{"Groups100", 100, job.Limits{}},
		{"MaxActive", 0, job.Limits{MaxActive: 1000}},
		{"Rate", 0, job.Limits{Rate: job.Rate{Limit: job.MaxRateLimit, Period: time.Millisecond}}},
		{"Groups1000GroupMaxActive1", 1000, job.Limits{GroupMaxActive: 1}},
		{"Ordered1000", 1000, job.Limits{Ordered: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			s := open(b, pgtest.Schema(b))
			n := b.N * 100
			for done := 0; done < n; done += 1000 {
				ps := groupJobs("q", "", min(1000, n-done))
				for i := range ps {
					if bc.groups > 0 {
						ps[i].Group = fmt.Sprintf("g%04d", (done+i)%bc.groups)
					}
				}
				if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.QueueSetLimits(ctx, "q", bc.limits); err != nil {
				b.Fatal(err)
			}
			now := t0
			b.ResetTimer()
			for range b.N {
				now = now.Add(time.Millisecond) // past any rate's window
				js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 100, Now: now}))
				if err != nil || len(js) != 100 {
					b.Fatalf("claim: %d jobs, %v", len(js), err)
				}
				b.StopTimer()
				items := make([]job.CompleteItem, len(js))
				for i, j := range js {
					items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
				}
				if err := accepted(s.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: now})); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(b.N*100)/s, "jobs/s")
			}
		})
	}
}

// Jobs of a database from before flow control (schema version 3) come
// under the limits their queue gets after the upgrade.
func TestFlowOnJobsFromBeforeFlowControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var steps []string
	for i := range 3 {
		steps = append(steps, fmt.Sprintf(`INSERT INTO spool_jobs (id, queue, kind, state, run_at, max_attempts, backoff_kind,
			backoff_base, backoff_max, backoff_jitter, lease_ns, unique_for, durability, created_at, priority)
		VALUES ('old%d', 'q', 'k', 'available', now(), 5, 'fixed', 0, 0, 0, 60000000000, 0, 'full', now(), 0)`, i))
	}
	url := oldDatabase(t, 3, steps...)
	s := open(t, url)
	if err := s.QueueSetLimits(ctx, "q", job.Limits{MaxActive: 2}); err != nil {
		t.Fatal(err)
	}
	res, err := s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 5, Now: time.Now()})
	if err != nil || len(res.Jobs) != 2 || !slices.Equal(res.Capped, []string{"q"}) {
		t.Fatalf("claim under a cap of 2: %+v, %v", res, err)
	}
	for _, j := range res.Jobs {
		if j.Group != "" {
			t.Fatalf("job %s came back in group %q", j.ID, j.Group)
		}
	}
}

// Imported jobs keep their groups; one without a group imported into a
// queue with flow control joins its group of jobs without one.
func TestFlowImportKeepsGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetLimits(ctx, "q", job.Limits{GroupMaxActive: 1}); err != nil {
		t.Fatal(err)
	}
	var jobs []*job.Job
	for i, g := range []string{"a", "", "a"} {
		jobs = append(jobs, &job.Job{ID: fmt.Sprintf("imported%d", i), Queue: "q", Kind: "k", State: job.StateAvailable,
			RunAt: t0, CreatedAt: t0, MaxAttempts: 3, LeaseDuration: time.Minute, Group: g,
			Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour}})
	}
	if n, err := s.ImportJobs(ctx, jobs); err != nil || n != 3 {
		t.Fatalf("import: %d, %v", n, err)
	}
	if j, err := s.JobGet(ctx, "imported0"); err != nil || j.Group != "a" {
		t.Fatalf("imported job: %+v, %v", j, err)
	}
	js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 5, Now: t0}))
	if err != nil || len(js) != 2 || js[0].ID != "imported1" || js[1].ID != "imported0" {
		t.Fatalf("claim under a group cap of 1: %v, %v; want imported1 and imported0", idsOf(js), err)
	}
}

func idsOf(js []*job.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// The pruner drops the start log of a group once its newest start no
// longer counts under the group rate, and keeps it while it does.
func TestPruneDropsIdleStartLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetLimits(ctx, "q", job.Limits{GroupRate: job.Rate{Limit: 1, Period: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	// The ordered queue's groups hold enough jobs that a scan of every
	// available job costs more than a seek: with two, the planner may
	// read the whole group claim index for the available holder.
	for _, g := range []string{"a", "b", "c"} {
		mustInsert(t, s, groupJobs("q", g, 2))
	}
	if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 10, Now: t0})); err != nil || len(js) != 3 {
		t.Fatalf("claim under a group rate of 1/min: %d jobs, %v", len(js), err)
	}
	logs := func() int {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM spool_group_starts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	prune := func(now time.Time) {
		if _, err := s.JobPrune(ctx, &store.JobPruneParams{Limit: 100, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	prune(t0.Add(30 * time.Second))
	if n := logs(); n != 3 {
		t.Fatalf("%d start logs half a minute on, want the 3 that still count", n)
	}
	if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 10, Now: t0.Add(30 * time.Second)})); err != nil || len(js) != 0 {
		t.Fatalf("claim within the minute after a prune: %d jobs, %v", len(js), err)
	}
	prune(t0.Add(time.Minute))
	if n := logs(); n != 0 {
		t.Fatalf("%d start logs a minute on, want none", n)
	}
}

// A claim counts each group's active jobs with one seek into the held
// index by queue, state and group, and in an ordered queue looks each
// group's holder up with seeks by group too: the groups the walk finds
// must compare in the index's collation, or every count reads all the
// queue's active jobs. The heads of an ordered queue's groups come from
// the group claim index.
func TestGroupActiveCountsSeekTheIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	if err := s.QueueSetLimits(ctx, "q", job.Limits{GroupMaxActive: 1, GroupRate: job.Rate{Limit: 5, Period: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if err := s.QueueSetLimits(ctx, "o", job.Limits{Ordered: true}); err != nil {
		t.Fatal(err)
	}
	// The ordered queue's groups hold enough jobs that a scan of every
	// available job costs more than a seek: with two, the planner may
	// read the whole group claim index for the available holder.
	for _, g := range []string{"a", "b", "c"} {
		mustInsert(t, s, groupJobs("q", g, 2))
		mustInsert(t, s, groupJobs("o", g, 100))
	}
	for _, q := range []string{"q", "o"} {
		if js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{q}, Max: 10, Now: t0})); err != nil || len(js) != 3 {
			t.Fatalf("claim %s: %d jobs, %v", q, len(js), err)
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
	count := regexp.MustCompile(`"Index Name": "spool_jobs_group_held",[^}]*"Index Cond": "[^"]*AND \(state = 'active'::text\) AND \(grp = \(*g\.grp\)*::text`)
	holder := regexp.MustCompile(`"Index Name": "spool_jobs_group_held",[^}]*"Index Cond": "[^"]*AND \(state = '(available|retrying|scheduled)'::text\) AND \(grp = \(*g\.grp\)*::text`)
	heads := regexp.MustCompile(`"Index Name": "spool_jobs_group_claim",[^}]*"Index Cond": "(?:[^"\\]|\\.)*AND \(grp = \(*g\.grp\)*::text`)
	for _, c := range []struct {
		name, query, queue string
		want               map[string]*regexp.Regexp
	}{
		{"group walk", sqlGroupWalk + groupsTail, "q", map[string]*regexp.Regexp{"count the active jobs": count}},
		{"ordered group walk", sqlGroupWalk + orderedGroupsTail, "o", map[string]*regexp.Regexp{"count the active jobs": count,
			"look up the holder": holder, "read the heads": heads}},
		{"ordered group walk without a maximum wait", sqlGroupWalk + orderedGroupsTailNoWait, "o", map[string]*regexp.Regexp{
			"count the active jobs": count, "look up the holder": holder, "read the heads": heads}},
	} {
		var plan string
		if err := tx.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+c.query, c.queue, "", false, 10, 1, true, false).Scan(&plan); err != nil {
			t.Fatalf("explain the %s: %v", c.name, err)
		}
		for what, re := range c.want {
			if !re.MatchString(plan) {
				t.Errorf("the %s does not %s with a seek by group:\n%s", c.name, what, plan)
			}
		}
	}
}

// The statements that end leases find them by an array of seqs: the
// planner cannot join a CTE of ended jobs to spool_leases in a loop that
// reads all of the CTE for every lease, whatever it thinks of their sizes.
func TestEndedLeasesAreFoundBySeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// With nested loops the only join left, a lease delete by IN
	// (SELECT …) joins the CTE in a loop.
	if _, err := tx.Exec(ctx, `SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off`); err != nil {
		t.Fatal(err)
	}
	now := micro(t0)
	for name, c := range map[string]struct {
		q    string
		args []any
	}{
		"complete": {sqlComplete, []any{[]string{"a"}, []int64{1}, [][]byte{nil}, now, "cancelled", "completed", "ch", "node", 10}},
		"finish":   {sqlFinish, []any{[]int64{1}, []string{"dead"}, []int32{1}, []string{""}, now}},
		"requeue":  {sqlRequeue, []any{[]int64{1}, []string{"retrying"}, []time.Time{now}, []int32{1}, []string{""}, []*time.Time{nil}}},
	} {
		rows, err := tx.Query(ctx, "EXPLAIN (FORMAT JSON) "+c.q, c.args...)
		if err != nil {
			t.Fatalf("explain %s: %v", name, err)
		}
		var plan string
		for rows.Next() {
			if err := rows.Scan(&plan); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if strings.Contains(plan, `"Join Filter": "(spool_leases.seq = `) || !strings.Contains(plan, `seq = ANY (`) {
			t.Errorf("%s ends leases by a join to its CTE:\n%s", name, plan)
		}
	}
}
