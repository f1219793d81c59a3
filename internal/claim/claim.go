// Package claim decides what a claim of a queue with flow control hands
// out: how many jobs the queue's cap and rate let start, which groups take
// a turn of the round-robin, what each group's cap, rate and, in an
// ordered queue, holder let out, which jobs are past their maximum wait
// and die instead, where the round-robin goes on next time, the starts the
// rates record, and what held the rest back.
//
// It is pure: a store offers the candidates through a Source over its own
// structures (an index walk, a window in memory), writes the Decision
// inside its claim, and tells Settle which of the jobs it leased. Every
// store follows the same rules because no store holds one.
package claim

import (
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Queue is what a plan knows of the queue it claims from, as the store
// holds it when the claim starts.
type Queue struct {
	// Limits are the queue's flow control, normalised (job.Limits.Normalized).
	Limits job.Limits
	// MaxWait is the queue's maximum wait (job.PastMaxWait); 0 for none.
	MaxWait time.Duration
	// Active is how many of the queue's jobs are active; a store may
	// count them only up to Limits.MaxActive.
	Active int
	// Starts is the queue's rate log (Limits.Rate).
	Starts job.StartLog
}

// Request is one claim.
type Request struct {
	// Now is the claim's moment, by which rates and waits are told.
	Now time.Time
	// Want is how many jobs the claim asks for.
	Want int
	// Group, when set, is the one group the claim takes jobs of; it
	// leaves the round-robin's cursor where it was.
	Group string
	// Runs lets a free group of an ordered queue give the claim a run:
	// several of its jobs in claim order instead of one (see admit).
	Runs bool
	// MaxGroups, when positive, bounds how many groups give the claim
	// jobs.
	MaxGroups int
}

// Group is a group of the queue with available jobs, as a Source offers
// it. A queue whose jobs have no groups is offered as one group.
type Group struct {
	Name string
	// Ref is the source's own handle of the group, which the plan gives
	// back to Heads.
	Ref int
	// Active is how many of the group's jobs are active; a store may
	// count them only up to Limits.GroupMaxActive.
	Active int
	// Starts is the group's rate log (Limits.GroupRate).
	Starts job.StartLog
	// Holder is, in an ordered queue, the state of the job that holds
	// the group while it does not run (job.HoldsGroup): "" when none
	// does, or when the group has an active job (which Active counts).
	// A holder that waits (retrying, scheduled) keeps the group shut; an
	// available one is the group's only job to go out, Held.
	Holder job.State
	Held   Head
	// OneHolder is set when Held is the group's only job that holds it:
	// a claim of runs may then take the jobs enqueued after it with it.
	OneHolder bool
	// Heads are the group's first available jobs in claim order, when
	// the store read them with the group; the plan asks the Source for
	// those after them. Dry is set when Heads are all it has.
	Heads []Head
	Dry   bool
	// Stalled is set when the store cannot serve the group now (it holds
	// as many groups as it may): the group counts as capped.
	Stalled bool
}

// Head is an available job as a plan sees it: what claim order and the
// maximum wait need.
type Head struct {
	Seq     int64
	Attempt int
	RunAt   time.Time
	// Ref is the source's own handle of the job, which the decision's
	// picks carry back to it.
	Ref int
}

// Source is how a store offers a plan its candidates. A plan calls it
// only from the goroutine that runs it, inside the store's claim.
type Source interface {
	// Groups returns at least need more groups with available jobs in
	// turn order, going on from those it returned before, and up to more
	// beyond them that it has at hand without another read; fewer than
	// need only when the turn order has gone round once. A claim of one
	// group (Request.Group) is offered that group alone, when it has
	// available jobs.
	Groups(need, more int) ([]Group, error)
	// Heads returns, for each i, up to n[i] more of the available jobs
	// of the group whose Ref is refs[i], in claim order, after those
	// returned before for it (with the group, or by an earlier call).
	// Fewer than n[i] means the group has no more.
	Heads(refs []int, n []int) ([][]Head, error)
}

// Pick is a job a decision names, with its group.
type Pick struct {
	Group string
	Head
	admitted int // the group's index in Decision.groups
}

// Decision is what a claim does: lease Take, in that order, and kill Kill
// as past their maximum wait (job.AfterMaxWait). Settle then says what the
// claim records.
type Decision struct {
	Take []Pick
	Kill []Pick

	q      Queue
	req    Request
	room   int // what the queue's cap and rate left
	capped bool
	// retryAt is the first moment a rate that held jobs back lets one
	// start again.
	retryAt time.Time
	groups  []*group // the groups admitted, in turn order
	spare   []group  // places for the groups the plan looks at next
	// visited is how many groups the plan looked at, last the last of
	// them; stopped is set when it looked at MaxGroupVisits, exhausted
	// when it went round the whole turn order.
	visited int
	last    string
	// pending are the groups the source offered that the plan has not
	// looked at yet.
	pending   []Group
	stopped   bool
	exhausted bool
}

// Outcome is what a claim records once it has leased its jobs.
type Outcome struct {
	// Starts is the queue's new rate log; StartsChanged says whether it
	// changed.
	Starts        job.StartLog
	StartsChanged bool
	// GroupStarts are the new rate logs of the groups that started jobs,
	// under a group rate.
	GroupStarts []GroupStarts
	// Cursor is the group after which the next round-robin claim starts;
	// CursorMoved says whether it moved.
	Cursor      string
	CursorMoved bool
	// Capped is set when an active cap (the queue's or a group's, or an
	// ordered group's holder) held available jobs back; RetryAt, when a
	// rate did, is the first moment one lets a job start.
	Capped  bool
	RetryAt time.Time
}

// GroupStarts is a group's rate log.
type GroupStarts struct {
	Group  string
	Starts job.StartLog
}

// Bounds of one plan.
const (
	// MaxGroupVisits bounds how many groups one plan looks at for groups
	// with room: with groups at their caps or rates by the thousand, a
	// claim hands out what the first ones let out, and the next one goes
	// on from there.
	MaxGroupVisits = 4096
	// MaxKills bounds how many jobs past their wait one plan kills; the
	// store's sweep kills those it leaves.
	MaxKills = 1024
	// groupSlack is how many groups a plan asks for beyond those it
	// needs, in case some of them have no room.
	groupSlack = 8
)

// earliest is the earlier of two moments, the zero time counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
