package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func transactTests() []group {
	return []group{{"JobTransact", []test{
		{"AppliesAcksFailsAndInsertsTogether", testTransact},
		{"EveryLevelTheStoreKeeps", testTransactLevels},
		{"StaleTokenChangesNothing", testTransactStaleToken},
		{"UnknownJobChangesNothing", testTransactUnknown},
		{"JobNotActiveIsLeaseLost", testTransactNotActive},
		{"SameJobTwiceIsLeaseLost", testTransactSameJobTwice},
		{"InsertDuplicatesAreResults", testTransactDuplicates},
		{"InsertIDOfAnotherQueueChangesNothing", testTransactIDTaken},
		{"InsertOfALevelNotKeptChangesNothing", testTransactLevelNotKept},
		{"InsertsSeeTheAcks", testTransactInsertsSeeAcks},
		{"RacingTransactionsOnOneLeaseHaveOneWinner", testTransactRacing},
		{"RefusedTransactionsAmongOthersChangeNothing", testTransactRefusedAmongOthers},
	}}}
}

// transact runs p at now; the call must succeed and answer every item.
func (b *bundle) transact(p *store.JobTransactParams) *store.TransactResult {
	b.t.Helper()
	res, err := b.s.JobTransact(b.ctx, p)
	if err != nil {
		b.t.Fatalf("transact: %v", err)
	}
	if len(res.Completed) != len(p.Complete) || len(res.Failed) != len(p.Fail) || len(res.Inserted) != len(p.Insert) {
		b.t.Fatalf("transact of %d acks, %d fails, %d inserts: %d, %d, %d results", len(p.Complete), len(p.Fail), len(p.Insert),
			len(res.Completed), len(res.Failed), len(res.Inserted))
	}
	return res
}

// wantItemError fails unless err is a *job.ItemError naming field and
// wrapping target.
func (b *bundle) wantItemError(what string, err error, field string, target error) {
	b.t.Helper()
	var item *job.ItemError
	if !errors.Is(err, target) || !errors.As(err, &item) || item.Field != field {
		b.t.Fatalf("%s: error %v, want an item error on %s wrapping %q", what, err, field, target)
	}
}

// missing fails unless no job has id.
func (b *bundle) missing(what, id string) {
	b.t.Helper()
	if _, err := b.s.JobGet(b.ctx, id); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("%s: job %s: %v, want not found", what, id, err)
	}
}

