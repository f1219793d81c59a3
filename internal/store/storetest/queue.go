package storetest

import (
	"errors"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

func queueTests() []group {
	return []group{
		{"QueueList", []test{
			{"ListsEveryKnownQueueByName", testQueueList},
		}},
		{"QueueGet", []test{
			{"UnknownQueueIsNotFound", testQueueGetUnknown},
			{"CountsEveryState", testQueueGetCounts},
		}},
		{"QueueDefaults", []test{
			{"FollowDurabilityAndSettings", testQueueDefaults},
		}},
		{"QueueSetPaused", []test{
			{"PausesResumesAndCreates", testQueueSetPaused},
		}},
		{"QueuePurge", []test{
			{"DeletesOnlyAvailableJobs", testQueuePurge},
		}},
	}
}

// QueueList names every queue that ever had a job or was paused, sorted
// by name, each with a count for every state.
func testQueueList(b *bundle) {
	qs, err := b.s.QueueList(b.ctx)
	if err != nil || len(qs) != 0 {
		b.t.Fatalf("queues of an empty store: %+v, %v", qs, err)
	}
	b.add(newJob("m"), newJob("b"))
	b.add(newJobs("m", 2)...)
	if err := b.s.QueueSetPaused(b.ctx, "z", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	if err := b.s.QueueSetPaused(b.ctx, "a", false); err != nil {
		b.t.Fatalf("resume: %v", err)
	}
	gone := b.add(newJob("d"))[0]
	if err := b.s.JobDelete(b.ctx, gone); err != nil {
		b.t.Fatalf("delete: %v", err)
	}
	qs, err = b.s.QueueList(b.ctx)
	if err != nil {
		b.t.Fatalf("list queues: %v", err)
	}
	if names := queueNames(qs); !slices.Equal(names, []string{"a", "b", "d", "m", "z"}) {
		b.t.Fatalf("queues %v, want a, b, d, m, z", names)
	}
	want := map[string]struct {
		paused    bool
		available int64
	}{"a": {false, 0}, "b": {false, 1}, "d": {false, 0}, "m": {false, 3}, "z": {true, 0}}
	for _, q := range qs {
		w := want[q.Name]
		if q.Paused != w.paused || q.Counts[job.StateAvailable] != w.available || len(q.Counts) != len(job.States) {
			b.t.Fatalf("queue %+v, want paused %v with %d available and a count for every state", q, w.paused, w.available)
		}
	}
}

func testQueueGetUnknown(b *bundle) {
	b.add(newJob("q"))
	_, err := b.s.QueueGet(b.ctx, "nosuch")
	b.wantErr("get an unknown queue", err, job.ErrNotFound)
}

// QueueGet counts the jobs of its queue in every state, zero included.
func testQueueGetCounts(b *bundle) {
	want := map[job.State]int64{}
	for i, st := range job.States {
		for range i + 1 {
			b.jobIn(st, "q")
		}
		want[st] = int64(i + 1)
	}
	b.jobIn(job.StateDead, "other")
	q, err := b.s.QueueGet(b.ctx, "q")
	if err != nil {
		b.t.Fatalf("get queue: %v", err)
	}
	if q.Name != "q" || q.Paused || len(q.Counts) != len(job.States) {
		b.t.Fatalf("queue %+v", q)
	}
	b.wantCounts("q", want)
	b.wantCounts("other", map[job.State]int64{job.StateDead: 1})
}

// QueueDefaults is not found for an unknown queue, full with no settings
// for a queue that only has jobs, and agrees with QueueGet after every
// change of the queue's durability or settings, at once.
func testQueueDefaults(b *bundle) {
	if _, err := b.s.QueueDefaults(b.ctx, "q"); !errors.Is(err, job.ErrNotFound) {
		b.t.Fatalf("defaults of an unknown queue: %v, want not found", err)
	}
	b.add(newJob("q"))
	want := func(what string) {
		b.t.Helper()
		d, err := b.s.QueueDefaults(b.ctx, "q")
		if err != nil {
			b.t.Fatalf("defaults %s: %v", what, err)
		}
		q := b.queue("q")
		if d.Durability != q.Durability || d.Settings != q.Settings {
			b.t.Fatalf("defaults %s: %+v, want those of the queue %+v", what, d, q)
		}
	}
	want("of a new queue")
	if d, _ := b.s.QueueDefaults(b.ctx, "q"); d.Durability != job.DurabilityFull || d.Settings != (job.QueueSettings{}) {
		b.t.Fatalf("defaults of a new queue: %+v, want full and no settings", d)
	}
	for _, d := range b.h.durabilities() {
		if err := b.s.QueueSetDurability(b.ctx, "q", d); err != nil {
			b.t.Fatalf("set durability %s: %v", d, err)
		}
		want("after setting " + string(d))
	}
	settings := job.QueueSettings{DefaultLease: 7 * time.Second, DefaultMaxAttempts: 3, DefaultDelay: time.Minute,
		MaxWait: time.Hour}
	if err := b.s.QueueSetSettings(b.ctx, "q", settings); err != nil {
		b.t.Fatalf("set settings: %v", err)
	}
	want("after setting settings")
	if d, _ := b.s.QueueDefaults(b.ctx, "q"); d.Settings != settings {
		b.t.Fatalf("settings %+v, want %+v", d.Settings, settings)
	}
	if err := b.s.QueueSetSettings(b.ctx, "q", job.QueueSettings{}); err != nil {
		b.t.Fatalf("clear settings: %v", err)
	}
	want("after clearing settings")
	if err := b.s.QueueSetDurability(b.ctx, "fresh", b.h.durabilities()[len(b.h.durabilities())-1]); err != nil {
		b.t.Fatalf("set durability of an unknown queue: %v", err)
	}
	if d, err := b.s.QueueDefaults(b.ctx, "fresh"); err != nil || d.Durability != b.h.durabilities()[len(b.h.durabilities())-1] {
		b.t.Fatalf("defaults of a queue made by a durability change: %+v, %v", d, err)
	}
}

// Pausing creates an unknown queue; pausing and resuming are idempotent
// and leave the jobs alone.
func testQueueSetPaused(b *bundle) {
	paused := func(name string) bool {
		b.t.Helper()
		q, err := b.s.QueueGet(b.ctx, name)
		if err != nil {
			b.t.Fatalf("get queue %s: %v", name, err)
		}
		return q.Paused
	}
	set := func(name string, p bool) {
		b.t.Helper()
		if err := b.s.QueueSetPaused(b.ctx, name, p); err != nil {
			b.t.Fatalf("set %s paused %v: %v", name, p, err)
		}
	}
	set("new", true)
	if !paused("new") {
		b.t.Fatal("a queue created paused is not paused")
	}
	b.wantCounts("new", nil)
	set("resumed", false)
	if paused("resumed") {
		b.t.Fatal("a queue created resumed is paused")
	}
	b.add(newJobs("q", 3)...)
	for _, p := range []bool{true, true, false, false, true} {
		set("q", p)
		if paused("q") != p {
			b.t.Fatalf("queue q paused %v, want %v", !p, p)
		}
		b.wantCounts("q", map[job.State]int64{job.StateAvailable: 3})
	}
	b.add(newJob("q"))
	b.wantCounts("q", map[job.State]int64{job.StateAvailable: 4})
}

// QueuePurge deletes the available jobs of its queue, and only those.
func testQueuePurge(b *bundle) {
	var kept []*job.Job
	for _, st := range job.States {
		if st != job.StateAvailable {
			kept = append(kept, b.jobIn(st, "q"))
		}
	}
	purged := b.add(newJobs("q", 3, withPriority(-1))...)
	other := b.add(newJobs("other", 2)...)
	n, err := b.s.QueuePurge(b.ctx, "q")
	if err != nil || n != 3 {
		b.t.Fatalf("purge: %d, %v; want 3", n, err)
	}
	for _, id := range purged {
		if _, err := b.s.JobGet(b.ctx, id); !errors.Is(err, job.ErrNotFound) {
			b.t.Fatalf("get a purged job: %v, want not found", err)
		}
	}
	for _, j := range kept {
		b.unchanged("purge", j)
	}
	if got := b.claimAt(t0, 10, "q"); len(got) != 0 {
		b.t.Fatalf("purged jobs were handed out: %v", idsOf(got))
	}
	b.wantCounts("q", map[job.State]int64{job.StateScheduled: 1, job.StateActive: 1, job.StateRetrying: 1,
		job.StateCompleted: 1, job.StateDead: 1, job.StateCancelled: 1})
	if n, err := b.s.QueuePurge(b.ctx, "q"); err != nil || n != 0 {
		b.t.Fatalf("purge again: %d, %v; want 0", n, err)
	}
	// Jobs that arrive after a purge are handed out as usual.
	fresh := b.add(newJob("q"))[0]
	if got := b.claimAt(t0, 10, "q", "other"); len(got) != 3 || got[0].ID != other[0] || got[1].ID != other[1] || got[2].ID != fresh {
		b.t.Fatalf("claim after purge: %v, want %v then %s", idsOf(got), other, fresh)
	}
	if res, err := b.s.JobPromoteDue(b.ctx, at(24*time.Hour), 10); err != nil || res.Count != 2 {
		b.t.Fatalf("promote after purge: %+v, %v; want the scheduled and retrying jobs", res, err)
	}
}
