package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// QueueSettings are a queue's settings (docs/protocol.md, "Queue
// settings"): where its dead jobs go, how long its jobs may wait to
// start, and the lease, maximum attempts and delay of the jobs enqueued
// into it without their own. A zero field is unset; the zero
// QueueSettings set nothing. Durations are time.Duration here and
// milliseconds on the wire (max_wait_ms, default_lease_ms,
// default_delay_ms); QueueSettings' JSON methods convert.
type QueueSettings struct {
	// DeadLetterQueue names the queue that gets a copy of every job of
	// this queue that dies (attempts used up, a failure with NoRetry, a
	// lease that ran out on the last attempt, or MaxWait passed; not a
	// cancel or a delete). The dead job stays dead where it is; the copy
	// is a new available job with the dead job's work and Errors, whose
	// Job.DeadLetterOf names the dead job. A copy that dies is copied no
	// more, so queues that name each other cannot pass a job around.
	// Never the queue itself.
	DeadLetterQueue string
	// MaxWait bounds how long a job of the queue may wait unstarted
	// (Attempt 0) after its RunAt: 1 ms to one year, in whole
	// milliseconds (a fraction of a millisecond is rounded up). A job not
	// started by then is never handed out: it dies with the error "not
	// started within max wait", into the dead-letter queue if one is set.
	MaxWait time.Duration
	// DefaultLease is the Lease of the jobs enqueued into the queue
	// without one: 100 ms to 24 h, in whole milliseconds (a fraction of a
	// millisecond is rounded up). Unset, they get the server's 30 s.
	DefaultLease time.Duration
	// DefaultMaxAttempts is the MaxAttempts of the jobs enqueued into the
	// queue without one: 1 to 1000. Unset, they get the server's 25.
	DefaultMaxAttempts int
	// DefaultDelay is the Delay of the jobs enqueued into the queue
	// without Delay or RunAt: 1 ms to one year, in whole milliseconds (a
	// fraction of a millisecond is rounded up). Such a job is scheduled
	// and becomes available this long after its enqueue. Unset, they are
	// available at once.
	//
	// The job defaults apply when a job is enqueued (Enqueue, EnqueueBatch,
	// a transaction or a schedule's tick) and are kept on the job, which
	// shows them as its own: a change holds for the jobs enqueued after it.
	DefaultDelay time.Duration
}

// IsZero reports whether s sets nothing.
func (s QueueSettings) IsZero() bool { return s == QueueSettings{} }

// wireSettings is QueueSettings on the wire.
type wireSettings struct {
	DeadLetterQueue    string `json:"dead_letter_queue,omitempty"`
	MaxWaitMS          int64  `json:"max_wait_ms,omitempty"`
	DefaultLeaseMS     int64  `json:"default_lease_ms,omitempty"`
	DefaultMaxAttempts int    `json:"default_max_attempts,omitempty"`
	DefaultDelayMS     int64  `json:"default_delay_ms,omitempty"`
}

// MarshalJSON encodes s in the protocol's form.
func (s QueueSettings) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireSettings{
		DeadLetterQueue: s.DeadLetterQueue, MaxWaitMS: msec(s.MaxWait),
		DefaultLeaseMS: msec(s.DefaultLease), DefaultMaxAttempts: s.DefaultMaxAttempts, DefaultDelayMS: msec(s.DefaultDelay),
	})
}

// UnmarshalJSON decodes the protocol's form of a queue's settings.
func (s *QueueSettings) UnmarshalJSON(data []byte) error {
	var w wireSettings
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*s = QueueSettings{
		DeadLetterQueue: w.DeadLetterQueue, MaxWait: time.Duration(w.MaxWaitMS) * time.Millisecond,
		DefaultLease: time.Duration(w.DefaultLeaseMS) * time.Millisecond, DefaultMaxAttempts: w.DefaultMaxAttempts,
		DefaultDelay: time.Duration(w.DefaultDelayMS) * time.Millisecond,
	}
	return nil
}

// JobRef names a job by its queue and id.
type JobRef struct {
	Queue string `json:"queue"`
	ID    string `json:"id"`
}

// SetQueueSettings replaces the queue's settings with s, as a whole (PUT
// /v1/queues/{name}/settings), and returns the queue: a zero field of s
// unsets that setting, and zero QueueSettings clear them all. The
// dead-letter queue and the maximum wait apply at once to the jobs
// already in the queue; the job defaults to the jobs enqueued after the
// call. Setting the settings of a queue that holds no jobs creates it. A
// value the queue may not have gives ErrInvalidArgument whose Field names
// it ("dead_letter_queue": not a queue name, or the queue itself;
// "max_wait_ms", "default_lease_ms", "default_max_attempts",
// "default_delay_ms": out of range), and changes nothing.
func (c *Client) SetQueueSettings(ctx context.Context, name string, s QueueSettings) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPut, name, "/settings", s, &q); err != nil {
		return nil, fmt.Errorf("set settings of queue %s: %w", name, err)
	}
	return &q, nil
}

// ClearQueueSettings removes the queue's settings (DELETE
// /v1/queues/{name}/settings) and returns the queue. Clearing the
// settings of a queue that holds no jobs creates it.
func (c *Client) ClearQueueSettings(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodDelete, name, "/settings", nil, &q); err != nil {
		return nil, fmt.Errorf("clear settings of queue %s: %w", name, err)
	}
	return &q, nil
}
