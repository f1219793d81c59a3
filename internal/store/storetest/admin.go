package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func adminTests() []group {
	return []group{
		{"JobGet", []test{
			{"UnknownIDIsNotFound", testGetUnknown},
		}},
		{"JobList", []test{
			{"FiltersByQueueAndState", testListFilters},
			{"FiltersByQueuePrefixes", testListByQueuePrefixes},
			{"PagesNeverRepeatOrMissJobs", testListPagingWhileChanging},
			{"LastPageHasNoCursor", testListLastPage},
			{"BadCursorIsInputError", testListBadCursor},
		}},
		{"JobCancel", []test{
			{"WaitingJobsEndCancelledAtOnce", testCancelWaiting},
			{"ActiveJobGetsCancelRequested", testCancelActive},
			{"CancelledJobIsNoOp", testCancelCancelled},
			{"FinishedJobsAreInvalidState", testCancelFinished},
			{"UnknownIDIsNotFound", testCancelUnknown},
		}},
		{"JobRetry", []test{
			{"MakesAvailableNowWithAttemptsReset", testRetry},
			{"ClearsAnEarlierCancelRequest", testRetryClearsCancel},
			{"OtherStatesAreInvalidState", testRetryInvalid},
		}},
		{"JobDelete", []test{
			{"RemovesJobsNotActive", testDelete},
			{"ActiveJobIsInvalidState", testDeleteActive},
		}},
		{"JobRetryMany", []test{
			{"RetriesOneStateOfOneQueue", testRetryMany},
			{"OtherStatesAreInvalidState", testRetryManyInvalid},
		}},
		{"JobDeleteMany", []test{
			{"DeletesOneStateOfOneQueue", testDeleteMany},
			{"ActiveIsInvalidState", testDeleteManyActive},
		}},
	}
}

func testGetUnknown(b *bundle) {
	b.add(newJob("q"))
	_, err := b.s.JobGet(b.ctx, "no-such-job")
	b.wantErr("get an unknown job", err, job.ErrNotFound)
}

// Every combination of the queue and state filters lists exactly the
// matching jobs, in enqueue order, whatever the page size.
func testListFilters(b *bundle) {
	var order []string
	for i := 0; i < 4; i++ {
		for _, q := range []string{"a", "b", "c"} {
			for _, id := range b.add(newJobs(q, 2, withPriority(i%2))...) {
				order = append(order, id)
			}
		}
	}
	for _, st := range job.States {
		if st != job.StateAvailable {
			order = append(order, b.jobIn(st, "b").ID, b.jobIn(st, "c").ID)
		}
	}
	b.claimAt(t0, 3, "a")
	all := make(map[string]*job.Job)
	for _, j := range b.listAll("", "", 1000) {
		all[j.ID] = j
	}
	if len(all) != len(order) {
		b.t.Fatalf("listed %d jobs, inserted %d", len(all), len(order))
	}
	for _, queue := range []string{"", "a", "b", "c", "nosuch"} {
		for _, st := range append([]job.State{""}, job.States...) {
			var want []string
			for _, id := range order {
				if j := all[id]; (queue == "" || j.Queue == queue) && (st == "" || j.State == st) {
					want = append(want, id)
				}
			}
			for _, limit := range []int{1, 4, 1000} {
				got := idsOf(b.listAll(queue, st, limit))
				if !slices.Equal(got, want) {
					b.t.Fatalf("list queue %q state %q by %d: %v, want %v", queue, st, limit, got, want)
				}
			}
		}
	}
}

