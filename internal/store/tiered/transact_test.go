package tiered

import (
	"errors"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// claimAll leases every available job of q.
func claimAll(t *testing.T, s *Store, q string) map[job.Durability][]*job.Job {
	t.Helper()
	js, err := store.ClaimedJobs(s.JobClaim(t.Context(), &store.JobClaimParams{Queues: []string{q}, Max: 100, Now: t0}))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[job.Durability][]*job.Job)
	for _, j := range js {
		out[j.Durability] = append(out[j.Durability], j)
	}
	return out
}

func ackItem(j *job.Job) job.CompleteItem {
	return job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
}

// A transaction runs in the tier of its jobs; one that names jobs of both
// tiers is refused with an input error naming the first item of the tier
// other than its first item's, and changes nothing.
func TestTransactionsStayInOneTier(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := t.Context()
	insert(t, s, memJobs("q", 3, job.DurabilityFull)...)
	insert(t, s, memJobs("q", 3, job.DurabilityMemory)...)
	js := claimAll(t, s, "q")
	durable, memory := js[job.DurabilityFull], js[job.DurabilityMemory]
	if len(durable) != 3 || len(memory) != 3 {
		t.Fatalf("claimed %d durable and %d memory jobs", len(durable), len(memory))
	}
	for _, tc := range []struct {
		name  string
		p     store.JobTransactParams
		field string
	}{
		{"a durable ack and a memory fail", store.JobTransactParams{
			Complete: []job.CompleteItem{ackItem(durable[0])},
			Fail:     []job.FailItem{{ID: memory[0].ID, Token: memory[0].LeaseToken}},
		}, "fail[0].id"},
		{"a memory ack and a durable insert", store.JobTransactParams{
			Complete: []job.CompleteItem{ackItem(memory[0])},
			Insert:   memJobs("next", 1, job.DurabilityProcess),
		}, "enqueue[0].durability"},
		{"a durable ack and a memory insert", store.JobTransactParams{
			Complete: []job.CompleteItem{ackItem(durable[0])},
			Insert:   append(memJobs("next", 1, job.DurabilityFull), memJobs("next", 1, job.DurabilityMemory)...),
		}, "enqueue[1].durability"},
		{"an unknown job, then both tiers", store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: "no-such-job", Token: 1}, ackItem(memory[0]), ackItem(durable[0])},
		}, "ack[2].id"},
	} {
		tc.p.Now = t0
		_, err := s.JobTransact(ctx, &tc.p)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != tc.field || !strings.Contains(in.Message, "memory") {
			t.Fatalf("%s: %v, want an input error on %s", tc.name, err, tc.field)
		}
		for _, ins := range tc.p.Insert {
			if _, err := s.JobGet(ctx, ins.ID); !errors.Is(err, job.ErrNotFound) {
				t.Fatalf("%s: inserted job %s: %v, want not found", tc.name, ins.ID, err)
			}
		}
	}
	for _, j := range append(durable, memory...) {
		if got, err := s.JobGet(ctx, j.ID); err != nil || got.State != job.StateActive || got.LeaseToken != j.LeaseToken {
			t.Fatalf("job %s after refused transactions: %+v %v, want it active with its token", j.ID, got, err)
		}
	}

	res, err := s.JobTransact(ctx, &store.JobTransactParams{
		Complete: []job.CompleteItem{ackItem(memory[0])},
		Fail:     []job.FailItem{{ID: memory[1].ID, Token: memory[1].LeaseToken, NoRetry: true}},
		Insert:   memJobs("next", 1, job.DurabilityMemory),
		Now:      t0,
	})
	if err != nil || res.Completed[0].State != job.StateCompleted || res.Failed[0].State != job.StateDead {
		t.Fatalf("a memory transaction: %+v %v", res, err)
	}
	if got, err := s.mem.JobGet(ctx, res.Inserted[0].Job.ID); err != nil || got.State != job.StateAvailable {
		t.Fatalf("the memory transaction's insert is not in the memory tier: %+v %v", got, err)
	}
	res, err = s.JobTransact(ctx, &store.JobTransactParams{
		Complete: []job.CompleteItem{ackItem(durable[0])},
		Insert:   memJobs("next", 1, job.DurabilityFull),
		Now:      t0,
	})
	if err != nil || res.Completed[0].State != job.StateCompleted {
		t.Fatalf("a durable transaction: %+v %v", res, err)
	}
	if got, err := s.disk.JobGet(ctx, res.Inserted[0].Job.ID); err != nil || got.State != job.StateAvailable {
		t.Fatalf("the durable transaction's insert is not in the durable tier: %+v %v", got, err)
	}

	// A memory job no longer active is lease lost, whatever else the
	// transaction holds; an id of the other tier is a duplicate or taken.
	late := &store.JobTransactParams{Complete: []job.CompleteItem{ackItem(durable[1]), ackItem(memory[0])}, Now: t0}
	var item *job.ItemError
	if _, err := s.JobTransact(ctx, late); !errors.Is(err, job.ErrLeaseLost) || !errors.As(err, &item) || item.Field != "ack[1].token" {
		t.Fatalf("a late ack of a memory job beside a durable one: %v, want lease lost on ack[1].token", err)
	}
	mine := memJobs("q", 1, job.DurabilityMemory)
	mine[0].ID = durable[2].ID
	res, err = s.JobTransact(ctx, &store.JobTransactParams{Complete: []job.CompleteItem{ackItem(memory[2])}, Insert: mine, Now: t0})
	if err != nil || !res.Inserted[0].Duplicate || res.Inserted[0].Job.Durability != job.DurabilityFull {
		t.Fatalf("a memory insert of a durable job's id: %+v %v, want a duplicate of the durable job", res, err)
	}
	theirs := memJobs("elsewhere", 1, job.DurabilityFull)
	theirs[0].ID = memory[2].ID
	_, err = s.JobTransact(ctx, &store.JobTransactParams{Complete: []job.CompleteItem{ackItem(durable[1])}, Insert: append(memJobs("x", 1, job.DurabilityFull), theirs...), Now: t0})
	var taken *job.IDTakenError
	if !errors.As(err, &taken) || taken.Field != "enqueue[1].id" {
		t.Fatalf("a durable insert of a memory job's id into another queue: %v, want id taken on enqueue[1].id", err)
	}
	if got, err := s.JobGet(ctx, durable[1].ID); err != nil || got.State != job.StateActive {
		t.Fatalf("the refused transaction's ack: %+v %v, want the job still active", got, err)
	}
}
