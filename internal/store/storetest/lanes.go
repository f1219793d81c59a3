package storetest

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func laneTests() []group {
	return []group{{"ConsumerGroups", []test{
		{"EachGroupReceivesEveryJob", testLanesFanOut},
		{"AGroupHasItsOwnAttemptsAndOutcomes", testLanesOwnState},
		{"AGroupStartsWhereItIsTold", testLanesStart},
		{"ASeekReplays", testLanesSeek},
		{"TheListShowsEachGroupsLag", testLanesList},
		{"TheListOfEveryQueuePagesByQueueAndName", testLanesListAll},
		{"ADeletedGroupGetsNoMoreJobs", testLanesDelete},
		{"EachGroupKeepsItsOwnPlaceInEveryGroup", testLanesOrdered},
		{"ALaneFollowsItsQueuesPause", testLanesPause},
		{"GroupsSurviveARestart", testLanesRestart},
	}}}
}

// createGroup creates consumer group name of queue starting at start,
// which must create it.
func (b *bundle) createGroup(queue, name string, start job.ConsumerGroupStart, from time.Time) {
	b.t.Helper()
	created, err := b.s.ConsumerGroupCreate(b.ctx, &store.ConsumerGroupParams{Queue: queue, Name: name, Start: start, From: from, Now: t0})
	if err != nil || !created {
		b.t.Fatalf("create consumer group %s of %s: created %v, %v", name, queue, created, err)
	}
}

// groupsOfQueue lists the consumer groups of queue.
func (b *bundle) groupsOfQueue(queue string) []job.ConsumerGroup {
	b.t.Helper()
	gs, err := b.s.ConsumerGroupList(b.ctx, queue)
	if err != nil {
		b.t.Fatalf("list consumer groups of %s: %v", queue, err)
	}
	return gs
}

// copiesOf is the ids of the copies of ids in group g.
func copiesOf(ids []string, g string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = job.CopyID(id, g)
	}
	return out
}

// Every job inserted into a queue reaches each of its groups as a copy
// with the job's payload, kind and group, and the queue's own fetches
// still get the jobs themselves.
func testLanesFanOut(b *bundle) {
	b.createGroup("q", "billing", job.StartBeginning, time.Time{})
	b.createGroup("q", "audit", job.StartBeginning, time.Time{})
	ids := b.add(grouped("q", "tenant-1", 5)...)
	for _, g := range []string{"billing", "audit"} {
		js := b.claimAt(t0, 10, job.LaneName("q", g))
		if !slices.Equal(idsOf(js), copiesOf(ids, g)) {
			b.t.Fatalf("group %s claimed %v, want the copies of %v in order", g, idsOf(js), ids)
		}
		for i, j := range js {
			orig := b.get(ids[i])
			if string(j.Payload) != string(orig.Payload) || j.Kind != orig.Kind || j.Group != "tenant-1" || j.Attempt != 1 {
				b.t.Fatalf("group %s's copy %+v of %+v", g, j, orig)
			}
		}
	}
	if js := b.claimAt(t0, 10, "q"); !slices.Equal(idsOf(js), ids) {
		b.t.Fatalf("the queue's own claim: %v, want %v", idsOf(js), ids)
	}
	// A duplicate enqueue makes no second copy.
	b.insertAt(t0, newJob("q", func(p *store.JobInsertParams) { p.ID = ids[0] }))
	if n := b.counts(job.LaneName("q", "billing"))[job.StateActive]; n != 5 {
		b.t.Fatalf("billing has %d jobs active after a duplicate enqueue, want 5", n)
	}
}

// Acks, fails and retries of one group's copy touch neither the job nor
// the other group's copy.
func testLanesOwnState(b *bundle) {
	b.createGroup("q", "a", job.StartBeginning, time.Time{})
	b.createGroup("q", "b", job.StartBeginning, time.Time{})
	id := b.add(newJob("q"))[0]
	ca := b.claimID(t0, job.LaneName("q", "a"), job.CopyID(id, "a"))
	b.accepted("fail", b.fail(t0, job.FailItem{ID: ca.ID, Token: ca.LeaseToken, Message: "boom", RetryAfter: time.Minute}), job.StateRetrying)
	cb := b.claimID(t0, job.LaneName("q", "b"), job.CopyID(id, "b"))
	b.completeAll(t0, []*job.Job{cb})
	if j := b.get(job.CopyID(id, "a")); j.State != job.StateRetrying || len(j.Errors) != 1 {
		b.t.Fatalf("group a's copy: %s with %d errors, want retrying with 1", j.State, len(j.Errors))
	}
	if j := b.get(id); j.State != job.StateAvailable || j.Attempt != 0 {
		b.t.Fatalf("the job itself: %s after %d attempts, want available and untouched", j.State, j.Attempt)
	}
	if j := b.get(job.CopyID(id, "b")); j.State != job.StateCompleted {
		b.t.Fatalf("group b's copy: %s, want completed", j.State)
	}
}

