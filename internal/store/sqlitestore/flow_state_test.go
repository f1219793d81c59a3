package sqlitestore

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The states of groups that only a rate log held go once the log no
// longer counts, so that groups coming and going keep memory bounded.
func TestIdleGroupStatesAreDropped(t *testing.T) {
	t.Parallel()
	r := job.Rate{Limit: 1, Period: time.Second}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	var f flowState
	for i := range 20000 {
		f.now = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		gs := f.state(fmt.Sprint("tenant-", i), r)
		if gs == nil {
			t.Fatalf("group %d got no state with %d held", i, len(f.groups))
		}
		gs.rate = gs.rate.Add(r, f.now, 1)
	}
	// About 100 groups started within the last second; the rest are idle.
	if n := len(f.groups); n > 1300 {
		t.Fatalf("%d group states held after 20,000 groups, 100 of them in the window", n)
	}
	for g := range 100 {
		if _, ok := f.groups[fmt.Sprint("tenant-", 19999-g)]; !ok {
			t.Fatalf("group tenant-%d dropped while its start still counts", 19999-g)
		}
	}
}

// A claim of one group that finds every group state taken drops the
// window of a group that no rate holds, keeping the ring's turn, and
// finds none to drop when rates hold them all.
func TestEvictKeepsTheRingsTurn(t *testing.T) {
	t.Parallel()
	r := job.Rate{Limit: 1, Period: time.Minute}
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	f := flowState{now: t0, known: true}
	for _, g := range []string{"a", "b", "c", "d"} {
		gs := f.state(g, r)
		gs.win = newWindow(groupWindow, false, nil)
		f.ring = append(f.ring, gs)
		if g != "c" {
			gs.rate = gs.rate.Add(r, t0, 1) // a start that still counts
		}
	}
	f.next = 3 // d's turn
	if !f.evict(r) {
		t.Fatal("no group dropped, though c has no rate that counts")
	}
	if want := []string{"a", "b", "d"}; fmt.Sprint(ringNames(f)) != fmt.Sprint(want) || f.ring[f.next].name != "d" {
		t.Fatalf("ring %v with next %d after the drop, want %v with d's turn", ringNames(f), f.next, want)
	}
	if _, ok := f.groups["c"]; ok || f.known {
		t.Fatalf("after the drop: c's state kept %v, known %v; want it gone and the ring no longer known whole", ok, f.known)
	}
	if f.evict(r) {
		t.Fatalf("a group dropped though every rate still counts: ring %v", ringNames(f))
	}
}

// ringNames are the names of the groups in f's ring, in turn order.
func ringNames(f flowState) []string {
	var names []string
	for _, gs := range f.ring {
		names = append(names, gs.name)
	}
	return names
}

// staleRows counts the rows of grouped queues that the claim index by
// group still holds though they are not available.
func staleRows(t *testing.T, dir string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", dsn(filepath.Join(dir, "spool.db"), "normal", false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM jobs WHERE gready = 1 AND grp IS NOT NULL AND state != 'available'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Rows that leave the available state are swept out of the claim index
// by group in bulk, and a row that comes back to it (a retry of a dead
// job, a promoted scheduled job) is claimed again: no job is lost to the
// sweep, none is handed out twice.
func TestGroupClaimIndexIsSwept(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := b.ctx
	now := time.Now().UTC()
	const n = 3 * staleSweep / 2
	params := func(state job.State, runAt time.Time) []store.JobInsertParams {
		ps := make([]store.JobInsertParams, n)
		for i := range ps {
			ps[i] = store.JobInsertParams{ID: job.NewID(now), Queue: "q", Kind: "k", State: state, RunAt: runAt,
				MaxAttempts: 1, LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed}, Group: fmt.Sprint("g", i%50)}
		}
		return ps
	}
	later := now.Add(time.Hour)
	if _, err := b.s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: append(params(job.StateAvailable, now), params(job.StateScheduled, later)...), Now: now}); err != nil {
		t.Fatal(err)
	}
	drain := func(at time.Time, fail bool) int {
		seen := map[string]bool{}
		got := 0
		for {
			js, err := store.ClaimedJobs(b.s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 500, Now: at}))
			if err != nil {
				t.Fatal(err)
			}
			if len(js) == 0 {
				return got
			}
			for _, j := range js {
				if seen[j.ID] {
					t.Fatalf("job %s handed out twice", j.ID)
				}
				seen[j.ID] = true
			}
			got += len(js)
			if fail {
				items := make([]job.FailItem, len(js))
				for i, j := range js {
					items[i] = job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "boom", NoRetry: true}
				}
				if _, err := b.s.JobFail(ctx, &store.JobFailParams{Items: items, Now: at}); err != nil {
					t.Fatal(err)
				}
				continue
			}
			items := make([]job.CompleteItem, len(js))
			for i, j := range js {
				items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
			}
			if _, err := b.s.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The available half runs and dies; its rows are swept as they go.
	if got := drain(now, true); got != n {
		t.Fatalf("first drain: %d jobs, want %d", got, n)
	}
	if stale := staleRows(t, b.dir); stale >= staleSweep {
		t.Fatalf("%d stale rows in the claim index, want fewer than %d", stale, staleSweep)
	}
	// Every dead job comes back, and the scheduled half comes due.
	if k, err := b.s.JobRetryMany(ctx, &store.JobBulkParams{Queue: "q", State: job.StateDead, Now: now}); err != nil || k != n {
		t.Fatalf("retry the dead: %d, %v", k, err)
	}
	if _, err := b.s.JobPromoteDue(ctx, later, 2*n); err != nil {
		t.Fatal(err)
	}
	if got := drain(later, false); got != 2*n {
		t.Fatalf("second drain: %d jobs, want the %d retried and promoted", got, 2*n)
	}
	b.reopen()
	if stale := staleRows(t, b.dir); stale != 0 {
		t.Fatalf("%d stale rows after a close, want none", stale)
	}
}