// A transaction acknowledges, fails and inserts, each as the call of its
// own would: the acked jobs end completed with their results (cancelled
// when a cancel was requested), the failed ones retrying after their
// backoff or dead, and the inserted jobs are there, available or
// scheduled.
func testTransact(b *bundle) {
	acked := b.jobIn(job.StateActive, "q")
	cancelled := b.jobIn(job.StateActive, "q")
	b.cancel(cancelled.ID, t0)
	retried := b.jobIn(job.StateActive, "q")
	killed := b.jobIn(job.StateActive, "q")
	now := at(time.Minute)
	next, later := newJob("next"), newJob("next", scheduledAt(at(time.Hour)))
	res := b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{
			{ID: acked.ID, Token: acked.LeaseToken, Result: json.RawMessage(`{"ok":true}`)},
			{ID: cancelled.ID, Token: cancelled.LeaseToken},
		},
		Fail: []job.FailItem{
			{ID: retried.ID, Token: retried.LeaseToken, Message: "again"},
			{ID: killed.ID, Token: killed.LeaseToken, Message: "fatal", NoRetry: true},
		},
		Insert: []store.JobInsertParams{next, later},
		Now:    now,
	})
	if o := res.Completed[0]; o.Err != nil || o.Queue != "q" || o.State != job.StateCompleted {
		b.t.Fatalf("ack: outcome %+v, want completed in q", o)
	}
	if o := res.Completed[1]; o.Err != nil || o.State != job.StateCancelled {
		b.t.Fatalf("ack of a job whose cancel was requested: outcome %+v, want cancelled", o)
	}
	if o := res.Failed[0]; o.Err != nil || o.Queue != "q" || o.State != job.StateRetrying || !o.RunAt.Equal(now.Add(time.Second)) {
		b.t.Fatalf("fail: outcome %+v, want retrying at %v", o, now.Add(time.Second))
	}
	if o := res.Failed[1]; o.Err != nil || o.State != job.StateDead {
		b.t.Fatalf("fail without retry: outcome %+v, want dead", o)
	}
	for i, p := range []store.JobInsertParams{next, later} {
		if r := res.Inserted[i]; r.Duplicate || r.Job == nil || r.Job.ID != p.ID || r.Job.State != p.State {
			b.t.Fatalf("insert %d: result %+v, want job %s inserted %s", i, r, p.ID, p.State)
		}
	}
	if j := b.get(acked.ID); j.State != job.StateCompleted || !jsonEqual(j.Result, json.RawMessage(`{"ok":true}`)) || !j.FinishedAt.Equal(now) {
		b.t.Fatalf("acked job: %s, result %s, finished %v", j.State, j.Result, j.FinishedAt)
	}
	if j := b.get(cancelled.ID); j.State != job.StateCancelled {
		b.t.Fatalf("acked job with a cancel requested: %s, want cancelled", j.State)
	}
	j := b.get(retried.ID)
	if j.State != job.StateRetrying || !j.RunAt.Equal(now.Add(time.Second)) || len(j.Errors) != 1 || j.Errors[0].Message != "again" {
		b.t.Fatalf("failed job: %s at %v with errors %+v", j.State, j.RunAt, j.Errors)
	}
	if j := b.get(killed.ID); j.State != job.StateDead || len(j.Errors) != 1 {
		b.t.Fatalf("job failed without retry: %s with errors %+v", j.State, j.Errors)
	}
	if js := b.claimAt(now, 10, "next"); len(js) != 1 || js[0].ID != next.ID {
		b.t.Fatalf("claim of the inserted jobs: %v, want only %s (the other is scheduled)", idsOf(js), next.ID)
	}
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 1, job.StateCancelled: 1, job.StateRetrying: 1, job.StateDead: 1})
	b.wantCounts("next", map[job.State]int64{job.StateActive: 1, job.StateScheduled: 1})
}

// A transaction works alike at every durability level the store keeps,
// and with acks, fails or inserts alone.
func testTransactLevels(b *bundle) {
	for _, d := range b.h.durabilities() {
		q := "q-" + string(d)
		a := b.jobIn(job.StateActive, q, func(p *store.JobInsertParams) { p.Durability = d })
		f := b.jobIn(job.StateActive, q, func(p *store.JobInsertParams) { p.Durability = d })
		ins := levelJob(q, d)
		res := b.transact(&store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
			Fail:     []job.FailItem{{ID: f.ID, Token: f.LeaseToken, Message: "x", NoRetry: true}},
			Insert:   []store.JobInsertParams{ins},
			Now:      at(time.Second),
		})
		if res.Completed[0].State != job.StateCompleted || res.Failed[0].State != job.StateDead || res.Inserted[0].Duplicate {
			b.t.Fatalf("level %s: result %+v", d, res)
		}
		if j := b.get(ins.ID); j.Durability != d || j.State != job.StateAvailable {
			b.t.Fatalf("level %s: inserted job %s at level %s", d, j.State, j.Durability)
		}
		alone := b.jobIn(job.StateActive, q, func(p *store.JobInsertParams) { p.Durability = d })
		b.transact(&store.JobTransactParams{Complete: []job.CompleteItem{{ID: alone.ID, Token: alone.LeaseToken}}, Now: at(time.Second)})
		b.transact(&store.JobTransactParams{Insert: []store.JobInsertParams{levelJob(q, d)}, Now: at(time.Second)})
		b.wantCounts(q, map[job.State]int64{job.StateCompleted: 2, job.StateDead: 1, job.StateAvailable: 2})
	}
}