// A group starts at the beginning (every job still held, finished ones
// too), at new jobs only, or at a time.
func testLanesStart(b *bundle) {
	early := b.add(newJobs("q", 2)...)
	done := b.claimID(t0, "q", early[0])
	b.completeAll(t0, []*job.Job{done})
	late := idsOf(resultJobs(b.insertAt(at(10*time.Second), newJobs("q", 2)...)))
	b.createGroup("q", "all", job.StartBeginning, time.Time{})
	b.createGroup("q", "new", job.StartNew, time.Time{})
	b.createGroup("q", "since", job.StartAt, at(5*time.Second))
	for _, c := range []struct {
		group string
		want  []string
	}{
		{"all", copiesOf(append(slices.Clone(early), late...), "all")},
		{"new", nil},
		{"since", copiesOf(late, "since")},
	} {
		if got := idsOf(b.claimAt(at(20*time.Second), 10, job.LaneName("q", c.group))); !slices.Equal(got, c.want) {
			b.t.Fatalf("group %s starts with %v, want %v", c.group, got, c.want)
		}
	}
	// Creating a group again changes nothing.
	if created, err := b.s.ConsumerGroupCreate(b.ctx, &store.ConsumerGroupParams{Queue: "q", Name: "all", Now: t0}); err != nil || created {
		b.t.Fatalf("create an existing group: created %v, %v", created, err)
	}
	next := b.add(newJob("q"))[0]
	if got := idsOf(b.claimAt(at(20*time.Second), 10, job.LaneName("q", "new"))); !slices.Equal(got, []string{job.CopyID(next, "new")}) {
		b.t.Fatalf("a new-only group after an insert: %v", got)
	}
}

// resultJobs is the jobs of insert results.
func resultJobs(rs []store.InsertResult) []*job.Job {
	out := make([]*job.Job, len(rs))
	for i, r := range rs {
		out[i] = r.Job
	}
	return out
}

// A seek to the beginning replays every job, finished or not; a seek to
// new jobs only leaves the group nothing to do; a seek to a time replays
// from there. Jobs out at the seek are taken back.
func testLanesSeek(b *bundle) {
	b.createGroup("q", "g", job.StartBeginning, time.Time{})
	ids := b.add(newJobs("q", 3)...)
	late := b.insertAt(at(10*time.Second), newJob("q"))[0].Job.ID
	lane := job.LaneName("q", "g")
	js := b.claimAt(at(11*time.Second), 10, lane)
	b.completeAll(at(11*time.Second), js[:3])
	out := js[3]
	seek := func(start job.ConsumerGroupStart, from time.Time) int {
		n, err := b.s.ConsumerGroupSeek(b.ctx, &store.ConsumerGroupParams{Queue: "q", Name: "g", Start: start, From: from, Now: at(12 * time.Second)})
		if err != nil {
			b.t.Fatalf("seek: %v", err)
		}
		return n
	}
	if n := seek(job.StartBeginning, time.Time{}); n != 4 {
		b.t.Fatalf("seek to the beginning made %d copies, want 4", n)
	}
	b.wantCounts(lane, map[job.State]int64{job.StateAvailable: 4})
	if got := idsOf(b.claimAt(at(13*time.Second), 10, lane)); !slices.Equal(got, copiesOf(append(ids, late), "g")) {
		b.t.Fatalf("replay after a seek: %v", got)
	}
	if o := b.complete(at(13*time.Second), job.CompleteItem{ID: out.ID, Token: out.LeaseToken}); o[0].Err == nil {
		b.t.Fatalf("an ack of a copy out before the seek: accepted")
	}
	if n := seek(job.StartAt, at(5*time.Second)); n != 1 {
		b.t.Fatalf("seek to a time made %d copies, want 1", n)
	}
	if n := seek(job.StartNew, time.Time{}); n != 0 || b.counts(lane)[job.StateAvailable] != 0 {
		b.t.Fatalf("seek to new jobs: %d copies, counts %v", n, b.counts(lane))
	}
	_, err := b.s.ConsumerGroupSeek(b.ctx, &store.ConsumerGroupParams{Queue: "q", Name: "nobody", Now: t0})
	b.wantErr("seek an unknown group", err, job.ErrNotFound)
}

