package job

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The job rules: what an enqueue of a known id or unique key, an
// acknowledged, failed, expired or released attempt lead to, which jobs can
// be retried by hand and which finished jobs retention deletes. They are
// pure functions of the job and the moment, called by every store, so that
// a store decides how to write a transition and never which transition to
// write: a rule changes in one place for every store.

// DuplicateByID decides an enqueue into queue (field names its id in the
// request, as in "jobs[3].id") whose id belongs to existing: it is a
// duplicate of existing when existing is in the same queue, and an
// *IDTakenError otherwise.
func DuplicateByID(existing *Job, queue, field string) error {
	if existing.Queue == queue {
		return nil
	}
	return &IDTakenError{Field: field}
}

// UniqueConflict reports whether a new job with unique window uniqueFor
// duplicates newest, the newest job of its queue with its unique key:
// while newest is pending when the window is zero, else when newest was
// created within the window and is not cancelled.
func UniqueConflict(newest *Job, uniqueFor time.Duration, now time.Time) bool {
	if uniqueFor == 0 {
		return newest.State.Pending()
	}
	return newest.CreatedAt.After(now.Add(-uniqueFor)) && newest.State != StateCancelled
}

// MaxErrorBytes bounds the message of one failed attempt.
const MaxErrorBytes = 64 << 10

// ErrorMessage is how a failed attempt's message is kept: cut to at most
// MaxErrorBytes without splitting a UTF-8 character, with NUL and invalid
// UTF-8 replaced by U+FFFD, so that every store keeps the same text (some
// databases cannot hold a NUL in text).
func ErrorMessage(message string) string {
	if !utf8.ValidString(message) {
		message = strings.ToValidUTF8(message, "\uFFFD")
	}
	if strings.IndexByte(message, 0) >= 0 {
		message = strings.ReplaceAll(message, "\x00", "\uFFFD")
	}
	if len(message) <= MaxErrorBytes {
		return message
	}
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(message[cut]) {
		cut--
	}
	return message[:cut]
}

// Bounds of a job's error history (see BoundErrors).
const (
	// LatestErrors is how many of its latest errors a job keeps besides
	// its first.
	LatestErrors = 20
	// MaxErrorHistoryBytes bounds the messages of the errors a job keeps,
	// taken together. It holds two messages of MaxErrorBytes, so that the
	// first and the latest error always stay.
	MaxErrorHistoryBytes = 256 << 10
)

// AppendError is the error history of a job after it records e: errs
// (oldest first, with dropped errors dropped from it before) with e
// appended, its message kept as ErrorMessage keeps it, then held to its
// bounds by BoundErrors. It returns the new history and the new count of
// dropped errors, and leaves errs as it was. Every store records every
// attempt error (a failure, an expired lease, a maximum wait passed)
// through it.
func AppendError(errs []AttemptError, dropped int, e AttemptError) ([]AttemptError, int) {
	e.Message = ErrorMessage(e.Message)
	out := make([]AttemptError, 0, len(errs)+1)
	return BoundErrors(append(append(out, errs...), e), dropped)
}

// BoundErrors holds the error history errs, of which dropped errors were
// dropped before, to its bounds: it keeps the first error, which tells
// how the trouble began, and the latest ones, as many as LatestErrors and
// as fit with the first within MaxErrorHistoryBytes of messages, and
// drops those between, adding them to dropped. So a history never holds
// more than LatestErrors+1 errors or MaxErrorHistoryBytes of messages,
// however often the job fails, is retried by hand or is copied. It may
// reuse errs' array.
func BoundErrors(errs []AttemptError, dropped int) ([]AttemptError, int) {
	n := len(errs)
	if n <= 2 {
		return errs, dropped
	}
	size := len(errs[0].Message) + len(errs[n-1].Message)
	latest := 1
	for latest < LatestErrors && latest < n-1 {
		next := len(errs[n-1-latest].Message)
		if size+next > MaxErrorHistoryBytes {
			break
		}
		size += next
		latest++
	}
	drop := n - 1 - latest
	if drop == 0 {
		return errs, dropped
	}
	copy(errs[1:], errs[n-latest:])
	return errs[:1+latest], dropped + drop
}

// LeaseExpiredMessage is the error recorded for an attempt whose lease ran
// out before its worker acknowledged or failed it, so that the job's errors
// tell a lost worker from a failing handler.
const LeaseExpiredMessage = "lease expired"

// Failure is what the rules need to know of a failed attempt: the job's
// own state and what the worker asked for.
type Failure struct {
	// CancelRequested is true when a user cancelled the job while it ran.
	CancelRequested bool
	// Attempt is the number of the attempt that failed (1-based) and
	// MaxAttempts the number the job may have.
	Attempt, MaxAttempts int
	// NoRetry is the worker's word that another attempt cannot succeed.
	NoRetry bool
	// RetryAfter is the worker's delay before the next attempt; zero leaves
	// the delay to Backoff.
	RetryAfter time.Duration
	// Backoff is the job's retry policy.
	Backoff Backoff
}

