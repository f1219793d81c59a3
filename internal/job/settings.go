package job

import (
	"fmt"
	"time"
)

// QueueSettings are a queue's options besides its durability and its
// flow control (Limits): where its dead jobs go, how long its jobs may
// wait to start, and the lease, attempts and delay of the jobs enqueued
// without their own. Each field is optional on its own, its zero value
// meaning unset, and the zero QueueSettings set nothing. Stores keep the
// settings of a queue whole and the API replaces them whole, so a setting
// added later is one more field here, with its own zero meaning unset,
// beside the ones before it. Its JSON form, with a name for each field
// and durations in nanoseconds, is how the embedded store keeps it: a
// name changed would lose what rows hold.
type QueueSettings struct {
	// DeadLetterQueue, when set, names the queue that gets a copy of
	// every job of this queue that dies, unless the job is a copy itself
	// (see DeadLetterFor and DeadLetter). It is never the queue itself.
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
	// MaxWait, when set, bounds how long a job of the queue may wait,
	// from its run time, before it first starts: a job not started by
	// then dies with MaxWaitMessage instead (see PastMaxWait).
	MaxWait time.Duration `json:"max_wait_ns,omitempty"`
	// DefaultLease, when set, is the lease duration of the jobs enqueued
	// into the queue without one of their own, in place of the engine's
	// default. It is within MinLease..MaxLease, in whole milliseconds.
	DefaultLease time.Duration `json:"default_lease_ns,omitempty"`
	// DefaultMaxAttempts, when set, is the maximum attempts of the jobs
	// enqueued into the queue without their own, in place of the engine's
	// default. It is within 1..MaxAttempts.
	DefaultMaxAttempts int `json:"default_max_attempts,omitempty"`
	// DefaultDelay, when set, makes the jobs enqueued into the queue
	// without a delay or run time of their own scheduled, to become
	// available this long after their enqueue. It is within 1 ms..MaxDelay,
	// in whole milliseconds.
	//
	// The defaults apply when a job is enqueued and are kept on the job:
	// changing them later leaves the jobs already enqueued as they are,
	// and jobs a store makes from existing ones (dead-letter copies,
	// consumer groups' copies) keep their job's values.
	DefaultDelay time.Duration `json:"default_delay_ns,omitempty"`
}

// Bounds of QueueSettings.MaxWait.
const (
	// ShortestMaxWait is the smallest maximum wait; a maximum wait is
	// kept in whole milliseconds.
	ShortestMaxWait = time.Millisecond
	// LongestMaxWait is the largest maximum wait: one year, the bound of
	// delays.
	LongestMaxWait = MaxDelay
)

// ShortestDefaultDelay is the smallest default delay; a default delay,
// like a default lease, is kept in whole milliseconds.
const ShortestDefaultDelay = time.Millisecond

// IsZero reports whether s sets nothing.
func (s QueueSettings) IsZero() bool { return s == QueueSettings{} }

// Check refuses settings that queue may not have, with an *InputError
// naming the wire field: a dead-letter queue that is not a queue name or
// is queue itself ("dead_letter_queue"), a maximum wait out of its bounds
// or not in whole milliseconds ("max_wait_ms"), a default lease out of
// MinLease..MaxLease or not in whole milliseconds ("default_lease_ms"),
// default maximum attempts out of 1..MaxAttempts
// ("default_max_attempts"), a default delay out of
// ShortestDefaultDelay..MaxDelay or not in whole milliseconds
// ("default_delay_ms"). Zero fields are unset and always pass.
func (s QueueSettings) Check(queue string) error {
	if s.DeadLetterQueue != "" {
		if !ValidName(s.DeadLetterQueue) {
			return Invalid("dead_letter_queue", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", MaxNameLength)
		}
		if s.DeadLetterQueue == queue {
			return Invalid("dead_letter_queue", "must name another queue than %s itself", queue)
		}
	}
	if s.MaxWait != 0 && !wholeMillis(s.MaxWait, ShortestMaxWait, LongestMaxWait) {
		return Invalid("max_wait_ms", "must be between %d and %d", ShortestMaxWait.Milliseconds(), LongestMaxWait.Milliseconds())
	}
	if s.DefaultLease != 0 && !wholeMillis(s.DefaultLease, MinLease, MaxLease) {
		return Invalid("default_lease_ms", "must be between %d and %d", MinLease.Milliseconds(), MaxLease.Milliseconds())
	}
	if s.DefaultMaxAttempts != 0 && (s.DefaultMaxAttempts < 1 || s.DefaultMaxAttempts > MaxAttempts) {
		return Invalid("default_max_attempts", "must be between 1 and %d", MaxAttempts)
	}
	if s.DefaultDelay != 0 && !wholeMillis(s.DefaultDelay, ShortestDefaultDelay, MaxDelay) {
		return Invalid("default_delay_ms", "must be between %d and %d", ShortestDefaultDelay.Milliseconds(), MaxDelay.Milliseconds())
	}
	return nil
}

// wholeMillis reports whether d lies within lo..hi and is a whole number
// of milliseconds, as a duration kept in milliseconds on the wire must.
func wholeMillis(d, lo, hi time.Duration) bool {
	return d >= lo && d <= hi && d%time.Millisecond == 0
}

// String describes s for logs.
func (s QueueSettings) String() string {
	return fmt.Sprintf("dead-letter queue %q, max wait %v, default lease %v, default max attempts %d, default delay %v",
		s.DeadLetterQueue, s.MaxWait, s.DefaultLease, s.DefaultMaxAttempts, s.DefaultDelay)
}

// DeadLetterFor is the queue that gets a copy of a job of a queue with
// settings s that moves to state, letter telling whether the job is
// itself a dead-letter copy (its DeadLetterOf is set): the dead-letter
// queue when the job dies, one is set and the job is not a copy; else
// "". A copy is where a death ends: one that dies stays dead in its
// queue and is copied no more, so each death of a job makes at most one
// copy, and queues that name each other as dead-letter queues, in a ring
// of any size, cannot pass a job around for ever, whatever each node
// believed of their settings when it wrote a death. A store asks it for
// every job that a rule (AfterFailure, AfterLeaseExpiry, AfterMaxWait)
// sends to dead; a cancel or a delete never asks, so neither leaves a
// copy.
func (s QueueSettings) DeadLetterFor(state State, letter bool) string {
	if state != StateDead || letter {
		return ""
	}
	return s.DeadLetterQueue
}

// JobRef names a job: its queue and its id.
type JobRef struct {
	Queue string
	ID    string
}

// IsZero reports whether r names no job.
func (r JobRef) IsZero() bool { return r == JobRef{} }
