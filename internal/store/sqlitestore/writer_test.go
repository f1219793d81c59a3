package sqlitestore

import (
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Eight workers claiming from one queue get every job exactly once.
func TestConcurrentClaimsHandOutEachJobOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ReadyWindow = 100 })
	const total = 5000
	for i := 0; i < total; i += 1000 {
		b.insert(params("q", 1000)...)
	}
	var mu sync.Mutex
	seen := make(map[string]int)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				js, err := b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 1 + rand.IntN(40), Now: t0})
				if err != nil {
					t.Error(err)
					return
				}
				if len(js) == 0 {
					return
				}
				mu.Lock()
				for _, j := range js {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("%d distinct jobs claimed, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("job %s handed out %d times", id, n)
		}
	}
	if c := b.counts("q"); c[job.StateActive] != total || c[job.StateAvailable] != 0 {
		t.Fatalf("counts %v", c)
	}
}

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

// checkWindow compares every window with the database.
func checkWindow(t *testing.T, b *bundle) {
	t.Helper()
	err := b.s.do(b.ctx, 1, func(w *writer) error {
		for _, q := range w.queues {
			rows, err := w.st.refill.Query(q.name, q.win.len()+1)
			if err != nil {
				return err
			}
			var db []int64
			for rows.Next() {
				var seq, prio, runAt int64
				if err := rows.Scan(&seq, &prio, &runAt); err != nil {
					return err
				}
				db = append(db, seq)
			}
			if err := closeRows(rows); err != nil {
				return err
			}
			live := q.win.live()
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

// Jobs, leases and counts survive a close and reopen.
func TestRestartKeepsJobsAndCounts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insert(params("q", 50)...)
	b.insert(params("q", 5, func(_ int, p *store.JobInsertParams) { p.State, p.RunAt = job.StateScheduled, t0.Add(time.Hour) })...)
	leased := b.claim(10, "q")
	if err := b.s.QueueSetPaused(b.ctx, "p", true); err != nil {
		t.Fatal(err)
	}
	before, _ := b.s.QueueList(b.ctx)
	b.reopen()
	after, _ := b.s.QueueList(b.ctx)
	if len(after) != len(before) {
		t.Fatalf("queues after restart %+v, before %+v", after, before)
	}
	for i := range before {
		if after[i].Name != before[i].Name || after[i].Paused != before[i].Paused {
			t.Fatalf("queue after restart %+v, before %+v", after[i], before[i])
		}
		for st, n := range before[i].Counts {
			if after[i].Counts[st] != n {
				t.Fatalf("counts after restart %v, before %v", after[i].Counts, before[i].Counts)
			}
		}
	}
	out, err := b.s.JobComplete(b.ctx, &store.JobCompleteParams{Now: t0, Items: []store.JobCompleteItem{{ID: leased[0].ID, Token: leased[0].LeaseToken}}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("ack after restart: %+v %v", out, err)
	}
	if got := len(b.claim(100, "q")); got != 40 {
		t.Fatalf("claimed %d after restart, want 40", got)
	}
	b.checkCounts("q")
}

// Concurrent single inserts share commits.
func TestGroupCommitBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.s.w.commits.Load()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: params("q", 1), Now: t0}); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	commits := b.s.w.commits.Load() - before
	t.Logf("200 concurrent inserts took %d commits", commits)
	if commits >= 100 {
		t.Fatalf("200 concurrent inserts took %d commits, want far fewer", commits)
	}
	if c := b.counts("q"); c[job.StateAvailable] != 200 {
		t.Fatalf("counts %v", c)
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