// refused runs p, which must fail wrapping target with an item error on
// field, and checks that it changed nothing: the jobs of before are as
// they were, no job of p.Insert exists, and the counts of queues are as
// they were.
func (b *bundle) refused(what string, p *store.JobTransactParams, field string, target error, before []*job.Job, queues ...string) {
	b.t.Helper()
	counts := make([]map[job.State]int64, len(queues))
	for i, q := range queues {
		counts[i] = b.counts(q)
	}
	_, err := b.s.JobTransact(b.ctx, p)
	if field != "" {
		b.wantItemError(what, err, field, target)
	} else {
		b.wantErr(what, err, target)
	}
	for _, j := range before {
		b.unchanged(what, j)
	}
	for _, ins := range p.Insert {
		if !slices.ContainsFunc(before, func(j *job.Job) bool { return j.ID == ins.ID }) {
			b.missing(what, ins.ID)
		}
	}
	for i, q := range queues {
		b.wantCounts(q, counts[i])
	}
}

// A token that is not current, in any item, refuses the whole call naming
// the item's token, and nothing changes: the other jobs stay active with
// their tokens, and no job is inserted.
func testTransactStaleToken(b *bundle) {
	good := b.jobIn(job.StateActive, "q")
	other := b.jobIn(job.StateActive, "q")
	stale := b.jobIn(job.StateActive, "q")
	b.accepted("release", b.release(t0, job.ReleaseItem{ID: stale.ID, Token: stale.LeaseToken}), job.StateAvailable)
	current := b.claimID(at(time.Second), "q", stale.ID)
	before := []*job.Job{b.get(good.ID), b.get(other.ID), current}
	b.refused("a stale token among the acks", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: good.ID, Token: good.LeaseToken}, {ID: stale.ID, Token: stale.LeaseToken}},
		Fail:     []job.FailItem{{ID: other.ID, Token: other.LeaseToken, Message: "x"}},
		Insert:   []store.JobInsertParams{newJob("q"), newJob("fresh")},
		Now:      at(time.Minute),
	}, "ack[1].token", job.ErrLeaseLost, before, "q")
	b.refused("a stale token among the fails", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: good.ID, Token: good.LeaseToken}},
		Fail:     []job.FailItem{{ID: other.ID, Token: other.LeaseToken, Message: "x"}, {ID: stale.ID, Token: stale.LeaseToken, Message: "x"}},
		Insert:   []store.JobInsertParams{newJob("q")},
		Now:      at(time.Minute),
	}, "fail[1].token", job.ErrLeaseLost, before, "q")
	b.refused("a token ahead", &store.JobTransactParams{
		Fail: []job.FailItem{{ID: other.ID, Token: other.LeaseToken + 1000, Message: "x"}},
		Now:  at(time.Minute),
	}, "fail[0].token", job.ErrLeaseLost, before, "q")
	if _, err := b.s.QueueGet(b.ctx, "fresh"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a refused transaction's insert only: %v, want not found", err)
	}
	b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: good.ID, Token: good.LeaseToken}, {ID: stale.ID, Token: current.LeaseToken}},
		Fail:     []job.FailItem{{ID: other.ID, Token: other.LeaseToken, Message: "x"}},
		Now:      at(time.Minute),
	})
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 2, job.StateRetrying: 1})
}

// An unknown job refuses the whole call naming the item's id, and nothing
// changes.
func testTransactUnknown(b *bundle) {
	a := b.jobIn(job.StateActive, "q")
	before := []*job.Job{a}
	b.refused("an unknown job to ack", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}, {ID: "no-such-job", Token: 1}},
		Insert:   []store.JobInsertParams{newJob("q")},
		Now:      at(time.Minute),
	}, "ack[1].id", job.ErrNotFound, before, "q")
	b.refused("an unknown job to fail", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
		Fail:     []job.FailItem{{ID: "no-such-job", Token: 1, Message: "x"}},
		Now:      at(time.Minute),
	}, "fail[0].id", job.ErrNotFound, before, "q")
	// The first item refused is the one named.
	b.refused("an unknown job before a stale token", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: "no-such-job", Token: 1}, {ID: a.ID, Token: a.LeaseToken + 1}},
		Now:      at(time.Minute),
	}, "ack[0].id", job.ErrNotFound, before, "q")
}

