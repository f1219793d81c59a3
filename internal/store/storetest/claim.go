package storetest

import (
	"slices"
	"sort"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func claimTests() []group {
	return []group{{"JobClaim", []test{
		{"OrderIsPriorityThenRunAtThenEnqueueAcrossQueues", testClaimOrder},
		{"LeasesWithTheJobsOwnDuration", testClaimLease},
		{"LeaseDurationOverridesTheJobs", testClaimLeaseOverride},
		{"SkipsPausedQueues", testClaimPaused},
		{"TakesOnlyAvailableJobs", testClaimOnlyAvailable},
		{"EmptyResultIsNotAnError", testClaimEmpty},
	}}}
}

// Claims hand out the available jobs of the listed queues in one order
// across all of them: higher priority first, then earlier RunAt, then
// enqueue order; jobs of queues not listed stay.
func testClaimOrder(b *bundle) {
	type key struct {
		prio  int
		runAt time.Time
		n     int
	}
	var want []string
	keys := make(map[string]key)
	n := 0
	queues := []string{"a", "b", "c"}
	for batch := 0; batch < 6; batch++ {
		var ps []store.JobInsertParams
		for i := 0; i < 5; i++ {
			p := newJob(queues[(batch+i)%3], withPriority((batch*7+i*3)%4-1), withRunAt(at(-time.Duration((batch+i*5)%3)*time.Second)))
			keys[p.ID] = key{p.Priority, p.RunAt, n}
			n++
			want = append(want, p.ID)
			ps = append(ps, p)
		}
		b.add(ps...)
	}
	b.add(newJob("unlisted", withPriority(topPriority)))
	sort.SliceStable(want, func(i, k int) bool {
		a, c := keys[want[i]], keys[want[k]]
		if a.prio != c.prio {
			return a.prio > c.prio
		}
		if !a.runAt.Equal(c.runAt) {
			return a.runAt.Before(c.runAt)
		}
		return a.n < c.n
	})
	var got []string
	for round := 0; ; round++ {
		js := b.claimAt(t0, 4, "c", "a", "b", "a")
		if len(js) == 0 {
			break
		}
		if len(js) > 4 {
			b.t.Fatalf("claim of at most 4 gave %d jobs", len(js))
		}
		got = append(got, idsOf(js)...)
		if round > len(want) {
			b.t.Fatal("claims never ran dry")
		}
	}
	if !slices.Equal(got, want) {
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				b.t.Fatalf("claim %d of %d is %+v, want %+v", i, len(want), keys[got[i]], keys[want[i]])
			}
		}
		b.t.Fatalf("claimed %d jobs, want %d", len(got), len(want))
	}
	b.wantCounts("unlisted", map[job.State]int64{job.StateAvailable: 1})
}

// A claimed job comes back active, with Attempt one higher, a higher
// LeaseToken, StartedAt now and the lease ending now plus the job's
// LeaseDuration; it is stored as returned, everything else unchanged.
func testClaimLease(b *bundle) {
	ids := b.add(newJob("q", withLease(45*time.Second)), newJob("q", withLease(time.Hour)))
	before := []*job.Job{b.get(ids[0]), b.get(ids[1])}
	now := at(3 * time.Second)
	js := b.claimAt(now, 5, "q")
	if len(js) != 2 {
		b.t.Fatalf("claimed %d jobs, want 2", len(js))
	}
	for i, j := range js {
		if j.LeaseToken <= before[i].LeaseToken {
			b.t.Fatalf("claimed job %d: token %d, want above %d", i, j.LeaseToken, before[i].LeaseToken)
		}
		want := *before[i]
		want.State, want.Attempt, want.LeaseToken = job.StateActive, 1, j.LeaseToken
		want.StartedAt, want.LeaseExpiresAt = now, now.Add(want.LeaseDuration)
		if d := diffJob(j, &want); d != "" {
			b.t.Fatalf("claimed job %d: %s", i, d)
		}
		if d := diffJob(b.get(j.ID), &want); d != "" {
			b.t.Fatalf("stored job %d after claim: %s", i, d)
		}
	}
	b.wantCounts("q", map[job.State]int64{job.StateActive: 2})
}

