package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)

// bundle is one open store on a fresh data folder.
type bundle struct {
	t   testing.TB
	s   *Store
	dir string
	ctx context.Context
}

func setup(t testing.TB, change ...func(*Config)) *bundle {
	t.Helper()
	dir := t.TempDir()
	b := &bundle{t: t, dir: dir, ctx: context.Background()}
	b.open(change...)
	t.Cleanup(func() { _ = b.s.Close() })
	return b
}

func (b *bundle) open(change ...func(*Config)) {
	b.t.Helper()
	cfg := Config{Dir: b.dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, c := range change {
		c(&cfg)
	}
	s, err := Open(b.ctx, cfg)
	if err != nil {
		b.t.Fatalf("open store: %v", err)
	}
	b.s = s
}

// reopen closes the store and opens it again on the same folder.
func (b *bundle) reopen(change ...func(*Config)) {
	b.t.Helper()
	if err := b.s.Close(); err != nil {
		b.t.Fatalf("close store: %v", err)
	}
	b.open(change...)
}

func params(queue string, n int, mod ...func(i int, p *store.JobInsertParams)) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			ID: job.NewID(t0), Queue: queue, Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			State: job.StateAvailable, RunAt: t0, MaxAttempts: 3, LeaseDuration: 30 * time.Second,
			Backoff: job.Backoff{Kind: job.BackoffFixed, Base: time.Second, Max: time.Hour},
		}
		for _, m := range mod {
			m(i, &ps[i])
		}
	}
	return ps
}

func (b *bundle) insert(ps ...store.JobInsertParams) []store.InsertResult {
	b.t.Helper()
	res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0})
	if err != nil {
		b.t.Fatalf("insert: %v", err)
	}
	return res
}

func (b *bundle) claim(max int, queues ...string) []*job.Job {
	b.t.Helper()
	jobs, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: queues, Max: max, Now: t0}))
	if err != nil {
		b.t.Fatalf("claim: %v", err)
	}
	return jobs
}

func (b *bundle) counts(queue string) map[job.State]int64 {
	b.t.Helper()
	q, err := b.s.QueueGet(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("queue %s: %v", queue, err)
	}
	return q.Counts
}

// checkCounts compares the in-memory counts of queue with a count query,
// taking the leases in memory as active whatever their rows say.
func (b *bundle) checkCounts(queue string) {
	b.t.Helper()
	got := b.counts(queue)
	want := make(map[job.State]int64)
	rows, err := b.s.rdb.Query(`SELECT seq, state FROM jobs WHERE queue = ?`, queue)
	if err != nil {
		b.t.Fatal(err)
	}
	leased := make(map[int64]bool)
	b.s.leases.mu.RLock()
	for seq := range b.s.leases.bySeq {
		leased[seq] = true
	}
	b.s.leases.mu.RUnlock()
	for rows.Next() {
		var seq int64
		var st job.State
		if err := rows.Scan(&seq, &st); err != nil {
			b.t.Fatal(err)
		}
		if leased[seq] {
			st = job.StateActive
		}
		want[st]++
	}
	if err := closeRows(rows); err != nil {
		b.t.Fatal(err)
	}
	for _, st := range job.States {
		if got[st] != want[st] {
			b.t.Fatalf("queue %s: %s count %d in memory, %d in the database", queue, st, got[st], want[st])
		}
	}
}

func (b *bundle) get(id string) *job.Job {
	b.t.Helper()
	j, err := b.s.JobGet(b.ctx, id)
	if err != nil {
		b.t.Fatalf("get %s: %v", id, err)
	}
	return j
}
