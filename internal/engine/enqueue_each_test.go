package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/spoolq/spool/internal/job"
)

// wantField fails unless err is an input error naming field.
func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var in *job.InputError
	if !errors.As(err, &in) || in.Field != field {
		t.Fatalf("%s: %v, want an input error naming %q", what, err, field)
	}
}

// Jobs enqueued together each get what their own Enqueue would give: the
// valid jobs of one durability level share one insert, an invalid one is
// refused naming its field as a single enqueue does, a job the store
// does not keep fails alone, and two jobs of one unique key make one job.
func TestEnqueueEachGivesEachJobItsOwnOutcome(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	reqs := []EnqueueRequest{
		{Queue: "mail", Kind: "k", Durability: job.DurabilityProcess},
		{Queue: "mail", Kind: ""},
		{Queue: "mail", Kind: "k", Durability: job.DurabilityProcess, Priority: 3},
		{Queue: "mail", Kind: "k", Durability: job.DurabilityMemory},
		{Queue: "mail", Kind: "k"},
		{Queue: "mail", Kind: "k", UniqueKey: "u"},
		{Queue: "mail", Kind: "k", UniqueKey: "u"},
		{Queue: "mail", Kind: "k", Durability: job.DurabilityProcess, Priority: 9999999},
	}
	out := b.e.EnqueueEach(b.ctx, reqs)
	if len(out) != len(reqs) {
		t.Fatalf("%d outcomes for %d requests", len(out), len(reqs))
	}
	wantField(t, "a job without a kind", out[1].Err, "kind")
	wantField(t, "a job of a durability the store does not keep", out[3].Err, "durability")
	wantField(t, "a job of a priority out of range", out[7].Err, "priority")
	for _, i := range []int{0, 2, 4} {
		if out[i].Err != nil || out[i].Result.Duplicate || out[i].Result.State != job.StateAvailable {
			t.Fatalf("job %d: %+v, want it created and available", i, out[i])
		}
		if j := b.get(out[i].Result.ID); j.Priority != reqs[i].Priority || j.Queue != "mail" {
			t.Fatalf("job %d stored as %+v", i, j)
		}
	}
	if b.get(out[4].Result.ID).Durability != job.DurabilityFull {
		t.Fatalf("a job without a level did not take its queue's (full)")
	}
	u1, u2 := out[5], out[6]
	if u1.Err != nil || u2.Err != nil || u1.Result.ID != u2.Result.ID || u1.Result.Duplicate == u2.Result.Duplicate {
		t.Fatalf("two jobs of one unique key: %+v and %+v, want one job, created once", u1, u2)
	}
	b.st.mu.Lock()
	inserts := slices.Clone(b.st.inserts)
	b.st.mu.Unlock()
	if !slices.Contains(inserts, 2) {
		t.Fatalf("inserts of %v jobs: the two valid process jobs did not share one", inserts)
	}
}

// Should a shared insert fail, each of its jobs is inserted on its own,
// so that the failure is no job's but its own.
func TestEnqueueEachInsertsAloneWhenTheSharedInsertFails(t *testing.T) {
	t.Parallel()
	b := setupDefaults(t)
	b.st.failShared.Store(true)
	reqs := []EnqueueRequest{{Kind: "a"}, {Kind: "b"}, {Kind: "c"}}
	out := b.e.EnqueueEach(b.ctx, reqs)
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("job %d: %v, want it inserted on its own", i, o.Err)
		}
		if j := b.get(o.Result.ID); j.Kind != reqs[i].Kind {
			t.Fatalf("job %d stored as %+v", i, j)
		}
	}
	b.st.mu.Lock()
	inserts := slices.Clone(b.st.inserts)
	b.st.mu.Unlock()
	if !slices.Equal(inserts, []int{3, 1, 1, 1}) {
		t.Fatalf("inserts of %v jobs, want the shared one, then each alone", inserts)
	}
}
