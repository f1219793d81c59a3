package client

import (
	"encoding/json"
	"time"
)

// State is where a job stands in its life cycle:
//
//	scheduled ──due──▶ available ──fetch──▶ active ──ack──▶ completed
//	                      ▲                   │ fail / lease expiry
//	                      └──due── retrying ◀─┤ (attempts left)
//	                                          └──▶ dead (attempts used up or no retry)
//
// Any job not yet final can become cancelled.
type State string

// The states of a job, as the protocol spells them.
const (
	// StateScheduled is a job whose run time lies in the future.
	StateScheduled State = "scheduled"
	// StateAvailable is a job ready to be fetched.
	StateAvailable State = "available"
	// StateActive is a job leased to a worker.
	StateActive State = "active"
	// StateRetrying is a failed job waiting out its backoff.
	StateRetrying State = "retrying"
	// StateCompleted is a job a worker acknowledged. Final.
	StateCompleted State = "completed"
	// StateDead is a job that used up its attempts or failed with no retry.
	// Final until retried by hand.
	StateDead State = "dead"
	// StateCancelled is a job cancelled by a user. Final.
	StateCancelled State = "cancelled"
)

// Final reports whether s is completed, dead or cancelled: no worker will
// run the job again unless someone retries it.
func (s State) Final() bool {
	return s == StateCompleted || s == StateDead || s == StateCancelled
}

// Durability is how the server keeps a job, and so what can lose it
// (docs/protocol.md, "Durability levels").
type Durability string

// The durability levels, strongest first.
const (
	// DurabilityFull answers a change only once it is fsynced: the job
	// survives a crash of Spool and a power loss or OS crash. The default.
	DurabilityFull Durability = "full"
	// DurabilityProcess answers a change once it is written to the
	// database's log, before the disk flush: the job survives a crash of
	// Spool, but a power loss or OS crash (or, with PostgreSQL, a crash of
	// PostgreSQL) can lose the last changes answered before it.
	DurabilityProcess Durability = "process"
	// DurabilityMemory keeps the job in memory only: fastest, and lost on
	// any restart of the server, graceful or not. Only the embedded store
	// keeps memory jobs, and a batch may not mix them with jobs of other
	// levels.
	DurabilityMemory Durability = "memory"
)

// BackoffType names how the delay between attempts grows.
type BackoffType string

// The backoff types.
const (
	// BackoffFixed waits Base between attempts.
	BackoffFixed BackoffType = "fixed"
	// BackoffExponential waits Base·2^(attempt-1), capped at Max.
	BackoffExponential BackoffType = "exponential"
)

// Backoff is a job's retry delay policy. Each delay d is shortened at
// random to a value in [d·(1-Jitter), d].
//
// In EnqueueParams a Backoff is a whole policy: Type defaults to
// exponential, a zero Base retries at once, a zero Jitter means no jitter,
// and only a zero Max falls back to the server's default cap (1 h, or Base
// if that is larger).
type Backoff struct {
	// Type is fixed or exponential.
	Type BackoffType
	// Base is the first delay (0 to 24 h).
	Base time.Duration
	// Max caps the delay (Base to one year).
	Max time.Duration
	// Jitter is the fraction of each delay taken off at random, in [0,1].
	Jitter float64
}

// wireBackoff is Backoff on the wire.
type wireBackoff struct {
	Type   BackoffType `json:"type,omitempty"`
	BaseMS int64       `json:"base_ms"`
	MaxMS  int64       `json:"max_ms,omitempty"`
	Jitter float64     `json:"jitter"`
}

func (b Backoff) wire() *wireBackoff {
	t := b.Type
	if t == "" {
		t = BackoffExponential
	}
	return &wireBackoff{Type: t, BaseMS: msec(b.Base), MaxMS: msec(b.Max), Jitter: b.Jitter}
}

func (w *wireBackoff) backoff() Backoff {
	return Backoff{
		Type:   w.Type,
		Base:   time.Duration(w.BaseMS) * time.Millisecond,
		Max:    time.Duration(w.MaxMS) * time.Millisecond,
		Jitter: w.Jitter,
	}
}

