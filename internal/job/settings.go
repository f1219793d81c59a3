package job

import (
	"fmt"
	"time"
)

// QueueSettings are a queue's options besides its durability and its
// flow control (Limits): where its dead jobs go and how long its jobs may
// wait to start. Each field is optional on its own, its zero value
// meaning unset, and the zero QueueSettings set nothing. Stores keep the
// settings of a queue whole and the API replaces them whole, so a setting
// added later is one more field here, with its own zero meaning unset,
// beside the ones before it.
type QueueSettings struct {
	// DeadLetterQueue, when set, names the queue that gets a copy of
	// every job of this queue that dies (see DeadLetterFor and
	// DeadLetter). It is never the queue itself.
	DeadLetterQueue string
	// MaxWait, when set, bounds how long a job of the queue may wait,
	// from its run time, before it first starts: a job not started by
	// then dies with MaxWaitMessage instead (see PastMaxWait).
	MaxWait time.Duration
}

// Bounds of QueueSettings.MaxWait.
const (
	// ShortestMaxWait is the smallest maximum wait; a maximum wait is
	// kept in whole milliseconds.
	ShortestMaxWait = time.Millisecond
	// LongestMaxWait is the largest maximum wait: one year, the bound of
	// delays.
	LongestMaxWait = 365 * 24 * time.Hour
)

// IsZero reports whether s sets nothing.
func (s QueueSettings) IsZero() bool { return s == QueueSettings{} }

// Check refuses settings that queue may not have, with an *InputError
// naming the wire field: a dead-letter queue that is not a queue name or
// is queue itself ("dead_letter_queue"), a maximum wait out of its bounds
// or not in whole milliseconds ("max_wait_ms").
func (s QueueSettings) Check(queue string) error {
	if s.DeadLetterQueue != "" {
		if !ValidName(s.DeadLetterQueue) {
			return Invalid("dead_letter_queue", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", MaxNameLength)
		}
		if s.DeadLetterQueue == queue {
			return Invalid("dead_letter_queue", "must name another queue than %s itself", queue)
		}
	}
	if s.MaxWait != 0 && (s.MaxWait < ShortestMaxWait || s.MaxWait > LongestMaxWait || s.MaxWait%time.Millisecond != 0) {
		return Invalid("max_wait_ms", "must be between %d and %d", ShortestMaxWait.Milliseconds(), LongestMaxWait.Milliseconds())
	}
	return nil
}

// String describes s for logs.
func (s QueueSettings) String() string {
	return fmt.Sprintf("dead-letter queue %q, max wait %v", s.DeadLetterQueue, s.MaxWait)
}

// DeadLetterFor is the queue that gets a copy of a job of a queue with
// settings s that moves to state: the dead-letter queue when the job dies
// and one is set, else "". A store asks it for every job that a rule
// (AfterFailure, AfterLeaseExpiry, AfterMaxWait) sends to dead; a cancel
// or a delete never asks, so neither leaves a copy.
func (s QueueSettings) DeadLetterFor(state State) string {
	if state != StateDead {
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
