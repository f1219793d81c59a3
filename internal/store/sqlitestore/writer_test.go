package sqlitestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// With far more jobs than the window holds, mixed priorities, and jobs
// arriving between claims, every claim still follows claim order exactly.
func TestWindowKeepsClaimOrderAcrossRefills(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ReadyWindow = minReadyWindow })
	rng := rand.New(rand.NewPCG(1, 2))
	type key struct {
		prio  int
		runAt time.Time
		n     int
	}
	var pending []key
	byID := make(map[string]key)
	n := 0
	add := func(count int) {
		ps := params("q", count, func(_ int, p *store.JobInsertParams) {
			p.Priority = rng.IntN(5) - 2
			p.RunAt = t0.Add(-time.Duration(rng.IntN(3)) * time.Second)
			k := key{p.Priority, p.RunAt, n}
			n++
			pending = append(pending, k)
			byID[p.ID] = k
		})
		b.insert(ps...)
	}
	add(300)
	for round := 0; len(pending) > 0; round++ {
		if round%3 == 0 && n < 600 {
			add(25)
		}
		sort.Slice(pending, func(i, k int) bool {
			a, c := pending[i], pending[k]
			if a.prio != c.prio {
				return a.prio > c.prio
			}
			if !a.runAt.Equal(c.runAt) {
				return a.runAt.Before(c.runAt)
			}
			return a.n < c.n
		})
		js := b.claim(1+rng.IntN(30), "q")
		if len(js) == 0 {
			t.Fatalf("round %d: nothing claimed with %d pending", round, len(pending))
		}
		for i, j := range js {
			if byID[j.ID] != pending[i] {
				t.Fatalf("round %d: claim %d got %+v, want %+v", round, i, byID[j.ID], pending[i])
			}
		}
		pending = pending[len(js):]
		checkWindow(t, b)
	}
}