// A claim's LeaseDuration replaces each job's own for that hand-out only.
func testClaimLeaseOverride(b *bundle) {
	b.add(newJobs("q", 2, withLease(time.Hour))...)
	js, err := store.ClaimedJobs(b.s.JobClaim(b.ctx, &store.JobClaimParams{Queues: []string{"q"}, Max: 2, LeaseDuration: 7 * time.Second, Now: t0}))
	if err != nil || len(js) != 2 {
		b.t.Fatalf("claim with a lease: %d jobs, %v", len(js), err)
	}
	for _, j := range js {
		if !j.LeaseExpiresAt.Equal(at(7*time.Second)) || j.LeaseDuration != time.Hour {
			b.t.Fatalf("claimed job lease ends %v (own lease %v), want %v (own lease kept)", j.LeaseExpiresAt, j.LeaseDuration, at(7*time.Second))
		}
		if got := b.get(j.ID); !got.LeaseExpiresAt.Equal(at(7*time.Second)) || got.LeaseDuration != time.Hour {
			b.t.Fatalf("stored job lease ends %v (own lease %v)", got.LeaseExpiresAt, got.LeaseDuration)
		}
	}
}

// A paused queue keeps its jobs and accepts new ones, but claims pass it
// by until it is resumed.
func testClaimPaused(b *bundle) {
	a := b.add(newJobs("a", 2, withPriority(5))...)
	bb := b.add(newJobs("b", 2)...)
	if err := b.s.QueueSetPaused(b.ctx, "a", true); err != nil {
		b.t.Fatalf("pause: %v", err)
	}
	a = append(a, b.add(newJob("a", withPriority(5)))...)
	if got := b.claimAt(t0, 10, "a", "b"); !slices.Equal(idsOf(got), bb) {
		b.t.Fatalf("claim with a paused: %v, want only b's %v", idsOf(got), bb)
	}
	if got := b.claimAt(t0, 10, "a"); len(got) != 0 {
		b.t.Fatalf("paused queue handed out %v", idsOf(got))
	}
	b.wantCounts("a", map[job.State]int64{job.StateAvailable: 3})
	if err := b.s.QueueSetPaused(b.ctx, "a", false); err != nil {
		b.t.Fatalf("resume: %v", err)
	}
	if got := b.claimAt(t0, 10, "a", "b"); !slices.Equal(idsOf(got), a) {
		b.t.Fatalf("claim after resume: %v, want %v", idsOf(got), a)
	}
}

// Only available jobs are handed out: a scheduled job whose RunAt has
// passed waits for promotion, and jobs in every other state stay put.
func testClaimOnlyAvailable(b *bundle) {
	for _, st := range job.States {
		if st != job.StateAvailable {
			b.jobIn(st, "q")
		}
	}
	b.add(newJob("q", scheduledAt(at(-time.Hour))))
	before := b.counts("q")
	if got := b.claimAt(at(24*time.Hour), 100, "q"); len(got) != 0 {
		b.t.Fatalf("claimed %d jobs from a queue with none available: %+v", len(got), got[0])
	}
	b.wantCounts("q", before)
	want := b.add(newJob("q"))[0]
	if got := b.claimAt(at(24*time.Hour), 100, "q"); len(got) != 1 || got[0].ID != want {
		b.t.Fatalf("claimed %v, want only the available %s", idsOf(got), want)
	}
}

// Nothing to hand out is an empty result, not an error, for empty and
// unknown queues alike; a claim takes what there is when asked for more.
func testClaimEmpty(b *bundle) {
	if got := b.claimAt(t0, 10, "nosuch"); len(got) != 0 {
		b.t.Fatalf("unknown queue gave %d jobs", len(got))
	}
	ids := b.add(newJobs("q", 3)...)
	if got := b.claimAt(t0, 10, "q", "nosuch", "q"); !slices.Equal(idsOf(got), ids) {
		b.t.Fatalf("claim of 10 from 3: %v, want %v", idsOf(got), ids)
	}
	if got := b.claimAt(t0, 10, "q"); len(got) != 0 {
		b.t.Fatalf("drained queue gave %d jobs", len(got))
	}
	b.wantCounts("q", map[job.State]int64{job.StateActive: 3})
}