// A job that is not active refuses the call even with its latest token,
// in every state.
func testTransactNotActive(b *bundle) {
	a := b.jobIn(job.StateActive, "a")
	for _, st := range job.States {
		if st == job.StateActive {
			continue
		}
		j := b.jobIn(st, "q")
		before := []*job.Job{a, j}
		b.refused(fmt.Sprintf("ack of a %s job", st), &store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}, {ID: j.ID, Token: j.LeaseToken}},
			Now:      at(time.Minute),
		}, "ack[1].token", job.ErrLeaseLost, before, "a", "q")
		b.refused(fmt.Sprintf("fail of a %s job", st), &store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
			Fail:     []job.FailItem{{ID: j.ID, Token: j.LeaseToken, Message: "x"}},
			Now:      at(time.Minute),
		}, "fail[0].token", job.ErrLeaseLost, before, "a", "q")
	}
}

// A job named by two items, acked and failed or acked twice, refuses the
// call at the later item: its lease is the earlier item's to end.
func testTransactSameJobTwice(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	before := []*job.Job{j}
	b.refused("ack and fail of one job", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}},
		Fail:     []job.FailItem{{ID: j.ID, Token: j.LeaseToken, Message: "x"}},
		Now:      at(time.Minute),
	}, "fail[0].token", job.ErrLeaseLost, before, "q")
	b.refused("two acks of one job", &store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}, {ID: j.ID, Token: j.LeaseToken}},
		Now:      at(time.Minute),
	}, "ack[1].token", job.ErrLeaseLost, before, "q")
}

// Inserts follow the rules of JobInsertMany: an id or a pending unique key
// of the same queue is a duplicate, answered with the job there, and does
// not stop the rest of the call; within the call, duplicates resolve to
// the first.
func testTransactDuplicates(b *bundle) {
	a := b.jobIn(job.StateActive, "q")
	byID := b.jobIn(job.StateAvailable, "next")
	byKey := b.jobIn(job.StateAvailable, "next", withUnique("k", 0))
	fresh := newJob("next", withUnique("fresh", 0))
	res := b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
		Insert: []store.JobInsertParams{
			newJob("next", func(p *store.JobInsertParams) { p.ID = byID.ID }),
			newJob("next", withUnique("k", 0)),
			fresh,
			newJob("next", withUnique("fresh", 0)),
			newJob("next", func(p *store.JobInsertParams) { p.ID = fresh.ID }),
		},
		Now: at(time.Minute),
	})
	for i, want := range []string{byID.ID, byKey.ID, "", fresh.ID, fresh.ID} {
		r := res.Inserted[i]
		if r.Duplicate != (want != "") || (want != "" && r.Job.ID != want) {
			b.t.Fatalf("insert %d: result %+v, want a duplicate of %q", i, r, want)
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 1})
	b.wantCounts("next", map[job.State]int64{job.StateAvailable: 3})
}

