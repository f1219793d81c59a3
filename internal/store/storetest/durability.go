package storetest

import (
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func durabilityTests() []group {
	return []group{{"Durability", []test{
		{"JobsKeepTheirLevel", testDurabilityKept},
		{"OtherLevelsAreRefused", testDurabilityRefused},
		{"QueueDefaultIsSetAndKept", testQueueDurability},
		{"IDsAreOneSpaceAcrossLevels", testDurabilityOneIDSpace},
		{"IDsAreOneSpaceUnderRacingInserts", testDurabilityRacingIDs},
		{"TokensAreNeverHandedOutTwice", testDurabilityTokens},
		{"LateAckIsLeaseLostAtEveryLevel", testDurabilityLateAck},
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
			b.accepted("complete", b.complete(at(time.Second), job.CompleteItem{ID: j.ID, Token: j.LeaseToken}), job.StateCompleted)
		} else {
			b.accepted("fail", b.fail(at(time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: true}), job.StateDead)
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

// levelJob is newJob at level d.
func levelJob(queue string, d job.Durability, opts ...func(*store.JobInsertParams)) store.JobInsertParams {
	return newJob(queue, append([]func(*store.JobInsertParams){func(p *store.JobInsertParams) { p.Durability = d }}, opts...)...)
}

// An id names one job whatever the levels: an insert of a known id at
// another level is a duplicate of the job there (same queue) or fails
// with an id taken error (another queue), and changes nothing.
func testDurabilityOneIDSpace(b *bundle) {
	levels := b.h.durabilities()
	for _, first := range levels {
		for _, second := range levels {
			p := levelJob("q", first)
			b.add(p)
			before := b.get(p.ID)
			res := b.insertAt(at(time.Second), levelJob("q", second, func(q *store.JobInsertParams) { q.ID = p.ID }))
			if !res[0].Duplicate || res[0].Job.Durability != first {
				b.t.Fatalf("%s job then %s job with its id: %+v, want a duplicate of the %s job", first, second, res[0], first)
			}
			other := levelJob("elsewhere", second, func(q *store.JobInsertParams) { q.ID = p.ID })
			_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{other}, Now: at(time.Second)})
			var taken *job.IDTakenError
			if !errors.As(err, &taken) || taken.Field != "jobs[0].id" {
				b.t.Fatalf("%s job then %s job with its id in another queue: %v, want id taken on jobs[0].id", first, second, err)
			}
			b.unchanged("inserts of its id at level "+string(second), before)
		}
	}
	if _, err := b.s.QueueGet(b.ctx, "elsewhere"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of refused inserts only: %v, want not found", err)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: int64(len(levels) * len(levels))})
}

// Inserts of the same ids at every level, racing, make one job per id:
// every result for an id is that job.
func testDurabilityRacingIDs(b *bundle) {
	levels := b.h.durabilities()
	const ids, rounds = 40, 6
	names := make([]string, ids)
	for i := range names {
		names[i] = job.NewID(t0)
	}
	type answer struct {
		id string
		d  job.Durability
	}
	answers := make(chan answer, ids*rounds*len(levels))
	var wg sync.WaitGroup
	for r := 0; r < rounds; r++ {
		for k, d := range levels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range names {
					id := names[(i*(r+1)+k)%ids]
					res, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{levelJob("q", d, func(p *store.JobInsertParams) { p.ID = id })}, Now: t0})
					if err != nil {
						b.t.Errorf("insert %s at %s: %v", id, d, err)
						return
					}
					answers <- answer{id, res[0].Job.Durability}
				}
			}()
		}
	}
	wg.Wait()
	close(answers)
	kept := make(map[string]job.Durability)
	for _, id := range names {
		kept[id] = b.get(id).Durability
	}
	for a := range answers {
		if kept[a.id] != a.d {
			b.t.Fatalf("job %s: an insert was answered with a %s job, the store keeps a %s one", a.id, a.d, kept[a.id])
		}
	}
	if n := b.counts("q")[job.StateAvailable]; n != ids {
		b.t.Fatalf("%d jobs for %d ids", n, ids)
	}
}

// A fencing token is never handed out twice for one id: not across
// levels, not after the job was deleted and enqueued again under its id
// (at any level), not across a restart. A worker that held the id's job
// long ago can never ack the job that has its id now.
func testDurabilityTokens(b *bundle) {
	levels := b.h.durabilities()
	id := job.NewID(t0)
	var last int64
	round := 0
	handOut := func(d job.Durability) {
		b.t.Helper()
		round++
		now := at(time.Duration(round) * time.Minute)
		b.insertAt(now, levelJob("q", d, func(p *store.JobInsertParams) { p.ID = id }))
		js := b.claimAt(now, 1, "q")
		if len(js) != 1 || js[0].ID != id {
			b.t.Fatalf("round %d: claimed %v, want job %s", round, idsOf(js), id)
		}
		if js[0].LeaseToken <= last {
			b.t.Fatalf("round %d (%s): token %d, not above %d, which this id had before", round, d, js[0].LeaseToken, last)
		}
		last = js[0].LeaseToken
		b.accepted("ack", b.complete(now, job.CompleteItem{ID: id, Token: last}), job.StateCompleted)
		if err := b.s.JobDelete(b.ctx, id); err != nil {
			b.t.Fatalf("delete: %v", err)
		}
	}
	for range 2 {
		for _, d := range levels {
			handOut(d)
		}
	}
	if b.h.Reopen == nil {
		return
	}
	b.reopen()
	for _, d := range levels {
		handOut(d)
	}
}

// An ack with a token that was current, sent again after the job
// completed, is lease lost at every level, never not found; so is a fail
// or an extend of it.
func testDurabilityLateAck(b *bundle) {
	for _, d := range b.h.durabilities() {
		p := levelJob("q-"+string(d), d)
		b.add(p)
		j := b.claimAt(t0, 1, p.Queue)[0]
		item := job.CompleteItem{ID: j.ID, Token: j.LeaseToken}
		b.accepted("ack", b.complete(at(time.Second), item), job.StateCompleted)
		b.wantErr(string(d)+" job acked twice", b.complete(at(2*time.Second), item)[0].Err, job.ErrLeaseLost)
		b.wantErr(string(d)+" job failed after its ack", b.fail(at(2*time.Second), job.FailItem{ID: j.ID, Token: j.LeaseToken, Message: "x"})[0].Err, job.ErrLeaseLost)
		b.wantErr(string(d)+" job extended after its ack", b.extend(at(2*time.Second), job.ExtendItem{ID: j.ID, Token: j.LeaseToken})[0].Err, job.ErrLeaseLost)
		err := b.s.JobProgress(b.ctx, &store.JobProgressParams{ID: j.ID, Token: j.LeaseToken, Progress: []byte(`1`), Now: at(2 * time.Second)})
		b.wantErr(string(d)+" job's progress after its ack", err, job.ErrLeaseLost)
		if got := b.get(j.ID); got.State != job.StateCompleted {
			b.t.Fatalf("%s job after late calls: %s", d, got.State)
		}
	}
}
