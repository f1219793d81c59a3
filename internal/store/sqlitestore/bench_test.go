package sqlitestore

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

var benchPayload = json.RawMessage(`{"user":42,"template":"welcome","locale":"en-GB"}`)

func benchParams(n int) []store.JobInsertParams {
	ps := make([]store.JobInsertParams, n)
	for i := range ps {
		ps[i] = store.JobInsertParams{
			ID: job.NewID(time.Now()), Queue: "bench", Kind: "send_email", Payload: benchPayload,
			State: job.StateAvailable, RunAt: t0, MaxAttempts: 25, LeaseDuration: 30 * time.Second,
			Backoff: job.Backoff{Kind: job.BackoffExponential, Base: time.Second, Max: time.Hour, Jitter: 0.2},
		}
	}
	return ps
}

func reportJobs(b *testing.B, perOp int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N*perOp)/s, "jobs/s")
	}
}

// BenchmarkInsertBatch1000 enqueues 1000 jobs per call.
func BenchmarkInsertBatch1000(b *testing.B) {
	s := setup(b).s
	for b.Loop() {
		b.StopTimer()
		ps := benchParams(1000)
		b.StartTimer()
		if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: ps, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	reportJobs(b, 1000)
}

// BenchmarkInsertSingleConcurrent enqueues one job per call from many
// goroutines, which group commit batches together.
func BenchmarkInsertSingleConcurrent(b *testing.B) {
	s := setup(b).s
	before := s.w.commits.Load()
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.JobInsertMany(b.Context(), &store.JobInsertManyParams{Jobs: benchParams(1), Now: t0}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportJobs(b, 1)
	if commits := s.w.commits.Load() - before; commits > 0 {
		b.ReportMetric(float64(b.N)/float64(commits), "jobs/commit")
	}
}

// stock keeps available jobs in the bench queue; callers stop the timer
// around ensure.
type stock struct {
	b    *testing.B
	s    *Store
	left int
}

func (k *stock) ensure(need int) {
	if k.left >= need {
		return
	}
	for i := 0; i < 50; i++ {
		if _, err := k.s.JobInsertMany(k.b.Context(), &store.JobInsertManyParams{Jobs: benchParams(1000), Now: t0}); err != nil {
			k.b.Fatal(err)
		}
	}
	k.left += 50_000
}

// BenchmarkClaim leases 100 jobs per call from a deep queue.
func BenchmarkClaim(b *testing.B) {
	s := setup(b).s
	k := &stock{b: b, s: s}
	for b.Loop() {
		if k.left < 100 {
			b.StopTimer()
			k.ensure(100)
			b.StartTimer()
		}
		js, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"bench"}, Max: 100, Now: t0})
		if err != nil || len(js) != 100 {
			b.Fatalf("claimed %d: %v", len(js), err)
		}
		k.left -= 100
	}
	reportJobs(b, 100)
}

// BenchmarkComplete acknowledges 100 leased jobs per call.
func BenchmarkComplete(b *testing.B) {
	s := setup(b).s
	k := &stock{b: b, s: s}
	var leased []*job.Job
	for b.Loop() {
		if len(leased) < 100 {
			b.StopTimer()
			k.ensure(10_000)
			for len(leased) < 10_000 {
				js, err := s.JobClaim(b.Context(), &store.JobClaimParams{Queues: []string{"bench"}, Max: 1000, Now: t0})
				if err != nil {
					b.Fatal(err)
				}
				leased = append(leased, js...)
				k.left -= len(js)
			}
			b.StartTimer()
		}
		items := make([]store.JobCompleteItem, 100)
		for i, j := range leased[:100] {
			items[i] = store.JobCompleteItem{ID: j.ID, Token: j.LeaseToken, Result: json.RawMessage(`{"ok":true}`)}
		}
		leased = leased[100:]
		out, err := s.JobComplete(b.Context(), &store.JobCompleteParams{Items: items, Now: t0})
		if err != nil || out[0].Err != nil {
			b.Fatalf("complete: %v %v", err, out[0].Err)
		}
	}
	reportJobs(b, 100)
}
