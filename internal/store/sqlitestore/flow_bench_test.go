package sqlitestore

import (
	"fmt"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// BenchmarkClaimGrouped claims and acknowledges a backlog of 50,000 jobs
// spread over 1,000 groups with a cap of 2 a group, 200 at a time: the
// path of a fair queue; groups=0 is the same backlog in a plain queue.
func BenchmarkClaimGrouped(b *testing.B) {
	const backlog = 50000
	for _, groups := range []int{0, 1000} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s := setup(b).s
			ctx := b.Context()
			now := time.Now()
			fill := func(n int) {
				ps := make([]store.JobInsertParams, n)
				for i := range ps {
					ps[i] = store.JobInsertParams{ID: job.NewID(now), Queue: "q", Kind: "k", State: job.StateAvailable,
						RunAt: now, MaxAttempts: 3, LeaseDuration: time.Minute, Backoff: job.Backoff{Kind: job.BackoffFixed}}
					if groups > 0 {
						ps[i].Group = fmt.Sprintf("g%d", i%groups)
					}
				}
				if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: ps, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
			if groups > 0 {
				if err := s.QueueSetLimits(ctx, "q", job.Limits{GroupMaxActive: 2}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			claimed := 0
			for claimed < b.N {
				b.StopTimer()
				fill(backlog)
				b.StartTimer()
				for left := backlog; left > 0; {
					js, err := store.ClaimedJobs(s.JobClaim(ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 200, Now: now}))
					if err != nil || len(js) == 0 {
						b.Fatalf("claim: %d, %v", len(js), err)
					}
					items := make([]job.CompleteItem, len(js))
					for i, j := range js {
						items[i] = job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
					}
					if _, err := s.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: now}); err != nil {
						b.Fatal(err)
					}
					left -= len(js)
					claimed += len(js)
				}
			}
			b.ReportMetric(float64(claimed)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
