package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func insertTests() []group {
	return []group{{"JobInsertMany", []test{
		{"StoresEveryFieldAsGiven", testInsertRoundTrip},
		{"BatchIsAllOrNone", testInsertAtomic},
		{"DuplicateIDReturnsExistingJob", testInsertDuplicateID},
		{"IDOfAnotherQueueFailsTheInsert", testInsertIDTaken},
		{"UniqueKeyWithoutWindowHoldsWhilePending", testInsertUniquePending},
		{"UniqueKeyWindowCountsEveryStateButCancelled", testInsertUniqueWindow},
		{"UniqueWindowEndsAfterUniqueFor", testInsertUniqueWindowEnd},
		{"DuplicatesWithinBatchResolveToFirst", testInsertUniqueInBatch},
		{"UniqueKeyIsPerQueue", testInsertUniquePerQueue},
	}}}
}

// A job comes back from insert and from JobGet exactly as given, with the
// store's own fields at their starting values; times keep their instant
// whatever their location.
func testInsertRoundTrip(b *bundle) {
	east := time.FixedZone("east", 5*3600+1800)
	now := at(time.Minute).In(east)
	full := newJob("q", func(p *store.JobInsertParams) {
		p.Kind, p.Priority, p.MaxAttempts = "send_email", -7, 9
		p.Payload = json.RawMessage(`{ "spaced" : [1, 2.50, "x"] ,"z":null}`)
		p.State, p.RunAt = job.StateScheduled, at(time.Hour).In(time.FixedZone("west", -3*3600))
		p.Backoff = job.Backoff{Kind: job.BackoffExponential, Base: 2 * time.Second, Max: time.Minute, Jitter: 0.25}
		p.LeaseDuration = 90 * time.Second
		p.UniqueKey, p.UniqueFor = "user:42", time.Hour
		p.Tags = []string{"b", "a", "b2"}
	})
	bare := newJob("q", func(p *store.JobInsertParams) { p.Payload = nil })
	res := b.insertAt(now, full, bare)
	for i, p := range []store.JobInsertParams{full, bare} {
		want := &job.Job{
			ID: p.ID, Queue: p.Queue, Kind: p.Kind, Payload: p.Payload, Priority: p.Priority, State: p.State,
			RunAt: p.RunAt, MaxAttempts: p.MaxAttempts, Backoff: p.Backoff, LeaseDuration: p.LeaseDuration,
			UniqueKey: p.UniqueKey, UniqueFor: p.UniqueFor, Tags: p.Tags, CreatedAt: now,
		}
		if res[i].Duplicate || res[i].Job == nil {
			b.t.Fatalf("job %d: result %+v, want an insert", i, res[i])
		}
		if d := diffJob(res[i].Job, want); d != "" {
			b.t.Fatalf("job %d: insert result differs: %s", i, d)
		}
		if d := diffJob(b.get(p.ID), want); d != "" {
			b.t.Fatalf("job %d: stored job differs: %s", i, d)
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateScheduled: 1, job.StateAvailable: 1})
}

// A batch that cannot be stored whole stores nothing: not its valid jobs,
// not the queue it would have created.
func testInsertAtomic(b *bundle) {
	old := b.add(newJobs("q", 2)...)
	ps := append(newJobs("q", 3), newJobs("fresh", 2)...)
	ps[3].State = job.StateActive // refused: a job is inserted scheduled or available
	if _, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: ps, Now: t0}); err == nil {
		b.t.Fatal("a batch with a job in state active was accepted")
	}
	for i, p := range ps {
		if _, err := b.s.JobGet(b.ctx, p.ID); !errors.Is(err, job.ErrNotFound) {
			b.t.Fatalf("job %d of a refused batch: get gave %v, want not found", i, err)
		}
	}
	if _, err := b.s.QueueGet(b.ctx, "fresh"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a refused batch: %v, want not found", err)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 2})
	if got := b.claimAt(t0, 10, "q", "fresh"); len(got) != 2 || got[0].ID != old[0] || got[1].ID != old[1] {
		b.t.Fatalf("claim after a refused batch: %v, want %v", idsOf(got), old)
	}
	// The same jobs, made valid, go in: the refusal left no trace of them.
	ps[3].State = job.StateAvailable
	b.add(ps...)
	b.wantCounts("fresh", map[job.State]int64{job.StateAvailable: 2})
}

