package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// QueueSettings are a queue's settings (docs/protocol.md, "Dead letters
// and maximum wait"): where its dead jobs go and how long its jobs may
// wait to start. A zero field is unset; the zero QueueSettings set
// nothing. MaxWait is a time.Duration here and milliseconds (max_wait_ms)
// on the wire; QueueSettings' JSON methods convert.
type QueueSettings struct {
	// DeadLetterQueue names the queue that gets a copy of every job of
	// this queue that dies (attempts used up, a failure with NoRetry, a
	// lease that ran out on the last attempt, or MaxWait passed; not a
	// cancel or a delete). The dead job stays dead where it is; the copy
	// is a new available job with the dead job's work and Errors, whose
	// Job.DeadLetterOf names the dead job. Never the queue itself.
	DeadLetterQueue string
	// MaxWait bounds how long a job of the queue may wait unstarted
	// (Attempt 0) after its RunAt: 1 ms to one year, in whole
	// milliseconds (a fraction of a millisecond is rounded up). A job not
	// started by then is never handed out: it dies with the error "not
	// started within max wait", into the dead-letter queue if one is set.
	MaxWait time.Duration
}

// IsZero reports whether s sets nothing.
func (s QueueSettings) IsZero() bool { return s == QueueSettings{} }

// wireSettings is QueueSettings on the wire.
type wireSettings struct {
	DeadLetterQueue string `json:"dead_letter_queue,omitempty"`
	MaxWaitMS       int64  `json:"max_wait_ms,omitempty"`
}

// MarshalJSON encodes s in the protocol's form.
func (s QueueSettings) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireSettings{DeadLetterQueue: s.DeadLetterQueue, MaxWaitMS: msec(s.MaxWait)})
}

// UnmarshalJSON decodes the protocol's form of a queue's settings.
func (s *QueueSettings) UnmarshalJSON(data []byte) error {
	var w wireSettings
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*s = QueueSettings{DeadLetterQueue: w.DeadLetterQueue, MaxWait: time.Duration(w.MaxWaitMS) * time.Millisecond}
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
// settings apply at once to the jobs already in the queue. Setting the
// settings of a queue that holds no jobs creates it. A value the queue may
// not have gives ErrInvalidArgument whose Field names it
// ("dead_letter_queue": not a queue name, or the queue itself;
// "max_wait_ms": out of range), and changes nothing.
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