// The list gives each group its counts and the creation time of the
// oldest job it has not finished.
func testLanesList(b *bundle) {
	b.createGroup("q", "b", job.StartBeginning, time.Time{})
	b.createGroup("q", "a", job.StartBeginning, time.Time{})
	first := b.insertAt(at(time.Second), newJob("q"))[0].Job.ID
	b.insertAt(at(2*time.Second), newJob("q"))
	js := b.claimAt(at(3*time.Second), 1, job.LaneName("q", "a"))
	b.completeAll(at(3*time.Second), js)
	gs := b.groupsOfQueue("q")
	if len(gs) != 2 || gs[0].Name != "a" || gs[1].Name != "b" {
		b.t.Fatalf("groups %+v, want a and b", gs)
	}
	a, bb := gs[0], gs[1]
	if a.Counts[job.StateCompleted] != 1 || a.Counts[job.StateAvailable] != 1 || !a.OldestPending.Equal(at(2*time.Second)) {
		b.t.Fatalf("group a: counts %v, oldest pending %v", a.Counts, a.OldestPending)
	}
	if bb.Counts[job.StateAvailable] != 2 || !bb.OldestPending.Equal(b.get(first).CreatedAt) || !bb.CreatedAt.Equal(t0) {
		b.t.Fatalf("group b: %+v", bb)
	}
	if gs := b.groupsOfQueue("other"); len(gs) != 0 {
		b.t.Fatalf("groups of a queue without any: %+v", gs)
	}
	rest := b.claimAt(at(4*time.Second), 1, job.LaneName("q", "a"))
	b.completeAll(at(4*time.Second), rest)
	if a := b.groupsOfQueue("q")[0]; !a.OldestPending.IsZero() {
		b.t.Fatalf("a group with every job finished: oldest pending %v", a.OldestPending)
	}
}