// An ID that exists, in whatever state and queue, is not inserted again:
// the result is the existing job, complete, and Duplicate is set. Within
// one batch the second of two equal IDs is the duplicate.
func testInsertDuplicateID(b *bundle) {
	first := b.jobIn(job.StateActive, "q")
	again := newJob("q", func(p *store.JobInsertParams) {
		p.ID, p.Kind, p.Payload = first.ID, "different", json.RawMessage(`{"other":true}`)
	})
	res := b.insertAt(at(time.Minute), again)
	if !res[0].Duplicate || res[0].Job == nil {
		b.t.Fatalf("result %+v, want a duplicate", res[0])
	}
	if d := diffJob(res[0].Job, first); d != "" {
		b.t.Fatalf("duplicate result is not the existing job: %s", d)
	}
	b.unchanged("a duplicate insert", first)

	a := newJob("q")
	twin := newJob("q", func(p *store.JobInsertParams) { p.ID, p.Kind = a.ID, "twin" })
	res = b.insertAt(t0, a, twin)
	if res[0].Duplicate || !res[1].Duplicate || res[1].Job.ID != a.ID || res[1].Job.Kind != "test" {
		b.t.Fatalf("same id twice in a batch: %+v, %+v", res[0], res[1].Job)
	}
	b.wantCounts("q", map[job.State]int64{job.StateActive: 1, job.StateAvailable: 1})
}

// With a zero UniqueFor, a job duplicates the newest job of its queue with
// its key while that job is pending, and only then.
func testInsertUniquePending(b *bundle) {
	for _, st := range job.States {
		key := "key-" + string(st)
		first := b.jobIn(st, "q", withUnique(key, 0))
		p := newJob("q", withUnique(key, 0))
		res := b.insertAt(at(time.Hour), p)
		if st.Pending() {
			if !res[0].Duplicate || res[0].Job.ID != first.ID {
				b.t.Fatalf("key held by a %s job: result %+v, want a duplicate of %s", st, res[0], first.ID)
			}
			if d := diffJob(res[0].Job, first); d != "" {
				b.t.Fatalf("duplicate of a %s job is not the existing job: %s", st, d)
			}
			continue
		}
		if res[0].Duplicate || res[0].Job.ID != p.ID {
			b.t.Fatalf("key of a %s job: result %+v, want a new job", st, res[0])
		}
		// The new job now holds the key.
		if res := b.insertAt(at(time.Hour), newJob("q", withUnique(key, 0))); !res[0].Duplicate || res[0].Job.ID != p.ID {
			b.t.Fatalf("key re-taken after a %s job: result %+v, want a duplicate of %s", st, res[0], p.ID)
		}
	}
}

// With a UniqueFor window, a job duplicates the newest job of its queue
// with its key when that job was created within the window, in any state
// but cancelled.
func testInsertUniqueWindow(b *bundle) {
	for _, st := range job.States {
		key := "key-" + string(st)
		first := b.jobIn(st, "q", withUnique(key, time.Minute))
		p := newJob("q", withUnique(key, time.Minute))
		res := b.insertAt(at(59*time.Second), p)
		if st != job.StateCancelled {
			if !res[0].Duplicate || res[0].Job.ID != first.ID {
				b.t.Fatalf("window held by a %s job: result %+v, want a duplicate of %s", st, res[0], first.ID)
			}
			continue
		}
		if res[0].Duplicate {
			b.t.Fatalf("a cancelled job held its unique window: %+v", res[0])
		}
	}
}

// The window is "created after Now-UniqueFor": a job created exactly
// UniqueFor ago no longer holds its key, even while pending.
func testInsertUniqueWindowEnd(b *bundle) {
	first := b.add(newJob("q", withUnique("k", time.Minute)))[0]
	res := b.insertAt(at(time.Minute-time.Millisecond), newJob("q", withUnique("k", time.Minute)))
	if !res[0].Duplicate || res[0].Job.ID != first {
		b.t.Fatalf("inside the window: %+v, want a duplicate of %s", res[0], first)
	}
	p := newJob("q", withUnique("k", time.Minute))
	if res := b.insertAt(at(time.Minute), p); res[0].Duplicate {
		b.t.Fatalf("at the end of the window: %+v, want a new job", res[0])
	}
	// The newest job with the key decides: the one just made, created at
	// t0+1m, holds the key until t0+2m.
	if res := b.insertAt(at(2*time.Minute-time.Millisecond), newJob("q", withUnique("k", time.Minute))); !res[0].Duplicate || res[0].Job.ID != p.ID {
		b.t.Fatalf("window of the newest job: %+v, want a duplicate of %s", res[0], p.ID)
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 2})
}

