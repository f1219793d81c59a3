package sqlitestore

import (
	"errors"
	"math/rand/v2"
	"reflect"
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
				_, err = b.s.JobComplete(b.ctx, &store.JobCompleteParams{Items: []store.JobCompleteItem{{ID: j.ID, Token: j.LeaseToken}}, Now: t0})
			case 1:
				_, err = b.s.JobFail(b.ctx, &store.JobFailParams{Items: []store.JobFailItem{{ID: j.ID, Token: j.LeaseToken, NoRetry: i > 3}}, Now: t0})
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