// Lease is a job's current hand-out to a worker. Only the holder of Token
// may ack, fail, extend, report progress on or release the job; the token
// grows with every hand-out, so downstream systems can use it as a fencing
// token or idempotency key.
type Lease struct {
	// Token is the fencing token of this hand-out.
	Token int64 `json:"token"`
	// ExpiresAt is when the lease runs out unless extended; the job is then
	// handed out again.
	ExpiresAt time.Time `json:"expires_at"`
}

// AttemptError records why one attempt of a job failed.
type AttemptError struct {
	// Attempt is the attempt (1-based) that failed.
	Attempt int `json:"attempt"`
	// Message is the error the worker reported, or the server's reason
	// (such as "lease expired").
	Message string `json:"message"`
	// At is when the failure was recorded.
	At time.Time `json:"at"`
}

// Job is everything the server knows about one job, as GET /v1/jobs/{id}
// and fetch return it. Durations are time.Duration here and milliseconds
// (`_ms` fields) on the wire; Job's JSON methods convert, so a Job encodes
// to the protocol's form.
type Job struct {
	// ID identifies the job.
	ID string
	// Queue is the queue the job waits in.
	Queue string
	// Kind names the handler that runs the job.
	Kind string
	// Payload is the job's JSON argument, byte for byte as enqueued.
	Payload json.RawMessage
	// Priority orders available jobs: higher runs first.
	Priority int
	// State is where the job stands.
	State State
	// RunAt is when the job becomes (or became) available.
	RunAt time.Time
	// Attempt counts hand-outs so far; the first fetch makes it 1.
	Attempt int
	// MaxAttempts is how many hand-outs the job gets before it is dead.
	MaxAttempts int
	// Backoff is the delay policy between failed attempts.
	Backoff Backoff
	// LeaseDuration is how long a fetch leases the job unless the fetch
	// asks for another duration.
	LeaseDuration time.Duration
	// Lease is the current hand-out; nil unless the job is active.
	Lease *Lease
	// UniqueKey, when set, makes the job unique within its queue.
	UniqueKey string
	// UniqueFor is the uniqueness window; zero means while the job is
	// pending.
	UniqueFor time.Duration
	// Tags are free labels.
	Tags []string
	// Group is the job's group (see EnqueueParams.Group); empty when it
	// has none.
	Group string
	// ConsumerGroup is, for a consumer group's copy of a job, the consumer
	// group; empty for a queue's own jobs.
	ConsumerGroup string
	// Durability is how the server keeps the job.
	Durability Durability
	// Result is the JSON a worker stored with its ack, if any.
	Result json.RawMessage
	// Errors has one entry per failed attempt, oldest first: the first
	// and the latest 20, within 256 KiB of messages.
	Errors []AttemptError
	// ErrorsDropped counts the errors the server dropped from the history
	// to keep it within those bounds, between Errors[0] and Errors[1].
	ErrorsDropped int
	// Progress is the latest progress report of the active attempt.
	Progress json.RawMessage
	// CancelRequested is set when a user cancelled the job while it was
	// active; its worker should stop and ack or fail it.
	CancelRequested bool
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
	// StartedAt is when the latest attempt was handed out; zero before.
	StartedAt time.Time
	// FinishedAt is when the job reached a final state; zero before.
	FinishedAt time.Time
	// DeadLetterOf names, for a job that is the dead-letter copy of a dead
	// job (see QueueSettings.DeadLetterQueue), that job; nil for any other
	// job.
	DeadLetterOf *JobRef
	// Worker is the FetchParams.Worker of the fetch that leased the job
	// most recently: who holds it while it is active, who ran it last
	// after. Empty when that fetch named no worker, or none leased it.
	Worker string
	// TraceParent is the W3C traceparent the job was enqueued with (see
	// EnqueueParams.TraceParent); empty for none.
	TraceParent string
}

