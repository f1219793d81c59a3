package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Bench runs the shared benchmarks against the store that h opens, each on
// a fresh store, and reports jobs/s besides the time per call. Work that
// only prepares a call (making parameters, stocking the queue with
// available or leased jobs) runs with the timer stopped. Every benchmark
// also runs with -benchtime=1x, when it prepares only what one call needs.
func Bench(b *testing.B, h Harness) {
	if h.Open == nil {
		b.Fatal("storetest: Harness.Open is nil")
	}
	b.Run("InsertBatch1000", func(b *testing.B) { benchInsertBatch(b, h) })
	b.Run("InsertSingle", func(b *testing.B) { benchInsertSingle(b, h) })
	b.Run("InsertSingleParallel", func(b *testing.B) { benchInsertParallel(b, h) })
	b.Run("Claim100", func(b *testing.B) { benchClaim(b, h) })
	b.Run("Complete100", func(b *testing.B) { benchComplete(b, h) })
	b.Run("Fail100", func(b *testing.B) { benchFail(b, h) })
	b.Run("Extend100", func(b *testing.B) { benchExtend(b, h) })
}

const benchQueue = "bench"

var benchPayload = json.RawMessage(`{"user":42,"template":"welcome","locale":"en-GB"}`)

// benchJobs returns n typical jobs: ids sortable by creation as the engine
// makes them, the engine's default retry policy and lease.
func benchJobs(n int) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			ID: job.NewID(time.Now()), Queue: benchQueue, Kind: "send_email", Payload: benchPayload,
			State: job.StateAvailable, RunAt: t0, MaxAttempts: 25, LeaseDuration: 30 * time.Second,
			Backoff: job.Backoff{Kind: job.BackoffExponential, Base: time.Second, Max: time.Hour, Jitter: 0.2},
		}
	}
	return ps
}

// reportJobs adds the jobs/s metric for perOp jobs per iteration.
func reportJobs(b *testing.B, perOp int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N*perOp)/s, "jobs/s")
	}
}

// stock keeps available jobs in the bench queue and leased ones at hand.
// It grows its refills geometrically, so that a single iteration prepares
// little and a long run refills rarely. Callers stop the timer around it.
type stock struct {
	b      *testing.B
	s      store.Store
	left   int // available jobs in the queue
	chunk  int // size of the next refill
	leased []*job.Job
}

func newStock(b *testing.B, s store.Store) *stock {
	return &stock{b: b, s: s, chunk: 100}
}

// target is how many jobs to prepare when need are missing: at least the
// refill size, which doubles with every refill up to a bound.
func (k *stock) target(need int) int {
	n := max(need, k.chunk)
	k.chunk = min(k.chunk*2, 64_000)
	return n
}

// available makes sure at least need jobs wait in the queue.
func (k *stock) available(need int) {
	if k.left >= need {
		return
	}
	for target := k.target(need); k.left < target; {
		n := min(target-k.left, 1000)
		if _, err := k.s.JobInsertMany(context.Background(), &store.JobInsertManyParams{Jobs: benchJobs(n), Now: t0}); err != nil {
			k.b.Fatalf("stock the queue: %v", err)
		}
		k.left += n
	}
}

// lease makes sure at least need leased jobs are at hand.
func (k *stock) lease(need int) {
	if len(k.leased) >= need {
		return
	}
	target := k.target(need)
	k.available(target - len(k.leased))
	for len(k.leased) < target {
		res, err := k.s.JobClaim(context.Background(), &store.JobClaimParams{Queues: []string{benchQueue}, Max: min(1000, target-len(k.leased)), Now: t0})
		var js []*job.Job
		if res != nil {
			js = res.Jobs
		}
		if err != nil || len(js) == 0 {
			k.b.Fatalf("lease stock: %d jobs, %v", len(js), err)
		}
		k.leased = append(k.leased, js...)
		k.left -= len(js)
	}
}