// A listing limited to queue prefixes lists exactly the jobs of the
// queues whose names start with one of them, in the order of the whole
// listing (enqueue order, in each tier of a store of tiers), in every
// state, of every durability and whatever the page size; a prefix is compared byte for byte,
// never as a pattern. With a queue as well, it lists the queue's jobs
// when the queue has one of the prefixes, and none otherwise.
func testListByQueuePrefixes(b *bundle) {
	for _, d := range b.h.durabilities() {
		level := func(p *store.JobInsertParams) { p.Durability = d }
		for _, q := range []string{"b.x", "a.x", "ab", "a_z", "A.x", "a.y", "b.a.x"} {
			b.add(newJobs(q, 2, level)...)
			for _, st := range job.States {
				b.jobIn(st, q, level)
			}
		}
	}
	b.claimAt(t0, 1, "a.y")
	every := b.listAll("", "", 1000)
	for _, prefixes := range [][]string{{"a."}, {"a_", "a."}, {"a_"}, {"a"}, {"b.", "zz"}, {"zz"}, {"a.x", "a.x"}} {
		for _, queue := range []string{"", "a.x", "ab", "nosuch"} {
			for _, st := range append([]job.State{""}, job.States...) {
				var want []string
				for _, j := range every {
					if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(j.Queue, p) }) &&
						(queue == "" || j.Queue == queue) && (st == "" || j.State == st) {
						want = append(want, j.ID)
					}
				}
				for _, limit := range []int{2, 1000} {
					got := idsOf(b.listEvery(job.ListParams{QueuePrefixes: prefixes, Queue: queue, State: st, Limit: limit}))
					if !slices.Equal(got, want) {
						b.t.Fatalf("list prefixes %q queue %q state %q by %d: %v, want %v", prefixes, queue, st, limit, got, want)
					}
				}
			}
		}
	}
}