// Several jobs of one batch with the same key resolve to the first of them.
func testInsertUniqueInBatch(b *bundle) {
	for _, window := range []time.Duration{0, time.Hour} {
		key := fmt.Sprintf("k-%v", window)
		ps := newJobs("q", 4, withUnique(key, window))
		ps[2].UniqueKey = "" // not unique: inserted whatever the others do
		res := b.insertAt(t0, ps...)
		if res[0].Duplicate || res[0].Job.ID != ps[0].ID || res[2].Duplicate || res[2].Job.ID != ps[2].ID {
			b.t.Fatalf("window %v: results %+v, %+v, want the first and third inserted", window, res[0], res[2])
		}
		for _, i := range []int{1, 3} {
			if !res[i].Duplicate || res[i].Job.ID != ps[0].ID || string(res[i].Job.Payload) != `{"n":0}` {
				b.t.Fatalf("window %v: job %d gave %+v, want a duplicate of the first", window, i, res[i])
			}
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 4})
}

// The same key in another queue is another key.
func testInsertUniquePerQueue(b *bundle) {
	for _, window := range []time.Duration{0, time.Hour} {
		key := fmt.Sprintf("k-%v", window)
		a := b.add(newJob("a", withUnique(key, window)))[0]
		res := b.insertAt(t0, newJob("b", withUnique(key, window)), newJob("a", withUnique(key, window)))
		if res[0].Duplicate {
			b.t.Fatalf("window %v: same key in another queue was a duplicate of %s", window, res[0].Job.ID)
		}
		if !res[1].Duplicate || res[1].Job.ID != a {
			b.t.Fatalf("window %v: same key in the same queue: %+v, want a duplicate of %s", window, res[1], a)
		}
	}
	b.wantCounts("a", map[job.State]int64{job.StateAvailable: 2})
	b.wantCounts("b", map[job.State]int64{job.StateAvailable: 2})
}

// An id that belongs to a job of another queue fails the whole insert
// with an id taken error naming the item, and changes nothing: not the
// job that holds the id, not the other jobs of the batch, not the queues.
// Within a batch, the second of two jobs with one id in two queues does
// the same.
func testInsertIDTaken(b *bundle) {
	first := b.jobIn(job.StateActive, "q")
	fresh := newJob("other")
	again := newJob("other", func(p *store.JobInsertParams) { p.ID = first.ID })
	keyed := newJob("other", func(p *store.JobInsertParams) { p.ID, p.UniqueKey = first.ID, "k" })
	for _, batch := range [][]store.JobInsertParams{{fresh, again}, {fresh, keyed}} {
		_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: batch, Now: at(time.Minute)})
		var taken *job.IDTakenError
		if !errors.Is(err, job.ErrIDTaken) || !errors.As(err, &taken) || taken.Field != "jobs[1].id" {
			b.t.Fatalf("insert of an id of queue q into queue other: %v, want an id taken error on jobs[1].id", err)
		}
		if strings.Contains(err.Error(), first.Kind) {
			b.t.Errorf("the error tells of the job that holds the id: %v", err)
		}
	}
	b.unchanged("an insert of its id into another queue", first)
	if _, err := b.s.JobGet(b.ctx, fresh.ID); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("the other job of the failed batch: %v, want not found", err)
	}
	if _, err := b.s.QueueGet(b.ctx, "other"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a failed insert only: %v, want not found", err)
	}

	a := newJob("x")
	twin := newJob("y", func(p *store.JobInsertParams) { p.ID = a.ID })
	_, err := b.s.JobInsertMany(b.ctx, &store.JobInsertManyParams{Jobs: []store.JobInsertParams{a, twin}, Now: t0})
	if !errors.Is(err, job.ErrIDTaken) {
		b.t.Fatalf("one id in two queues in a batch: %v, want id taken", err)
	}
	if _, err := b.s.JobGet(b.ctx, a.ID); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("first job of a failed batch: %v, want not found", err)
	}
}