// take removes n leased jobs from the stock.
func (k *stock) take(n int) []*job.Job {
	if len(k.leased) < n {
		k.b.StopTimer()
		k.lease(n)
		k.b.StartTimer()
	}
	js := k.leased[:n]
	k.leased = k.leased[n:]
	return js
}

// InsertBatch1000 enqueues 1000 jobs per call.
func benchInsertBatch(b *testing.B, h Harness) {
	s := h.Open(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		ps := benchJobs(1000)
		b.StartTimer()
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
			b.Fatalf("insert: %v", err)
		}
	}
	reportJobs(b, 1000)
}

// InsertSingle inserts one job per call from one caller: the latency of
// an insert, commit included.
func benchInsertSingle(b *testing.B, h Harness) {
	s := h.Open(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: benchJobs(1), Now: t0}); err != nil {
			b.Fatalf("insert: %v", err)
		}
	}
	reportJobs(b, 1)
}

// InsertSingleParallel enqueues one job per call from many goroutines at
// once, as independent producers do.
func benchInsertParallel(b *testing.B, h Harness) {
	s := h.Open(b)
	ctx := context.Background()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: benchJobs(1), Now: t0}); err != nil {
				b.Errorf("insert: %v", err)
				return
			}
		}
	})
	reportJobs(b, 1)
}

// Claim100 leases 100 jobs per call from a deep queue.
func benchClaim(b *testing.B, h Harness) {
	s := h.Open(b)
	k := newStock(b, s)
	ctx := context.Background()
	for b.Loop() {
		if k.left < 100 {
			b.StopTimer()
			k.available(100)
			b.StartTimer()
		}
		js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{benchQueue}, Max: 100, Now: t0}))
		if err != nil || len(js) != 100 {
			b.Fatalf("claim: %d jobs, %v", len(js), err)
		}
		k.left -= 100
	}
	reportJobs(b, 100)
}

// Complete100 acknowledges 100 leased jobs per call, each with a result.
func benchComplete(b *testing.B, h Harness) {
	s := h.Open(b)
	k := newStock(b, s)
	ctx := context.Background()
	result := json.RawMessage(`{"ok":true}`)
	for b.Loop() {
		js := k.take(100)
		items := make([]job.CompleteItem, len(js))
		for i, j := range js {
			items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken, Result: result}
		}
		out, err := s.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: t0})
		if err != nil || out[0].Err != nil || out[99].Err != nil {
			b.Fatalf("complete: %v, %v", err, out)
		}
	}
	reportJobs(b, 100)
}

// Fail100 fails 100 leased jobs per call, sending each to retrying.
func benchFail(b *testing.B, h Harness) {
	s := h.Open(b)
	k := newStock(b, s)
	ctx := context.Background()
	rnd := func() float64 { return 0.5 }
	for b.Loop() {
		js := k.take(100)
		items := make([]job.FailItem, len(js))
		for i, j := range js {
			items[i] = job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "smtp: connection refused"}
		}
		out, err := s.JobFail(ctx, &store.JobFailParams{Items: items, Now: t0, Rand: rnd})
		if err != nil || out[0].State != job.StateRetrying || out[99].State != job.StateRetrying {
			b.Fatalf("fail: %v, %v", err, out)
		}
	}
	reportJobs(b, 100)
}

// Extend100 extends the leases of 100 running jobs per call, as one
// worker's heartbeat does.
func benchExtend(b *testing.B, h Harness) {
	s := h.Open(b)
	k := newStock(b, s)
	ctx := context.Background()
	k.lease(100)
	items := make([]job.ExtendItem, 100)
	for i, j := range k.take(100) {
		items[i] = job.ExtendItem{ID: j.ID, Token: j.LeaseToken}
	}
	now := t0
	for b.Loop() {
		now = now.Add(time.Second)
		out, err := s.JobExtend(ctx, &store.JobExtendParams{Items: items, Now: now})
		if err != nil || out[0].Err != nil || out[99].Err != nil {
			b.Fatalf("extend: %v, %v", err, out)
		}
	}
	reportJobs(b, 100)
}