// checkWindow compares every window with the database: a window holds the
// first available jobs that are not leased, in claim order.
func checkWindow(t *testing.T, b *bundle) {
	t.Helper()
	err := b.s.do(b.ctx, 1, func(w *writer) error {
		for _, q := range w.queues {
			rows, err := w.conn.QueryContext(b.ctx, `SELECT seq FROM jobs WHERE queue = ? AND state = 'available'
ORDER BY priority DESC, run_at, seq`, q.name)
			if err != nil {
				return err
			}
			var db []int64
			for rows.Next() {
				var seq int64
				if err := rows.Scan(&seq); err != nil {
					return err
				}
				if !w.leases.leased(seq) {
					db = append(db, seq)
				}
			}
			if err := closeRows(rows); err != nil {
				return err
			}
			live := q.win.live()
			if len(live) > len(db) {
				t.Errorf("queue %s: window holds %d jobs, the database %d", q.name, len(live), len(db))
				continue
			}
			for i, e := range live {
				if db[i] != e.seq {
					t.Errorf("queue %s: window[%d] is seq %d, database has %d", q.name, i, e.seq, db[i])
				}
			}
			if q.win.complete && len(db) > len(live) {
				t.Errorf("queue %s: window says complete but the database has more", q.name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The in-memory counts are rebuilt from the database at open: after a
// restart they match a count query in every queue and state.
func TestRestartRebuildsCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, queue := range []string{"a", "b"} {
		b.insert(params(queue, 20)...)
		b.insert(params(queue, 5, func(_ int, p *store.JobInsertParams) { p.State, p.RunAt = job.StateScheduled, t0.Add(time.Hour) })...)
		js := b.claim(9, queue)
		for i, j := range js[:6] {
			var err error
			switch i % 3 {
			case 0:
				_, err = b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			case 1:
				_, err = b.s.JobFail(b.ctx, &store.JobFailParams{Items: []job.FailItem{{ID: j.ID, Token: j.LeaseToken, NoRetry: i > 3}}, Now: t0})
			case 2:
				_, err = b.s.JobCancel(b.ctx, j.ID, t0)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.s.QueueSetPaused(b.ctx, "p", true); err != nil {
		t.Fatal(err)
	}
	before, err := b.s.QueueList(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.reopen()
	after, err := b.s.QueueList(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("queues after restart %+v, before %+v", after, before)
	}
	for _, q := range after {
		b.checkCounts(q.Name)
	}
}

// Concurrent single inserts that wait for the writer share commits. The
// test holds the writer's turn until all of them wait, so that how the
// goroutines happen to be scheduled cannot decide the outcome.
func TestGroupCommitBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.s.c.commits.Load()
	const inserts = 200
	b.s.c.turn.Lock()
	var wg sync.WaitGroup
	for i := 0; i < inserts; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0}); err != nil {
				t.Error(err)
			}
		}()
	}
	for deadline := time.Now().Add(time.Minute); b.s.c.waiting.Load() < inserts; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.s.c.turn.Unlock()
			t.Fatalf("%d of %d inserts wait for the writer after a minute", b.s.c.waiting.Load(), inserts)
		}
	}
	b.s.c.turn.Unlock()
	wg.Wait()
	commits := b.s.c.commits.Load() - before
	t.Logf("%d concurrent inserts took %d commits", inserts, commits)
	if commits > 10 {
		t.Fatalf("%d concurrent inserts took %d commits, want far fewer", inserts, commits)
	}
	if c := b.counts("q"); c[job.StateAvailable] != inserts {
		t.Fatalf("counts %v", c)
	}
}

// A lone caller runs its batch on its own goroutine; right after a shared
// batch, a caller leaves its operation to the writer's goroutine, which
// lets others join it.
func TestALoneCallerCommitsItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// where runs an operation and tells whose goroutine ran it.
	where := func() string {
		var stack string
		if err := b.s.do(b.ctx, 1, func(*writer) error { stack = string(debug.Stack()); return nil }); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(stack, "(*committer).commitHere"):
			return "caller"
		case strings.Contains(stack, "(*committer).run("):
			return "writer"
		}
		t.Fatalf("an operation ran on neither goroutine:\n%s", stack)
		return ""
	}
	// turnFree waits for the writer's goroutine to let the turn go, which
	// it does just after it answers.
	turnFree := func() {
		waitFor(t, func() bool {
			if b.s.c.turn.TryLock() {
				b.s.c.turn.Unlock()
				return true
			}
			return false
		})
	}
	if got := where(); got != "caller" {
		t.Fatalf("a lone operation ran on the %s's goroutine, want the caller's", got)
	}

	// A shared batch: two operations queued behind one that holds the turn.
	gate, running := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- b.s.do(b.ctx, 1, func(*writer) error { close(running); <-gate; return nil })
	}()
	<-running
	queued := make(chan error, 2)
	for range 2 {
		go func() { queued <- b.s.do(b.ctx, 1, func(*writer) error { return nil }) }()
	}
	waitFor(t, func() bool { return b.s.c.waiting.Load() == 2 })
	close(gate)
	for _, ch := range []chan error{held, queued, queued} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	turnFree()
	if got := where(); got != "writer" {
		t.Fatalf("after a shared batch an operation ran on the %s's goroutine, want the writer's", got)
	}
	turnFree()
	if got := where(); got != "caller" {
		t.Fatalf("after a lone batch an operation ran on the %s's goroutine, want the caller's", got)
	}
}

// A failing operation rolls back alone; the others of its batch commit.
func TestFailingOpRollsBackAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 10)...)
	b.claim(1, "q") // warm the window
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps := params("q", 3)
			if i%4 == 0 {
				ps[2].State = "bogus"
			}
			_, errs[i] = b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i%4 == 0) != (err != nil) {
			t.Fatalf("insert %d: %v", i, err)
		}
		if err != nil && !strings.Contains(err.Error(), "insert jobs: jobs[2]") {
			t.Fatalf("error lacks context: %v", err)
		}
	}
	b.checkCounts("q")
	checkWindow(t, b)
	if got := len(b.claim(1000, "q")); got != 9+30*3 {
		t.Fatalf("claimed %d, want %d", got, 9+30*3)
	}
}

