package job

import (
	"encoding/json"
	"time"
)

// The items of a batch ack, fail, extend or release, and what each
// item's call did.

// Outcome is the result of one item of a batch ack, fail or extend.
type Outcome struct {
	// Err is nil, ErrNotFound or ErrLeaseLost.
	Err error
	// Queue is the job's queue (when Err is nil).
	Queue string
	// State is the job's state after the call (when Err is nil).
	State State
	// RunAt is when a retrying job runs again.
	RunAt time.Time
	// LeaseExpiresAt is the new lease expiry after an extend.
	LeaseExpiresAt time.Time
	// CancelRequested tells the worker that a user cancelled the
	CancelRequested bool
	// DeadLetter is, for a job that died into its queue's dead-letter
	// queue, the queue and id of its copy there; zero otherwise.
	DeadLetter JobRef
	// Kind, Attempt and StartedAt describe, for an accepted ack, fail or
	// release (of a call or of a transaction), the attempt the item
	// ended: the job's kind, the attempt's number (the one the lease
	// was handed out with, before a release takes it back) and when it
	// started, so that the time it ran is known without reading the
	// Zero for a refused item and for an extend.
	Kind      string
	Attempt   int
	StartedAt time.Time
}

// CompleteItem acknowledges one
type CompleteItem struct {
	ID     string
	Token  int64
	Result json.RawMessage
}

// FailItem fails one attempt.
type FailItem struct {
	ID      string
	Token   int64
	Message string
	// NoRetry sends the job to dead whatever attempts it has left.
	NoRetry bool
	// RetryAfter overrides the backoff policy when non-zero.
	RetryAfter time.Duration
}

// ExtendItem extends one lease.
type ExtendItem struct {
	ID    string
	Token int64
	// Lease is the new lease length from now; zero means the job's own
	// LeaseDuration.
	Lease time.Duration
}

// ReleaseItem hands one job back.
type ReleaseItem struct {
	ID    string
	Token int64
}
