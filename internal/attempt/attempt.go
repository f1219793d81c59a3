// Package attempt decides what the end of a job's attempt, or of its wait,
// does to the job: an acknowledgement, a failure, a hand-back, an expired
// lease and a wait past the queue's maximum each send it to a state with
// an attempt count, a run time, an error to record and, for a death, a
// dead-letter copy; and it tells which error an item of a batch gets when
// it does not hold its job's lease.
//
// It is pure (standard library and internal/job only): a store reads the
// attempt it holds (a lease in memory, a locked row), asks for the End and
// writes it. Every store follows the same rules because no store holds one.
package attempt

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Held is an attempt under way, as a store holds it: what the rules need
// to know of it and what its outcome reports.
type Held struct {
	Queue string
	// Kind is the job's kind, for the outcome.
	Kind string
	// Attempt is the number of this attempt (1-based), MaxAttempts the
	// number the job may have.
	Attempt, MaxAttempts int
	Backoff              job.Backoff
	CancelRequested      bool
	StartedAt            time.Time
	// Letter is true for a dead-letter copy, which dies without a copy.
	Letter bool
}

// End is where the end of an attempt or a wait sends its job.
type End struct {
	State job.State
	// RunAt is when a retrying job runs again; zero keeps the job's.
	RunAt time.Time
	// Attempt is what the job's attempt count becomes.
	Attempt int
	// Record is true when the end records Error in the job's history
	// (job.AppendError).
	Record bool
	Error  job.AttemptError
	// DeadLetter is the queue that gets a copy of a job that dies, or ""
	// (job.QueueSettings.DeadLetterFor).
	DeadLetter string
	// CutsRun is set for an attempt that did not complete (a failure, a
	// hand-back, an expired lease): see ReturnsRun.
	CutsRun bool
}

// Failure is what a worker says of a failed attempt.
type Failure struct {
	NoRetry    bool
	RetryAfter time.Duration
	Message    string
}

// Complete is the end of h acknowledged: job.AfterCompletion.
func Complete(h *Held) End {
	return End{State: job.AfterCompletion(h.CancelRequested), Attempt: h.Attempt}
}

// Fail is the end of h failed as f says at now, in a queue with settings
// s: job.AfterFailure (rnd giving the jitter), with f's message recorded
// against the attempt, and a copy in the dead-letter queue for a death.
func Fail(h *Held, f *Failure, s job.QueueSettings, now time.Time, rnd func() float64) End {
	state, runAt := job.AfterFailure(&job.Failure{CancelRequested: h.CancelRequested, Attempt: h.Attempt,
		MaxAttempts: h.MaxAttempts, NoRetry: f.NoRetry, RetryAfter: f.RetryAfter, Backoff: h.Backoff}, now, rnd)
	return End{State: state, RunAt: runAt, Attempt: h.Attempt, Record: true,
		Error: job.AttemptError{Attempt: h.Attempt, Message: f.Message, At: now}, DeadLetter: s.DeadLetterFor(state, h.Letter),
		CutsRun: true}
}

// Release is the end of h handed back unrun: job.AfterRelease, which
// takes the attempt back and records nothing.
func Release(h *Held) End {
	state, attempt := job.AfterRelease(h.CancelRequested, h.Attempt)
	return End{State: state, Attempt: attempt, CutsRun: true}
}

// Expire is the end of h whose lease ran out by now, in a queue with
// settings s: job.AfterLeaseExpiry, with job.LeaseExpiredMessage recorded
// against the attempt, and a copy in the dead-letter queue for a death.
func Expire(h *Held, s job.QueueSettings, now time.Time) End {
	state := job.AfterLeaseExpiry(h.CancelRequested, h.Attempt, h.MaxAttempts)
	return End{State: state, Attempt: h.Attempt, Record: true,
		Error:      job.AttemptError{Attempt: h.Attempt, Message: job.LeaseExpiredMessage, At: now},
		DeadLetter: s.DeadLetterFor(state, h.Letter), CutsRun: true}
}

// PastWait is the end of the wait of a job handed out attempt times so
// far, a dead-letter copy when letter, past its queue's maximum wait at
// now (job.PastMaxWait), in a queue with settings s: job.AfterMaxWait.
func PastWait(attempt int, letter bool, s job.QueueSettings, now time.Time) End {
	state, e := job.AfterMaxWait(attempt, now)
	return End{State: state, Attempt: attempt, Record: true, Error: e, DeadLetter: s.DeadLetterFor(state, letter)}
}

// HoldsGroup reports whether the job still holds its group of an ordered
// queue after e (job.HoldsGroup).
func (e *End) HoldsGroup() bool { return job.HoldsGroup(e.State, e.Attempt) }

// ReturnsRun reports whether e, the end of an attempt of a job of group
// (empty: none) of a queue that is ordered or not, sends the rest of the
// job's run back (RunTail): it does when the attempt did not complete (a
// failure, whether the job retries or dies, a hand-back, an expired
// lease), as a Queen partition's lease ends with a failure, so that none
// of the group's later jobs finishes before a job that waits again, and
// a worker that stops its run at a failure leaves nothing leased. Each of
// those goes back as handed back unrun (Release): available, its attempt
// not counted.
func ReturnsRun(ordered bool, group string, e *End) bool {
	return ordered && group != "" && e.CutsRun
}

// RunTail is the rest of the run of the job with seq: of the seqs of its
// group's active jobs, those after it, in enqueue order. A group's active
// jobs are one run (claim.Request.Runs), taken in enqueue order.
func RunTail(seq int64, active []int64) []int64 {
	var out []int64
	for _, s := range active {
		if s > seq {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Available reports whether e makes the job available at once, so that
// its queue's fetches are woken.
func (e *End) Available() bool { return e.State == job.StateAvailable }