// The groups of every queue list by queue then name, each as the list of
// its queue gives it (the jobs of every durability counted), in pages that follow one another from any group,
// with the queues without groups left out.
func testLanesListAll(b *bundle) {
	if gs := b.allGroups(job.ConsumerGroupListParams{}); len(gs) != 0 {
		b.t.Fatalf("groups of an empty store: %+v", gs)
	}
	for _, q := range []string{"plain", "q", "r.x", "zz"} {
		b.add(newJobs(q, 2)...)
	}
	for _, g := range [][2]string{{"q", "b"}, {"r.x", "g"}, {"q", "a"}, {"a", "z"}, {"q", "B"}} {
		b.createGroup(g[0], g[1], job.StartBeginning, time.Time{})
	}
	for _, d := range b.h.durabilities() {
		b.insertAt(at(time.Second), newJob("q", func(p *store.JobInsertParams) { p.Durability = d }))
	}
	b.completeAll(at(2*time.Second), b.claimAt(at(2*time.Second), 1, job.LaneName("q", "a")))
	var want []job.ConsumerGroup
	for _, q := range []string{"a", "q", "r.x"} {
		want = append(want, b.groupsOfQueue(q)...)
	}
	names := func(gs []job.ConsumerGroup) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = g.Queue + "/" + g.Name
		}
		return out
	}
	if got := names(want); !slices.Equal(got, []string{"a/z", "q/B", "q/a", "q/b", "r.x/g"}) {
		b.t.Fatalf("the groups of each queue: %v", got)
	}
	same := func(what string, got, want []job.ConsumerGroup) {
		b.t.Helper()
		if len(got) != len(want) {
			b.t.Fatalf("%s: %v, want %v", what, names(got), names(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Queue != w.Queue || g.Name != w.Name || !g.CreatedAt.Equal(w.CreatedAt) || !g.OldestPending.Equal(w.OldestPending) {
				b.t.Fatalf("%s: group %d is %+v, want %+v", what, i, g, w)
			}
			for _, st := range job.States {
				if g.Counts[st] != w.Counts[st] {
					b.t.Fatalf("%s: group %s/%s counts %v, want %v", what, g.Queue, g.Name, g.Counts, w.Counts)
				}
			}
		}
	}
	same("one page", b.allGroups(job.ConsumerGroupListParams{}), want)
	var paged []job.ConsumerGroup
	after := job.ConsumerGroupListParams{Limit: 2}
	for range len(want) + 1 {
		page := b.allGroups(after)
		if len(page) > 2 {
			b.t.Fatalf("a page of 2 holds %d groups", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		last := page[len(page)-1]
		after.AfterQueue, after.AfterName = last.Queue, last.Name
	}
	same("pages of 2", paged, want)
	same("from queue q", b.allGroups(job.ConsumerGroupListParams{AfterQueue: "q"}), want[1:])
	same("after q/a", b.allGroups(job.ConsumerGroupListParams{AfterQueue: "q", AfterName: "a", Limit: 1}), want[3:4])
	if err := b.s.ConsumerGroupDelete(b.ctx, "q", "a"); err != nil {
		b.t.Fatalf("delete group: %v", err)
	}
	same("after a delete", b.allGroups(job.ConsumerGroupListParams{}), append(slices.Clone(want[:2]), want[3:]...))
}

// allGroups lists one page of the groups of every queue.
func (b *bundle) allGroups(p job.ConsumerGroupListParams) []job.ConsumerGroup {
	b.t.Helper()
	gs, err := b.s.ConsumerGroupListAll(b.ctx, &p)
	if err != nil {
		b.t.Fatalf("list the consumer groups of every queue: %v", err)
	}
	return gs
}

// A deleted group loses its jobs and gets no copies of later ones.
func testLanesDelete(b *bundle) {
	b.createGroup("q", "g", job.StartBeginning, time.Time{})
	b.add(newJobs("q", 2)...)
	b.claimAt(t0, 1, job.LaneName("q", "g"))
	if err := b.s.ConsumerGroupDelete(b.ctx, "q", "g"); err != nil {
		b.t.Fatalf("delete group: %v", err)
	}
	b.add(newJob("q"))
	if n := b.counts(job.LaneName("q", "g")); n[job.StateAvailable]+n[job.StateActive] != 0 {
		b.t.Fatalf("a deleted group's lane: %v", n)
	}
	if gs := b.groupsOfQueue("q"); len(gs) != 0 {
		b.t.Fatalf("groups after the delete: %+v", gs)
	}
	b.wantErr("delete an unknown group", b.s.ConsumerGroupDelete(b.ctx, "q", "g"), job.ErrNotFound)
	// The name can be taken again, from a fresh start.
	b.createGroup("q", "g", job.StartNew, time.Time{})
}

// In an ordered queue each group holds its own place in every group:
// a group whose job fails waits, the other goes on.
func testLanesOrdered(b *bundle) {
	parts := b.orderedQueue("q", 1, 2)
	b.createGroup("q", "a", job.StartBeginning, time.Time{})
	b.createGroup("q", "b", job.StartBeginning, time.Time{})
	first := parts["p0"][0]
	ca := b.claimID(t0, job.LaneName("q", "a"), job.CopyID(first, "a"))
	b.accepted("fail", b.fail(t0, job.FailItem{ID: ca.ID, Token: ca.LeaseToken, Message: "boom", RetryAfter: time.Hour}), job.StateRetrying)
	if got := b.claimAt(t0, 10, job.LaneName("q", "a")); len(got) != 0 {
		b.t.Fatalf("group a while its first job retries: %v", idsOf(got))
	}
	cb := b.claimID(t0, job.LaneName("q", "b"), job.CopyID(first, "b"))
	b.completeAll(t0, []*job.Job{cb})
	b.claimID(t0, job.LaneName("q", "b"), job.CopyID(parts["p0"][1], "b"))
}

// Pausing a queue pauses its groups' lanes too.
func testLanesPause(b *bundle) {
	b.createGroup("q", "g", job.StartBeginning, time.Time{})
	b.add(newJob("q"))
	if err := b.s.QueueSetPaused(b.ctx, "q", true); err != nil {
		b.t.Fatal(err)
	}
	if got := b.claimAt(t0, 10, job.LaneName("q", "g")); len(got) != 0 {
		b.t.Fatalf("a paused queue's lane handed out %v", idsOf(got))
	}
	if err := b.s.QueueSetPaused(b.ctx, "q", false); err != nil {
		b.t.Fatal(err)
	}
	if got := b.claimAt(t0, 10, job.LaneName("q", "g")); len(got) != 1 {
		b.t.Fatalf("a resumed queue's lane handed out %v", idsOf(got))
	}
}

// Groups, and the copies they get, outlive a restart.
func testLanesRestart(b *bundle) {
	if b.h.Reopen == nil {
		return
	}
	b.createGroup("q", "g", job.StartBeginning, time.Time{})
	b.add(newJob("q"))
	b.reopen()
	id := b.add(newJob("q"))[0]
	if gs := b.groupsOfQueue("q"); len(gs) != 1 || gs[0].Counts[job.StateAvailable] != 2 {
		b.t.Fatalf("groups after a restart: %+v", gs)
	}
	js := b.claimAt(t0, 10, job.LaneName("q", "g"))
	if len(js) != 2 || js[1].ID != job.CopyID(id, "g") {
		b.t.Fatalf("the lane after a restart: %v", idsOf(js))
	}
}