// An id that belongs to a job of another queue refuses the whole call
// with an id taken error naming "enqueue[i].id", and nothing changes: the
// acked job stays active, the other inserts are not there.
func testTransactIDTaken(b *bundle) {
	a := b.jobIn(job.StateActive, "q")
	f := b.jobIn(job.StateActive, "q")
	holder := b.jobIn(job.StateAvailable, "other")
	before := []*job.Job{a, f, holder}
	fresh := newJob("fresh")
	taken := newJob("q", func(p *store.JobInsertParams) { p.ID = holder.ID })
	keyed := newJob("q", func(p *store.JobInsertParams) { p.ID, p.UniqueKey = holder.ID, "k" })
	for _, ins := range []store.JobInsertParams{taken, keyed} {
		p := &store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
			Fail:     []job.FailItem{{ID: f.ID, Token: f.LeaseToken, Message: "x"}},
			Insert:   []store.JobInsertParams{fresh, ins},
			Now:      at(time.Minute),
		}
		counts := b.counts("q")
		_, err := b.s.JobTransact(b.ctx, p)
		var idErr *job.IDTakenError
		if !errors.As(err, &idErr) || idErr.Field != "enqueue[1].id" {
			b.t.Fatalf("insert of an id of another queue: %v, want an id taken error on enqueue[1].id", err)
		}
		for _, j := range before {
			b.unchanged("a refused transaction", j)
		}
		b.missing("a refused transaction", fresh.ID)
		b.wantCounts("q", counts)
	}
	if _, err := b.s.QueueGet(b.ctx, "fresh"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("queue of a refused transaction's insert only: %v, want not found", err)
	}
	// The leases were not ended: the next transaction takes them.
	b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
		Fail:     []job.FailItem{{ID: f.ID, Token: f.LeaseToken, Message: "x", NoRetry: true}},
		Insert:   []store.JobInsertParams{fresh},
		Now:      at(time.Minute),
	})
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 1, job.StateDead: 1})
	b.wantCounts("fresh", map[job.State]int64{job.StateAvailable: 1})
}

// An insert of a level the store does not keep refuses the whole call
// with an input error naming its durability, and nothing changes.
func testTransactLevelNotKept(b *bundle) {
	a := b.jobIn(job.StateActive, "q")
	for _, d := range []job.Durability{job.DurabilityFull, job.DurabilityProcess, job.DurabilityMemory} {
		if slices.Contains(b.h.durabilities(), d) {
			continue
		}
		p := &store.JobTransactParams{
			Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
			Insert:   []store.JobInsertParams{newJob("q"), levelJob("q", d)},
			Now:      at(time.Minute),
		}
		_, err := b.s.JobTransact(b.ctx, p)
		var in *job.InputError
		if !errors.As(err, &in) || in.Field != "enqueue[1].durability" {
			b.t.Fatalf("insert of a %s job: %v, want an input error on enqueue[1].durability", d, err)
		}
		b.unchanged("a refused transaction", a)
		b.missing("a refused transaction", p.Insert[0].ID)
	}
}

// Inserts come after the acks and fails, and see them: a unique key whose
// pending job the call acknowledges is free again.
func testTransactInsertsSeeAcks(b *bundle) {
	a := b.jobIn(job.StateActive, "q", withUnique("k", 0))
	next := newJob("q", withUnique("k", 0))
	res := b.transact(&store.JobTransactParams{
		Complete: []job.CompleteItem{{ID: a.ID, Token: a.LeaseToken}},
		Insert:   []store.JobInsertParams{next},
		Now:      at(time.Minute),
	})
	if r := res.Inserted[0]; r.Duplicate || r.Job.ID != next.ID {
		b.t.Fatalf("insert with the key of the job acked before it: %+v, want inserted", r)
	}
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: 1, job.StateAvailable: 1})
}