// Paging through a listing while jobs change state, arrive and go lists
// each job that lives throughout exactly once, in enqueue order, with the
// jobs that arrive during the paging on the later pages.
func testListPagingWhileChanging(b *bundle) {
	var order []string // every live job in enqueue order
	queueOf := make(map[string]string)
	add := func(queue string, n int) []string {
		ids := b.add(newJobs(queue, n)...)
		for _, id := range ids {
			queueOf[id] = queue
		}
		order = append(order, ids...)
		return ids
	}
	for _, filter := range []string{"q", ""} {
		first := add("q", 12)
		add("r", 4)
		var got []string
		cursor := ""
		for page := 0; ; page++ {
			p, err := b.s.JobList(b.ctx, &job.ListParams{Queue: filter, Cursor: cursor, Limit: 5})
			if err != nil {
				b.t.Fatalf("list %q page %d: %v", filter, page, err)
			}
			got = append(got, idsOf(p.Jobs)...)
			switch page {
			case 0:
				// Change jobs on both sides of the cursor.
				js := b.claimAt(t0, 8, "q")
				b.accepted("complete", b.complete(t0, job.CompleteItem{ID: js[0].ID, Token: js[0].LeaseToken}), job.StateCompleted)
				b.accepted("fail", b.fail(t0, job.FailItem{ID: js[6].ID, Token: js[6].LeaseToken, Message: "x"}), job.StateRetrying)
				b.cancel(first[10], t0)
				if err := b.s.JobDelete(b.ctx, first[11]); err != nil {
					b.t.Fatalf("delete: %v", err)
				}
				order = slices.DeleteFunc(order, func(id string) bool { return id == first[11] })
				add("q", 3)
			case 1:
				add("r", 2)
			}
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		var want []string
		for _, id := range order {
			if filter == "" || queueOf[id] == filter {
				want = append(want, id)
			}
		}
		if !slices.Equal(got, want) {
			b.t.Fatalf("paged listing of queue %q: %v, want %v", filter, got, want)
		}
	}
}

// The page holding the last job has no cursor, also when it is full.
func testListLastPage(b *bundle) {
	ids := b.add(newJobs("q", 8)...)
	p1, err := b.s.JobList(b.ctx, &job.ListParams{Queue: "q", Limit: 4})
	if err != nil || len(p1.Jobs) != 4 || p1.Next == "" {
		b.t.Fatalf("first page: %+v, %v", p1, err)
	}
	p2, err := b.s.JobList(b.ctx, &job.ListParams{Queue: "q", Limit: 4, Cursor: p1.Next})
	if err != nil || !slices.Equal(idsOf(p2.Jobs), ids[4:]) || p2.Next != "" {
		b.t.Fatalf("second page: %v next %q, %v; want %v and no cursor", idsOf(p2.Jobs), p2.Next, err, ids[4:])
	}
	empty, err := b.s.JobList(b.ctx, &job.ListParams{Queue: "nosuch", Limit: 4})
	if err != nil || len(empty.Jobs) != 0 || empty.Next != "" {
		b.t.Fatalf("listing of an unknown queue: %+v, %v", empty, err)
	}
}

// A cursor the store did not issue is the caller's fault.
func testListBadCursor(b *bundle) {
	b.add(newJobs("q", 3)...)
	for _, c := range []string{"garbage!", "%%%", "\x00", "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
		_, err := b.s.JobList(b.ctx, &job.ListParams{Cursor: c, Limit: 2})
		var in *job.InputError
		if !errors.As(err, &in) {
			b.t.Fatalf("cursor %q: error %v, want one wrapping *job.InputError", c, err)
		}
	}
}

// A scheduled, available or retrying job ends cancelled at Now, and is
// never handed out or promoted after.
func testCancelWaiting(b *bundle) {
	for _, st := range []job.State{job.StateScheduled, job.StateAvailable, job.StateRetrying} {
		j := b.jobIn(st, "q")
		got := b.cancel(j.ID, at(time.Minute))
		want := *j
		want.State, want.FinishedAt = job.StateCancelled, at(time.Minute)
		if d := diffJob(got, &want); d != "" {
			b.t.Fatalf("cancel a %s job returned: %s", st, d)
		}
		b.unchanged("checking a cancelled "+string(st)+" job", &want)
	}
	if res, err := b.s.JobPromoteDue(b.ctx, at(24*time.Hour), 10); err != nil || res.Count != 0 {
		b.t.Fatalf("promote after cancel: %+v, %v", res, err)
	}
	if got := b.claimAt(at(24*time.Hour), 10, "q"); len(got) != 0 {
		b.t.Fatalf("cancelled jobs were handed out: %v", idsOf(got))
	}
	b.wantCounts("q", map[job.State]int64{job.StateCancelled: 3})
}

// An active job gets CancelRequested and keeps running under its lease
// until its worker acks it (see the tests of complete, fail, release and
// rescue for where it ends).
func testCancelActive(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	got := b.cancel(j.ID, at(time.Second))
	want := *j
	want.CancelRequested = true
	if d := diffJob(got, &want); d != "" {
		b.t.Fatalf("cancel an active job returned: %s", d)
	}
	b.unchanged("checking a cancel-requested job", &want)
	if again := b.cancel(j.ID, at(2*time.Second)); diffJob(again, &want) != "" {
		b.t.Fatalf("second cancel of an active job: %s", diffJob(again, &want))
	}
	b.wantCounts("q", map[job.State]int64{job.StateActive: 1})
}

// Cancelling a cancelled job changes nothing and returns it.
func testCancelCancelled(b *bundle) {
	j := b.jobIn(job.StateCancelled, "q")
	if got := b.cancel(j.ID, at(time.Hour)); diffJob(got, j) != "" {
		b.t.Fatalf("cancel again returned: %s", diffJob(got, j))
	}
	b.unchanged("a second cancel", j)
}

// Completed and dead jobs cannot be cancelled.
func testCancelFinished(b *bundle) {
	for _, st := range []job.State{job.StateCompleted, job.StateDead} {
		j := b.jobIn(st, "q")
		_, err := b.s.JobCancel(b.ctx, j.ID, at(time.Second))
		b.wantErr("cancel a "+string(st)+" job", err, job.ErrInvalidState)
		b.unchanged("cancel a "+string(st)+" job", j)
	}
}

func testCancelUnknown(b *bundle) {
	_, err := b.s.JobCancel(b.ctx, "no-such-job", t0)
	b.wantErr("cancel an unknown job", err, job.ErrNotFound)
}

// A dead, cancelled, retrying or scheduled job becomes available at Now
// with Attempt zero, its errors kept, its finish time cleared; the next
// hand-out gets a higher token than any before.
func testRetry(b *bundle) {
	for i, st := range []job.State{job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled} {
		queue := fmt.Sprintf("q%d", i)
		j := b.jobIn(st, queue)
		now := at(time.Duration(i+1) * time.Minute)
		got, err := b.s.JobRetry(b.ctx, j.ID, now)
		if err != nil {
			b.t.Fatalf("retry a %s job: %v", st, err)
		}
		want := *j
		want.State, want.Attempt, want.RunAt, want.FinishedAt = job.StateAvailable, 0, now, time.Time{}
		if d := diffJob(got, &want); d != "" {
			b.t.Fatalf("retry a %s job returned: %s", st, d)
		}
		b.unchanged("checking a retried "+string(st)+" job", &want)
		c := b.claimID(now, queue, j.ID)
		if c.Attempt != 1 || c.LeaseToken <= j.LeaseToken {
			b.t.Fatalf("claim of a retried %s job: attempt %d, token %d (was %d)", st, c.Attempt, c.LeaseToken, j.LeaseToken)
		}
		b.wantCounts(queue, map[job.State]int64{job.StateActive: 1})
	}
}

// A job cancelled while it ran, then retried, runs as a fresh job: its
// next ack completes it.
func testRetryClearsCancel(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.cancel(j.ID, t0)
	b.accepted("complete", b.complete(t0, job.CompleteItem{ID: j.ID, Token: j.LeaseToken}), job.StateCancelled)
	got, err := b.s.JobRetry(b.ctx, j.ID, at(time.Second))
	if err != nil || got.CancelRequested {
		b.t.Fatalf("retry: cancel requested %v, %v", got != nil && got.CancelRequested, err)
	}
	c := b.claimID(at(time.Second), "q", j.ID)
	b.accepted("complete", b.complete(at(2*time.Second), job.CompleteItem{ID: c.ID, Token: c.LeaseToken}), job.StateCompleted)
}

// Available, active and completed jobs cannot be retried, and unknown
// ones are not found.
func testRetryInvalid(b *bundle) {
	for _, st := range []job.State{job.StateAvailable, job.StateActive, job.StateCompleted} {
		j := b.jobIn(st, "q")
		_, err := b.s.JobRetry(b.ctx, j.ID, at(time.Second))
		b.wantErr("retry a "+string(st)+" job", err, job.ErrInvalidState)
		b.unchanged("retry a "+string(st)+" job", j)
	}
	_, err := b.s.JobRetry(b.ctx, "no-such-job", t0)
	b.wantErr("retry an unknown job", err, job.ErrNotFound)
}

// A job in any state but active can be deleted: it is gone from JobGet,
// listings and claims, and its ID is free again.
func testDelete(b *bundle) {
	for _, st := range job.States {
		if st == job.StateActive {
			continue
		}
		j := b.jobIn(st, "q")
		if err := b.s.JobDelete(b.ctx, j.ID); err != nil {
			b.t.Fatalf("delete a %s job: %v", st, err)
		}
		_, err := b.s.JobGet(b.ctx, j.ID)
		b.wantErr("get a deleted "+string(st)+" job", err, job.ErrNotFound)
		b.wantErr("delete it again", b.s.JobDelete(b.ctx, j.ID), job.ErrNotFound)
	}
	if got := b.listAll("q", "", 100); len(got) != 0 {
		b.t.Fatalf("deleted jobs are listed: %v", idsOf(got))
	}
	if got := b.claimAt(at(24*time.Hour), 10, "q"); len(got) != 0 {
		b.t.Fatalf("deleted jobs were handed out: %v", idsOf(got))
	}
	if res, err := b.s.JobPromoteDue(b.ctx, at(24*time.Hour), 10); err != nil || res.Count != 0 || !res.Next.IsZero() {
		b.t.Fatalf("promote after delete: %+v, %v", res, err)
	}
	b.wantCounts("q", nil)
	p := newJob("q")
	b.add(p)
	if err := b.s.JobDelete(b.ctx, p.ID); err != nil {
		b.t.Fatalf("delete: %v", err)
	}
	if res := b.insertAt(t0, p); res[0].Duplicate {
		b.t.Fatal("the id of a deleted job still counts as taken")
	}
	b.wantErr("delete an unknown job", b.s.JobDelete(b.ctx, "no-such-job"), job.ErrNotFound)
}

// An active job must be cancelled before it can be deleted.
func testDeleteActive(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	b.wantErr("delete an active job", b.s.JobDelete(b.ctx, j.ID), job.ErrInvalidState)
	b.unchanged("delete an active job", j)
}

// JobRetryMany retries every job of one queue in one state and no other.
func testRetryMany(b *bundle) {
	states := []job.State{job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled}
	byState := make(map[job.State][]*job.Job)
	for _, st := range states {
		for range 3 {
			byState[st] = append(byState[st], b.jobIn(st, "q"))
		}
		b.jobIn(st, "other")
	}
	for i, st := range states {
		now := at(time.Duration(i+1) * time.Minute)
		n, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: st, Now: now})
		if err != nil || n != 3 {
			b.t.Fatalf("retry %s jobs: %d, %v; want 3", st, n, err)
		}
		for _, j := range byState[st] {
			want := *j
			want.State, want.Attempt, want.RunAt, want.FinishedAt = job.StateAvailable, 0, now, time.Time{}
			b.unchanged("checking a retried "+string(st)+" job", &want)
		}
		if n, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: st, Now: now}); err != nil || n != 0 {
			b.t.Fatalf("retry %s jobs again: %d, %v; want 0", st, n, err)
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 12})
	b.wantCounts("other", map[job.State]int64{job.StateDead: 1, job.StateCancelled: 1, job.StateRetrying: 1, job.StateScheduled: 1})
	if got := b.claimAt(at(time.Hour), 100, "q"); len(got) != 12 {
		b.t.Fatalf("claimed %d retried jobs, want 12", len(got))
	}
}