// Operations already handed to the writer finish when Close is called.
func TestCloseFinishesQueuedOps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0})
			switch {
			case err == nil:
				mu.Lock()
				stored++
				mu.Unlock()
			case !errors.Is(err, job.ErrUnavailable):
				t.Error(err)
			}
		}()
	}
	if err := b.s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	b.open()
	var n int64
	if err := b.s.rdb.QueryRow(`SELECT COUNT(*) FROM jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != int64(stored) {
		t.Fatalf("%d inserts acknowledged, %d stored", stored, n)
	}
}

// crash stops s the way a killed process would: the writer ends and the
// database closes without the leases being written.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.c.mu.Lock()
	s.c.closed = true
	close(s.c.ops)
	s.c.mu.Unlock()
	<-s.c.done
	if err := s.closeDBs(); err != nil {
		t.Fatal(err)
	}
	s.closeOnce.Do(func() {})
}

// After a crash, jobs that were active are available again, their next
// hand-out has a higher token than any before the crash, and the old
// holders can no longer ack; a job cancelled while active stays cancelled.
func TestCrashLosesHandOutsNotJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 4)...)
	before := b.claim(4, "q")
	if _, err := b.s.JobCancel(b.ctx, before[3].ID, t0); err != nil {
		t.Fatal(err)
	}
	done, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []job.CompleteItem{{ID: before[0].ID, Token: before[0].LeaseToken}}, Now: t0})
	if err != nil || done[0].Err != nil {
		t.Fatalf("ack: %v %+v", err, done)
	}
	crash(t, b.s)
	b.open()
	if c := b.counts("q"); c[job.StateAvailable] != 2 || c[job.StateCompleted] != 1 || c[job.StateActive] != 1 {
		t.Fatalf("counts after the crash: %v", c)
	}
	again := b.claim(10, "q")
	if len(again) != 2 {
		t.Fatalf("claimed %d jobs after the crash, want the 2 that were active", len(again))
	}
	var highest int64
	for _, j := range before {
		highest = max(highest, j.LeaseToken)
	}
	for _, j := range again {
		if j.LeaseToken <= highest || j.Attempt != 1 {
			t.Fatalf("hand-out after the crash: token %d (highest before %d), attempt %d", j.LeaseToken, highest, j.Attempt)
		}
	}
	stale := []job.CompleteItem{{ID: before[1].ID, Token: before[1].LeaseToken}, {ID: before[2].ID, Token: before[2].LeaseToken}}
	out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: stale, Now: t0})
	if err != nil || !errors.Is(out[0].Err, job.ErrLeaseLost) || !errors.Is(out[1].Err, job.ErrLeaseLost) {
		t.Fatalf("acks from before the crash: %v %+v", err, out)
	}
	cancelled := b.get(before[3].ID)
	if cancelled.State != job.StateActive || !cancelled.CancelRequested {
		t.Fatalf("job cancelled while active, after the crash: %s cancel %v", cancelled.State, cancelled.CancelRequested)
	}
	// Its lease ends with the two new ones, all from t0.
	res, err := b.s.JobRescueExpired(b.ctx, cancelled.LeaseExpiresAt, 10)
	if err != nil || res.Count != 3 {
		t.Fatalf("rescue: %+v %v", res, err)
	}
	if got := b.get(before[3].ID); got.State != job.StateCancelled {
		t.Fatalf("cancelled job ends %s", got.State)
	}
	b.checkCounts("q")
	checkWindow(t, b)
}

// A batch large enough for multi-row inserts resolves duplicate ids, of
// earlier jobs and within the batch, each to the first job with the id.
func TestChunkedInsertResolvesDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := b.insert(params("q", 1)...)[0].Job
	ps := params("q", 3*insertChunk+5)
	ps[3].ID = old.ID
	ps[7].ID = ps[5].ID
	ps[insertChunk+1].ID = ps[2].ID
	res := b.insert(ps...)
	for i, r := range res {
		var want string
		switch i {
		case 3:
			want = old.ID
		case 7:
			want = ps[5].ID
		case insertChunk + 1:
			want = ps[2].ID
		}
		if want != "" {
			if !r.Duplicate || r.Job.ID != want {
				t.Fatalf("job %d: duplicate %v of %s, want a duplicate of %s", i, r.Duplicate, r.Job.ID, want)
			}
			continue
		}
		if r.Duplicate || r.Job.ID != ps[i].ID {
			t.Fatalf("job %d: %+v", i, r)
		}
	}
	if c := b.counts("q"); c[job.StateAvailable] != int64(1+len(ps)-3) {
		t.Fatalf("counts %v", c)
	}
	if got := b.get(ps[5].ID); string(got.Payload) != string(ps[5].Payload) {
		t.Fatalf("job %s has payload %s, want the first one's %s", ps[5].ID, got.Payload, ps[5].Payload)
	}
	b.checkCounts("q")
	checkWindow(t, b)
}

// A call whose jobs do not fill a chunk goes in with several statements
// of different sizes (flush); the jobs keep their order, and a duplicate
// id in a later statement resolves to the job of an earlier one.
func TestPartialChunksKeepOrderAndResolveDuplicates(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 3, 7, 29, 31, 33, 63} {
		b := setup(t)
		queue := fmt.Sprintf("q%d", n)
		ps := params(queue, n)
		ps[n-1].ID = ps[0].ID // in the last statement, a duplicate of the first job
		res := b.insert(ps...)
		if last := res[n-1]; !last.Duplicate || last.Job.ID != ps[0].ID || string(last.Job.Payload) != string(ps[0].Payload) {
			t.Fatalf("%d jobs: the last one is %+v, want a duplicate of the first", n, last)
		}
		claimed := b.claim(n, queue)
		if len(claimed) != n-1 {
			t.Fatalf("%d jobs: claimed %d, want %d", n, len(claimed), n-1)
		}
		for i, j := range claimed {
			if j.ID != ps[i].ID {
				t.Fatalf("%d jobs: claim %d is %s, want %s, the job enqueued %dth", n, i, j.ID, ps[i].ID, i)
			}
		}
		b.checkCounts(queue)
	}
}

// Acks in one call that do not fill a chunk go in with several statements
// of different sizes (completions.flush); each job gets its own result and
// state, and none is left active.
func TestPartialAckChunksCompleteEachJob(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3, 31, 45} {
		b := setup(t)
		queue := fmt.Sprintf("q%d", n)
		b.insert(params(queue, n)...)
		claimed := b.claim(n, queue)
		items := make([]job.CompleteItem, len(claimed))
		for i, j := range claimed {
			items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken, Result: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		}
		items[0].Result = nil
		outs, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: items, Now: t0})
		if err != nil {
			t.Fatalf("%d acks: %v", n, err)
		}
		for i, o := range outs {
			if o.Err != nil || o.State != job.StateCompleted {
				t.Fatalf("%d acks: ack %d: %+v", n, i, o)
			}
			got := b.get(items[i].ID)
			if got.State != job.StateCompleted || string(got.Result) != string(items[i].Result) {
				t.Fatalf("%d acks: job %d is %s with result %q, want completed with %q", n, i, got.State, got.Result, items[i].Result)
			}
		}
		if c := b.counts(queue); c[job.StateCompleted] != int64(n) || c[job.StateActive] != 0 {
			t.Fatalf("%d acks: counts %v", n, c)
		}
		b.checkCounts(queue)
	}
}

// A batch whose changes are all of process durability commits without
// waiting for the disk; any full change makes the commit wait.
func TestProcessDurabilitySkipsFsync(t *testing.T) {
	t.Parallel()
	b := setup(t)
	synced := func(call func()) bool {
		before := b.s.c.unsynced.Load()
		call()
		return b.s.c.unsynced.Load() == before
	}
	insert := func(ps ...store.JobInsertParams) func() {
		return func() { b.insert(ps...) }
	}
	process := func(_ int, p *store.JobInsertParams) { p.Durability = job.DurabilityProcess }
	if synced(insert(params("q", 2, process)...)) {
		t.Fatal("a process-durability insert was fsynced")
	}
	if !synced(insert(params("q", 1)...)) {
		t.Fatal("a full-durability insert was not fsynced")
	}
	if !synced(insert(append(params("q", 1), params("q", 1, process)...)...)) {
		t.Fatal("an insert with a full-durability job was not fsynced")
	}
	var relaxed, full []job.CompleteItem
	for _, j := range b.claim(10, "q") {
		item := job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
		if j.Durability == job.DurabilityProcess {
			relaxed = append(relaxed, item)
		} else {
			full = append(full, item)
		}
	}
	ack := func(items []job.CompleteItem) func() {
		return func() {
			out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: items, Now: t0})
			if err != nil || len(out) != len(items) || out[0].Err != nil {
				t.Fatalf("ack: %v %+v", err, out)
			}
		}
	}
	if len(relaxed) != 3 || synced(ack(relaxed)) {
		t.Fatalf("acks of %d process jobs were fsynced", len(relaxed))
	}
	if !synced(ack(full)) {
		t.Fatal("acks of full jobs were not fsynced")
	}
	b.checkCounts("q")
}
