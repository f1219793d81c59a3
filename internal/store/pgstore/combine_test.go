package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/pgtest"
	"github.com/spoolq/spool/internal/store"
)

// Concurrent single inserts go in shared rounds; a round that one call's
// existing id makes fail sends each call back alone, so that the call
// with the taken id gets its duplicate and every other call its insert,
// each exactly once.
func TestCombinedInsertsKeepEachCallsOutcome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, pgtest.Schema(t))
	t0 := s.Now()
	if _, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: t0, Jobs: []store.JobInsertParams{
		{ID: "taken", Queue: "q", Kind: "first", State: job.StateAvailable, RunAt: t0, MaxAttempts: 1, LeaseDuration: 1e9}}}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		const callers = 24
		var wg sync.WaitGroup
		results := make([]store.InsertResult, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", round, i)
				if i == callers/2 {
					id = "taken"
				}
				out, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Now: t0, Jobs: []store.JobInsertParams{
					{ID: id, Queue: "q", Kind: "later", State: job.StateAvailable, RunAt: t0, MaxAttempts: 1, LeaseDuration: 1e9}}})
				if err == nil {
					results[i] = out[0]
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, caller %d: %v", round, i, err)
			}
			r := results[i]
			if i == callers/2 {
				if !r.Duplicate || r.Job.Kind != "first" {
					t.Fatalf("round %d: the taken id gave %+v, want the first job as a duplicate", round, r)
				}
				continue
			}
			if r.Duplicate || r.Job.ID != fmt.Sprintf("r%d-%d", round, i) {
				t.Fatalf("round %d, caller %d: %+v, want its own job inserted", round, i, r)
			}
		}
	}
	q, err := s.QueueGet(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if n := q.Counts[job.StateAvailable]; n != 1+20*23 {
		t.Fatalf("%d jobs available, want %d", n, 1+20*23)
	}
}