// JobRetryMany refuses the states JobRetry refuses and changes nothing.
func testRetryManyInvalid(b *bundle) {
	for _, st := range []job.State{job.StateAvailable, job.StateActive, job.StateCompleted} {
		j := b.jobIn(st, "q")
		_, err := b.s.JobRetryMany(b.ctx, &store.JobBulkParams{Queue: "q", State: st, Now: at(time.Second)})
		b.wantErr("retry "+string(st)+" jobs", err, job.ErrInvalidState)
		b.unchanged("retry "+string(st)+" jobs", j)
	}
}

// JobDeleteMany deletes every job of one queue in one state and no other.
func testDeleteMany(b *bundle) {
	for _, st := range job.States {
		for range 2 {
			b.jobIn(st, "q")
		}
		b.jobIn(st, "other")
	}
	want := map[job.State]int64{}
	for _, st := range job.States {
		want[st] = 2
	}
	for _, st := range job.States {
		if st == job.StateActive {
			continue
		}
		n, err := b.s.JobDeleteMany(b.ctx, &store.JobBulkParams{Queue: "q", State: st, Now: t0})
		if err != nil || n != 2 {
			b.t.Fatalf("delete %s jobs: %d, %v; want 2", st, n, err)
		}
		want[st] = 0
		b.wantCounts("q", want)
		if got := b.listAll("q", st, 100); len(got) != 0 {
			b.t.Fatalf("deleted %s jobs are listed: %v", st, idsOf(got))
		}
	}
	if got := b.claimAt(at(24*time.Hour), 10, "q"); len(got) != 0 {
		b.t.Fatalf("deleted jobs were handed out: %v", idsOf(got))
	}
	b.wantCounts("other", map[job.State]int64{job.StateScheduled: 1, job.StateAvailable: 1, job.StateActive: 1,
		job.StateRetrying: 1, job.StateCompleted: 1, job.StateDead: 1, job.StateCancelled: 1})
}

// Active jobs must be cancelled before they can be deleted.
func testDeleteManyActive(b *bundle) {
	j := b.jobIn(job.StateActive, "q")
	_, err := b.s.JobDeleteMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateActive, Now: t0})
	b.wantErr("delete active jobs", err, job.ErrInvalidState)
	b.unchanged("delete active jobs", j)
}
