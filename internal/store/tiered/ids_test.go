package tiered

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// countedTier counts the lookups of ids in a tier.
type countedTier struct {
	MemoryStore
	lookups atomic.Int64
}

func (c *countedTier) JobGetMany(ctx context.Context, ids []string) (map[string]*job.Job, error) {
	c.lookups.Add(1)
	return c.MemoryStore.JobGetMany(ctx, ids)
}

// Jobs whose ids the engine made just now are inserted without a look in
// the other tier, whichever tier they go to; a job whose id its client
// chose is looked for there, and found.
func TestFreshIDsAreNotLookedUpInTheOtherTier(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, m := openTiers(t, t.TempDir())
	disk, mem := &countedTier{MemoryStore: d}, &countedTier{MemoryStore: m}
	s, err := New(ctx, disk, mem)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	fresh := func(ps []store.JobInsertParams) []store.JobInsertParams {
		for i := range ps {
			ps[i].FreshID = true
		}
		return ps
	}

	insert(t, s, fresh(memJobs("q", 2, job.DurabilityMemory))...)
	insert(t, s, fresh(memJobs("q", 2, job.DurabilityProcess))...)
	if n, k := disk.lookups.Load(), mem.lookups.Load(); n != 0 || k != 0 {
		t.Fatalf("fresh ids were looked up: %d times in the disk tier, %d in the memory tier", n, k)
	}

	chosen := memJobs("q", 1, job.DurabilityProcess)
	insert(t, s, chosen...)
	if n := mem.lookups.Load(); n != 1 {
		t.Fatalf("a chosen id was looked up %d times in the memory tier, want once", n)
	}
	again := memJobs("q", 1, job.DurabilityMemory)
	again[0].ID = chosen[0].ID
	res, err := s.JobInsertMany(ctx, &store.JobInsertManyParams{Jobs: again, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Job.Durability != job.DurabilityProcess {
		t.Fatalf("a memory job with the id of a durable one: %+v, want the durable job as a duplicate", res[0])
	}
}