// AfterFailure decides where a job goes after the failed attempt f at now:
// cancelled when a cancel was requested (that takes precedence, since the
// user no longer wants the job run); else dead when the worker said not to
// retry or the attempts are used up; else retrying, to run again at
// now + RetryAfter, or after the backoff delay of the attempt when
// RetryAfter is zero (rnd decides its jitter, nil means none). runAt is set
// for retrying only.
func AfterFailure(f *Failure, now time.Time, rnd func() float64) (state State, runAt time.Time) {
	switch {
	case f.CancelRequested:
		return StateCancelled, time.Time{}
	case f.NoRetry || exhausted(f.Attempt, f.MaxAttempts):
		return StateDead, time.Time{}
	}
	delay := f.RetryAfter
	if delay <= 0 {
		delay = f.Backoff.Delay(f.Attempt, rnd)
	}
	return StateRetrying, now.Add(delay)
}

// AfterLeaseExpiry decides where a job goes when the lease of its attempt
// number attempt (of maxAttempts) runs out: cancelled when a cancel was
// requested, dead when that was its last attempt, else available at once
// with its run time unchanged, since a lost worker says nothing about the
// job (no backoff). The store records LeaseExpiredMessage as the attempt's
// error.
func AfterLeaseExpiry(cancelRequested bool, attempt, maxAttempts int) State {
	switch {
	case cancelRequested:
		return StateCancelled
	case exhausted(attempt, maxAttempts):
		return StateDead
	}
	return StateAvailable
}

// MaxWaitMessage is the error recorded for a job that died because it
// did not start within its queue's maximum wait (see PastMaxWait), so
// that its errors tell a job nobody ran from one that failed.
const MaxWaitMessage = "not started within max wait"

// WaitDeadline is the moment from which a job with attempt hand-outs so
// far, due at runAt, in a queue whose maximum wait is maxWait, may no
// longer start: runAt+maxWait for a job never started (attempt 0), the
// zero time for a started one or a queue without a maximum wait. A job
// handed back unrun (AfterRelease) or retried by hand counts as never
// started again.
func WaitDeadline(attempt int, runAt time.Time, maxWait time.Duration) time.Time {
	if attempt > 0 || maxWait <= 0 {
		return time.Time{}
	}
	return runAt.Add(maxWait)
}

// PastMaxWait reports whether such a job (see WaitDeadline) may no
// longer start at now: a claim that meets it must not hand it out but
// send it where AfterMaxWait decides.
func PastMaxWait(attempt int, runAt time.Time, maxWait time.Duration, now time.Time) bool {
	deadline := WaitDeadline(attempt, runAt, maxWait)
	return !deadline.IsZero() && !now.Before(deadline)
}

// AfterMaxWait decides where a job past its maximum wait at now goes,
// with attempt hand-outs so far: dead, with MaxWaitMessage recorded
// against the attempt that never started (attempt+1); its attempt count
// stays, since nothing ran. Like any death it leaves a copy in the
// queue's dead-letter queue, if set (QueueSettings.DeadLetterFor).
func AfterMaxWait(attempt int, now time.Time) (State, AttemptError) {
	return StateDead, AttemptError{Attempt: attempt + 1, Message: MaxWaitMessage, At: now}
}

// DeadLetter is the job that the death of dead sends to its queue's
// dead-letter queue, dlq (as QueueSettings.DeadLetterFor names it), at
// now, under the new id: a fresh job, available at once with no attempts,
// that carries the dead job's work and history — kind, payload, priority,
// group, tags, durability, retry policy (attempts and backoff), lease
// duration, errors (held to their bounds, see BoundErrors) and
// traceparent — and names it in DeadLetterOf, which makes it a copy that
// is copied no more. No worker holds it yet (Worker is empty). It keeps
// no unique key, which belongs to the dead job's queue, and no result,
// progress or lease. The durability it keeps means it stays in the dead
// job's tier in a store with tiers. A store inserts it in the transaction
// that makes dead dead.
func DeadLetter(dead *Job, dlq, id string, now time.Time) *Job {
	errs, dropped := BoundErrors(slices.Clone(dead.Errors), dead.ErrorsDropped)
	return &Job{
		ID: id, Queue: dlq, Kind: dead.Kind, Payload: dead.Payload, Priority: dead.Priority,
		State: StateAvailable, RunAt: now, MaxAttempts: dead.MaxAttempts, Backoff: dead.Backoff,
		LeaseDuration: dead.LeaseDuration, Tags: slices.Clone(dead.Tags), Group: dead.Group,
		Durability: dead.Durability, Errors: errs, ErrorsDropped: dropped, CreatedAt: now,
		DeadLetterOf: JobRef{Queue: dead.Queue, ID: dead.ID}, TraceParent: dead.TraceParent,
	}
}