// wireJob is Job on the wire.
type wireJob struct {
	ID              string          `json:"id"`
	Queue           string          `json:"queue"`
	Kind            string          `json:"kind"`
	Payload         json.RawMessage `json:"payload,omitempty"`
	Priority        int             `json:"priority"`
	State           State           `json:"state"`
	RunAt           time.Time       `json:"run_at,omitzero"`
	Attempt         int             `json:"attempt"`
	MaxAttempts     int             `json:"max_attempts"`
	Backoff         *wireBackoff    `json:"backoff,omitempty"`
	LeaseMS         int64           `json:"lease_ms,omitempty"`
	UniqueKey       string          `json:"unique_key,omitempty"`
	UniqueForMS     int64           `json:"unique_for_ms,omitempty"`
	Tags            []string        `json:"tags,omitempty"`
	Group           string          `json:"group,omitempty"`
	ConsumerGroup   string          `json:"consumer_group,omitempty"`
	Durability      Durability      `json:"durability,omitempty"`
	Result          json.RawMessage `json:"result,omitempty"`
	Errors          []AttemptError  `json:"errors,omitempty"`
	ErrorsDropped   int             `json:"errors_dropped,omitempty"`
	Progress        json.RawMessage `json:"progress,omitempty"`
	Lease           *Lease          `json:"lease,omitempty"`
	CancelRequested bool            `json:"cancel_requested"`
	CreatedAt       time.Time       `json:"created_at,omitzero"`
	StartedAt       time.Time       `json:"started_at,omitzero"`
	FinishedAt      time.Time       `json:"finished_at,omitzero"`
	DeadLetterOf    *JobRef         `json:"dead_letter_of,omitempty"`
	Worker          string          `json:"worker,omitempty"`
	TraceParent     string          `json:"traceparent,omitempty"`
}

// MarshalJSON encodes j in the protocol's form.
func (j Job) MarshalJSON() ([]byte, error) {
	w := wireJob{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority,
		State: j.State, RunAt: j.RunAt, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		LeaseMS: msec(j.LeaseDuration), UniqueKey: j.UniqueKey, UniqueForMS: msec(j.UniqueFor),
		Tags: j.Tags, Group: j.Group, ConsumerGroup: j.ConsumerGroup, Durability: j.Durability, Result: j.Result, Errors: j.Errors, ErrorsDropped: j.ErrorsDropped, Progress: j.Progress, Lease: j.Lease,
		CancelRequested: j.CancelRequested, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, DeadLetterOf: j.DeadLetterOf, Worker: j.Worker, TraceParent: j.TraceParent,
	}
	if j.Backoff != (Backoff{}) {
		w.Backoff = &wireBackoff{Type: j.Backoff.Type, BaseMS: msec(j.Backoff.Base), MaxMS: msec(j.Backoff.Max), Jitter: j.Backoff.Jitter}
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the protocol's form of a job. Unknown fields are
// ignored so that newer servers stay readable.
func (j *Job) UnmarshalJSON(data []byte) error {
	var w wireJob
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	w.to(j)
	return nil
}

// to sets j to the job w describes.
func (w *wireJob) to(j *Job) {
	*j = Job{
		ID: w.ID, Queue: w.Queue, Kind: w.Kind, Payload: w.Payload, Priority: w.Priority,
		State: w.State, RunAt: w.RunAt, Attempt: w.Attempt, MaxAttempts: w.MaxAttempts,
		LeaseDuration: time.Duration(w.LeaseMS) * time.Millisecond, Lease: w.Lease,
		UniqueKey: w.UniqueKey, UniqueFor: time.Duration(w.UniqueForMS) * time.Millisecond,
		Tags: w.Tags, Group: w.Group, ConsumerGroup: w.ConsumerGroup, Durability: w.Durability, Result: w.Result, Errors: w.Errors, ErrorsDropped: w.ErrorsDropped, Progress: w.Progress,
		CancelRequested: w.CancelRequested, CreatedAt: w.CreatedAt, StartedAt: w.StartedAt,
		FinishedAt: w.FinishedAt, DeadLetterOf: w.DeadLetterOf, Worker: w.Worker, TraceParent: w.TraceParent,
	}
	if w.Backoff != nil {
		j.Backoff = w.Backoff.backoff()
	}
}

// Token is the fencing token of the job's current lease, or 0 when it has
// none (it is not active).
func (j *Job) Token() int64 {
	if j.Lease == nil {
		return 0
	}
	return j.Lease.Token
}
