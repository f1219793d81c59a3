package storetest

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

func turnTests() []group {
	return []group{{"RoundRobinTurns", []test{
		{"AGroupThatRunsDryInAClaimKeepsItsStarts", testTurnsDryGroupRate},
		{"AGroupIsNotPassedOverWhenOthersRunDry", testTurnsDryGroupsLeave},
		{"EveryGroupTakesItsTurnAfterABulkChange", testTurnsAfterBulkChange},
		{"AGroupWhoseJobsDiedOfTheirWaitKeepsItsTurn", testTurnsAfterKills},
		{"AClaimKillsThroughManyGroupsToTheJobBehind", testTurnsManyGroupsKilled},
	}}}
}

// sortedGroups is the groups of js, sorted.
func sortedGroups(js []*job.Job) []string {
	out := groupsOf(js)
	slices.Sort(out)
	return out
}

// A claim under a group rate in which a group hands out its last job and
// the turns go round again records that group's start: its rate holds
// for the jobs it gets later.
func testTurnsDryGroupRate(b *bundle) {
	b.limit("q", job.Limits{GroupRate: job.Rate{Limit: 2, Period: time.Minute}})
	b.add(grouped("q", "a", 1)...)
	if js := b.claimAt(t0, 1, "q"); len(js) != 1 {
		b.t.Fatalf("first claim: %v", idsOf(js))
	}
	b.add(grouped("q", "x", 1)...)
	b.add(grouped("q", "y", 3)...)
	if got := sortedGroups(b.claimAt(t0, 3, "q")); !slices.Equal(got, []string{"x", "y", "y"}) {
		b.t.Fatalf("claim of 3 from x (1 job) and y (3 jobs): groups %v, want x, y, y", got)
	}
	b.add(grouped("q", "x", 2)...)
	if got := groupsOf(b.claimAt(at(time.Second), 5, "q")); !slices.Equal(got, []string{"x"}) {
		b.t.Fatalf("claim a second later, x having started 1 of its 2 a minute, y 2: groups %v, want x once", got)
	}
}

// A group at its cap and a group whose last job went out of turn (to a
// claim of that group) give nothing, and the next claim goes on to the
// group after them that has a job.
func testTurnsDryGroupsLeave(b *bundle) {
	b.limit("q", job.Limits{GroupMaxActive: 1})
	if js := b.claimAt(t0, 1, "q"); len(js) != 0 {
		b.t.Fatalf("claim of the queue without jobs: %v", idsOf(js))
	}
	b.add(newJob("q", inGroup("a")))
	if js := b.claimAt(t0, 1, "q"); len(js) != 1 || js[0].Group != "a" {
		b.t.Fatalf("first claim: %v, want a's job", groupsOf(js))
	}
	b.add(newJob("q", inGroup("a")))
	next := b.add(grouped("q", "b", 2)...)
	b.add(newJob("q", inGroup("z")))
	first := b.claimAt(t0, 1, "q")
	if !slices.Equal(idsOf(first), next[:1]) {
		b.t.Fatalf("claim with a at its cap: %v, want b's first job %s", idsOf(first), next[0])
	}
	if js := b.claimGroup(t0, 1, "z", "q").Jobs; len(js) != 1 {
		b.t.Fatalf("claim of group z: %v", idsOf(js))
	}
	b.completeAll(t0, first)
	if js := b.claimAt(t0, 1, "q"); !slices.Equal(idsOf(js), next[1:]) {
		b.t.Fatalf("claim with a at its cap and z out of jobs: %v, want b's second job %s", idsOf(js), next[1])
	}
}

// A bulk change of a queue (a delete by state) does not hide its groups
// from the turns: a group that gets jobs after it does not take every
// turn from those that had jobs before.
func testTurnsAfterBulkChange(b *bundle) {
	b.add(grouped("q", "x", 1)...)
	b.add(grouped("q", "y", 1)...)
	b.add(newJob("q", inGroup("s"), scheduledAt(at(time.Hour))))
	if n, err := b.s.JobDeleteMany(b.ctx, &store.JobBulkParams{Queue: "q", State: job.StateScheduled, Now: t0}); err != nil || n != 1 {
		b.t.Fatalf("delete the scheduled jobs: %d, %v", n, err)
	}
	b.add(grouped("q", "big", 3)...)
	if got := sortedGroups(b.claimAt(t0, 3, "q")); !slices.Equal(got, []string{"big", "x", "y"}) {
		b.t.Fatalf("claim of 3 from big (3 jobs), x and y (1 each): groups %v, want one of each", got)
	}
}

// A group whose first job died of its wait in a claim keeps its turn:
// the claim does not give another group a second job while a third has
// had none.
func testTurnsAfterKills(b *bundle) {
	b.settle("q", job.QueueSettings{MaxWait: time.Minute})
	b.add(grouped("q", "a", 2)...)
	stale := b.add(newJob("q", inGroup("b"), withPriority(5), withRunAt(at(-2*time.Minute))))[0]
	b.add(grouped("q", "b", 1)...)
	b.add(grouped("q", "c", 1)...)
	js := b.claimAt(t0, 2, "q")
	if got := sortedGroups(js); len(got) != 2 || got[0] == got[1] {
		b.t.Fatalf("claim of 2 from a (2 jobs), b (one past its wait, then one) and c: groups %v, want two groups", got)
	}
	b.wantExpired(stale, "", t0)
}

// A claim that meets groups whose jobs are all past their wait, more of
// them than it wants jobs, kills the jobs it meets and goes on to the
// job behind them.
func testTurnsManyGroupsKilled(b *bundle) {
	b.settle("q", job.QueueSettings{MaxWait: time.Minute})
	var stale [][]string
	for _, g := range []string{"g1", "g2", "g3", "g4", "g5"} {
		stale = append(stale, b.add(grouped("q", g, 2, withRunAt(at(-2*time.Minute)))...))
	}
	fresh := b.add(newJob("q", inGroup("g6")))[0]
	if js := b.claimAt(t0, 1, "q"); !slices.Equal(idsOf(js), []string{fresh}) {
		b.t.Fatalf("claim of 1 behind 5 groups of jobs past their wait: %v, want %s", idsOf(js), fresh)
	}
	for _, ids := range stale {
		b.wantExpired(ids[0], "", t0) // each group's first job was met
		if st := b.get(ids[1]).State; st != job.StateDead && st != job.StateAvailable {
			b.t.Fatalf("job %s past its wait is %s", ids[1], st)
		}
	}
}