// Transactions racing to acknowledge the same lease, each inserting a job
// of its own, have exactly one winner: the others are refused with the
// lease lost, and only the winner's job is inserted.
func testTransactRacing(b *bundle) {
	const jobs, racers = 10, 4
	b.add(newJobs("q", jobs)...)
	js := b.claimAt(t0, jobs, "q")
	if len(js) != jobs {
		b.t.Fatalf("claimed %d jobs, want %d", len(js), jobs)
	}
	inserts := make([][]store.JobInsertParams, jobs)
	errs := make([][]error, jobs)
	var wg sync.WaitGroup
	for n, j := range js {
		inserts[n] = newJobs("next", racers)
		errs[n] = make([]error, racers)
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &store.JobTransactParams{Insert: []store.JobInsertParams{inserts[n][r]}, Now: at(time.Second)}
				if r%2 == 0 {
					p.Complete = []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}}
				} else {
					p.Fail = []job.FailItem{{ID: j.ID, Token: j.LeaseToken, Message: "x", NoRetry: true}}
				}
				_, errs[n][r] = b.s.JobTransact(b.ctx, p)
			}()
		}
	}
	wg.Wait()
	done := 0
	for n := range js {
		winners := 0
		for r, err := range errs[n] {
			switch {
			case err == nil:
				winners++
				if j := b.get(inserts[n][r].ID); j.State != job.StateAvailable {
					b.t.Fatalf("the winner's job is %s", j.State)
				}
			case errors.Is(err, job.ErrLeaseLost):
				b.missing("a transaction that lost the race", inserts[n][r].ID)
			default:
				b.t.Fatalf("transaction %d on job %d: %v, want nil or lease lost", r, n, err)
			}
		}
		if winners != 1 {
			b.t.Fatalf("job %d: %d transactions won, want 1", n, winners)
		}
		if st := b.get(js[n].ID).State; st != job.StateCompleted && st != job.StateDead {
			b.t.Fatalf("job %d ended %s", n, st)
		}
		done++
	}
	b.wantCounts("next", map[job.State]int64{job.StateAvailable: int64(done)})
}

// Transactions refused after their checks passed (an insert's id belongs
// to a job of another queue), running at once with transactions that
// succeed, change nothing, and the others take effect whole: a store that
// groups calls into one commit keeps each call apart.
func testTransactRefusedAmongOthers(b *bundle) {
	const calls = 40
	holder := b.jobIn(job.StateAvailable, "other")
	b.add(newJobs("q", calls)...)
	js := b.claimAt(t0, calls, "q")
	if len(js) != calls {
		b.t.Fatalf("claimed %d jobs, want %d", len(js), calls)
	}
	inserts := newJobs("next", calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for n, j := range js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &store.JobTransactParams{
				Complete: []job.CompleteItem{{ID: j.ID, Token: j.LeaseToken}},
				Insert:   []store.JobInsertParams{inserts[n]},
				Now:      at(time.Second),
			}
			if n%2 == 1 {
				p.Insert = append(p.Insert, newJob("next", func(p *store.JobInsertParams) { p.ID = holder.ID }))
			}
			_, errs[n] = b.s.JobTransact(b.ctx, p)
		}()
	}
	wg.Wait()
	for n, j := range js {
		if n%2 == 0 {
			if errs[n] != nil {
				b.t.Fatalf("transaction %d: %v", n, errs[n])
			}
			if st := b.get(j.ID).State; st != job.StateCompleted {
				b.t.Fatalf("job acked by transaction %d is %s", n, st)
			}
			if st := b.get(inserts[n].ID).State; st != job.StateAvailable {
				b.t.Fatalf("job inserted by transaction %d is %s", n, st)
			}
			continue
		}
		if !errors.Is(errs[n], job.ErrIDTaken) {
			b.t.Fatalf("transaction %d: %v, want id taken", n, errs[n])
		}
		b.unchanged(fmt.Sprintf("refused transaction %d", n), j)
		b.missing(fmt.Sprintf("refused transaction %d", n), inserts[n].ID)
	}
	b.wantCounts("q", map[job.State]int64{job.StateCompleted: calls / 2, job.StateActive: calls / 2})
	b.wantCounts("next", map[job.State]int64{job.StateAvailable: calls / 2})
	// The leases of the refused transactions still hold.
	var items []job.CompleteItem
	for n := 1; n < calls; n += 2 {
		items = append(items, job.CompleteItem{ID: js[n].ID, Token: js[n].LeaseToken})
	}
	b.accepted("complete", b.complete(at(time.Minute), items...), job.StateCompleted)
}
