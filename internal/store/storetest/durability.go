package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func durabilityTests() []group {
	return []group{{"Durability", []test{
		{"JobsKeepTheirLevel", testDurabilityKept},
		{"OtherLevelsAreRefused", testDurabilityRefused},
		{"QueueDefaultIsSetAndKept", testQueueDurability},
	}}}
}

// Each level the store keeps is stored with the job (empty meaning full)
// and goes through a whole life cycle.
func testDurabilityKept(b *bundle) {
	levels := b.h.durabilities()
	var ps []store.JobInsertParams
	for _, d := range levels {
		ps = append(ps, newJob("q", func(p *store.JobInsertParams) { p.Durability = d }))
	}
	if slices.Contains(levels, job.DurabilityFull) {
		ps = append(ps, newJob("q"))
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, b.add(p)...) // one level per call: a store may keep levels apart
	}
	for i, id := range ids {
		want := ps[i].Durability
		if want == "" {
			want = job.DurabilityFull
		}
		if got := b.get(id).Durability; got != want {
			b.t.Fatalf("job %d: durability %q, want %q", i, got, want)
		}
	}
	js := b.claimAt(t0, len(ids), "q")
	if len(js) != len(ids) {
		b.t.Fatalf("claimed %d jobs, want %d", len(js), len(ids))
	}
	for i, j := range js {
		if i%2 == 0 {
			b.accepted("complete", b.complete(at(time.Second), store.JobCompleteItem{ID: j.ID, Token: j.LeaseToken}), job.StateCompleted)
		} else {
			b.accepted("fail", b.fail(at(time.Second), store.JobFailItem{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: true}), job.StateDead)
		}
	}
	for _, id := range ids {
		if d := b.get(id).Durability; d == "" {
			b.t.Fatalf("job %s lost its durability", id)
		}
	}
}

// A job of a level the store does not keep fails the whole insert.
func testDurabilityRefused(b *bundle) {
	for _, d := range []job.Durability{job.DurabilityFull, job.DurabilityProcess, job.DurabilityMemory, "bogus"} {
		if slices.Contains(b.h.durabilities(), d) {
			continue
		}
		ps := []store.JobInsertParams{newJob("q"), newJob("q", func(p *store.JobInsertParams) { p.Durability = d })}
		if !slices.Contains(b.h.durabilities(), job.DurabilityFull) {
			ps[0].Durability = b.h.durabilities()[0]
		}
		if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err == nil {
			b.t.Fatalf("insert of a %q job was accepted", d)
		}
		if _, err := b.s.QueueGet(b.ctx, "q"); !errors.Is(err, job.ErrNotFound) {
			b.t.Fatalf("a refused insert of a %q job left queue q: %v", d, err)
		}
	}
}

// A queue's default level is full until set; setting it to a level the
// store keeps creates the queue, survives other changes, and a bad level
// is an input error.
func testQueueDurability(b *bundle) {
	b.add(newJob("q"))
	if q := b.queue("q"); q.Durability != job.DurabilityFull {
		b.t.Fatalf("new queue durability %q, want full", q.Durability)
	}
	for _, d := range b.h.durabilities() {
		if err := b.s.QueueSetDurability(b.ctx, "q", d); err != nil {
			b.t.Fatalf("set durability %s: %v", d, err)
		}
		if q := b.queue("q"); q.Durability != d || q.Counts[job.StateAvailable] != 1 {
			b.t.Fatalf("queue after setting %s: %+v", d, q)
		}
	}
	if err := b.s.QueueSetDurability(b.ctx, "fresh", job.DurabilityProcess); err != nil {
		b.t.Fatalf("set durability of an unknown queue: %v", err)
	}
	if err := b.s.QueueSetPaused(b.ctx, "fresh", true); err != nil {
		b.t.Fatal(err)
	}
	if q := b.queue("fresh"); q.Durability != job.DurabilityProcess || !q.Paused {
		b.t.Fatalf("queue created by a durability change: %+v", q)
	}
	var in *job.InputError
	if err := b.s.QueueSetDurability(b.ctx, "q", "bogus"); !errors.As(err, &in) {
		b.t.Fatalf("bad durability: %v, want an input error", err)
	}
	if b.h.Reopen != nil {
		b.s = b.h.Reopen(b.t, b.s)
		if q := b.queue("fresh"); q.Durability != job.DurabilityProcess {
			b.t.Fatalf("durability after restart: %q", q.Durability)
		}
	}
}