// AfterCompletion decides where an acknowledged job goes: cancelled when a
// cancel was requested while it ran, so that a cancel is never lost, else
// completed.
func AfterCompletion(cancelRequested bool) State {
	if cancelRequested {
		return StateCancelled
	}
	return StateCompleted
}

// AfterRelease decides where a job handed back unrun goes, and its attempt
// count: cancelled when a cancel was requested, else available at once;
// either way the hand-out does not count, so the count goes back to
// attempt-1 (never below zero) and no error is recorded.
func AfterRelease(cancelRequested bool, attempt int) (State, int) {
	state := StateAvailable
	if cancelRequested {
		state = StateCancelled
	}
	return state, max(attempt-1, 0)
}

// exhausted reports whether attempt was the last of maxAttempts.
func exhausted(attempt, maxAttempts int) bool { return attempt >= maxAttempts }

// Retryable reports whether a job in state s can be retried by hand (made
// available now with its attempts reset): a dead, cancelled, retrying or
// scheduled job. An available or active job is already on its way and a
// completed one has done its work.
func (s State) Retryable() bool {
	return s == StateDead || s == StateCancelled || s == StateRetrying || s == StateScheduled
}

// PrunePass is one pass of a retention sweep: it deletes the oldest jobs
// that finished in one of States, either those that finished before Before
// (a pass by age) or, when Before is zero, all but the newest Keep (a pass
// by count).
type PrunePass struct {
	// States are the final states the pass covers, one or two of them.
	States []State
	// Before is the finishing time a pass by age deletes before; zero for
	// a pass by count.
	Before time.Time
	// Keep is how many of the newest jobs a pass by count keeps.
	Keep int
}

// ByAge reports whether p deletes by finishing time rather than by count.
func (p *PrunePass) ByAge() bool { return !p.Before.IsZero() }

// Quota is how many jobs p may delete out of budget, the deletions left to
// the sweep: the whole budget for a pass by age (it deletes what it finds,
// up to that), and for a pass by count the excess of have (the jobs now in
// p.States) over Keep, within the budget. It is never negative.
func (p *PrunePass) Quota(have int64, budget int) int {
	n := int64(budget)
	if !p.ByAge() {
		n = min(have-int64(p.Keep), n)
	}
	return int(max(n, 0))
}

// Prune runs passes in order against one budget of limit deletions and
// returns how many jobs they deleted: a pass by count first asks count
// how many jobs its states hold; each pass with a quota (Quota) then has
// del delete up to that many of the oldest jobs of its states, finished
// before its Before (any time, for a pass by count). It stops at the
// first error, returning what the passes before it deleted.
func Prune(passes []PrunePass, limit int, count func(states []State) (int64, error),
	del func(p *PrunePass, n int) (int, error)) (int, error) {
	total := 0
	for i := range passes {
		p := &passes[i]
		var have int64
		if !p.ByAge() {
			var err error
			if have, err = count(p.States); err != nil {
				return total, err
			}
		}
		n := p.Quota(have, limit-total)
		if n == 0 {
			continue
		}
		deleted, err := del(p, n)
		total += deleted
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// PrunePasses is the retention sweep of a policy, in the order a store runs
// it against one budget of deletions: completed and cancelled jobs that
// finished before completedBefore, dead jobs that finished before
// deadBefore, then completed and cancelled jobs beyond the newest
// keepCompleted, and dead jobs beyond the newest keepDead. Age goes first
// so that jobs past their age do not count against the caps. Completed and
// cancelled jobs share one policy; dead jobs, which an operator may still
// want to retry, have their own. A zero time or cap turns its pass off and
// leaves it out.
func PrunePasses(completedBefore, deadBefore time.Time, keepCompleted, keepDead int) []PrunePass {
	passes := make([]PrunePass, 0, 4)
	if !completedBefore.IsZero() {
		passes = append(passes, PrunePass{States: []State{StateCompleted, StateCancelled}, Before: completedBefore})
	}
	if !deadBefore.IsZero() {
		passes = append(passes, PrunePass{States: []State{StateDead}, Before: deadBefore})
	}
	if keepCompleted > 0 {
		passes = append(passes, PrunePass{States: []State{StateCompleted, StateCancelled}, Keep: keepCompleted})
	}
	if keepDead > 0 {
		passes = append(passes, PrunePass{States: []State{StateDead}, Keep: keepDead})
	}
	return passes
}
