// Package job holds the leaf types of Spool: a Job, its State, its retry
// policy and the sentinel errors every layer shares. It imports only the
// standard library so that every other package, stores and clients alike,
// can depend on it.
package job

import (
	"encoding/json"
	"time"
)

// State is where a job stands in its life cycle.
//
//	scheduled ──due──▶ available ──fetch──▶ active ──ack──▶ completed
//	                      ▲                   │ fail / lease expiry
//	                      └──due── retrying ◀─┤ (attempts left)
//	                                          └──▶ dead (attempts exhausted or no retry)
//
// Any non-final job can become cancelled.
type State string

// The states a job can be in.
const (
	// StateScheduled is a job whose run_at lies in the future.
	StateScheduled State = "scheduled"
	// StateAvailable is a job ready to be fetched.
	StateAvailable State = "available"
	// StateActive is a job leased to a worker.
	StateActive State = "active"
	// StateRetrying is a failed job waiting for its backoff to run out.
	StateRetrying State = "retrying"
	// StateCompleted is a job a worker acknowledged. Final.
	StateCompleted State = "completed"
	// StateDead is a job that ran out of attempts or failed for good. Final
	// until retried by hand.
	StateDead State = "dead"
	// StateCancelled is a job cancelled by a user. Final.
	StateCancelled State = "cancelled"
)

// States lists every state in life-cycle order.
var States = []State{StateScheduled, StateAvailable, StateActive, StateRetrying, StateCompleted, StateDead, StateCancelled}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, known := range States {
		if s == known {
			return true
		}
	}
	return false
}

// Final reports whether a job in state s is finished: completed, dead or
// cancelled. Final jobs are the ones retention prunes.
func (s State) Final() bool {
	return s == StateCompleted || s == StateDead || s == StateCancelled
}

// Pending reports whether a job in state s still waits to run or is running:
// scheduled, available, active or retrying.
func (s State) Pending() bool {
	return s == StateScheduled || s == StateAvailable || s == StateActive || s == StateRetrying
}

// Durability says how a job's changes are kept, and so what can lose it.
type Durability string

// The durability levels.
const (
	// DurabilityFull answers a change only once it is fsynced: it survives
	// a crash of Spool and a power loss or OS crash. The default.
	DurabilityFull Durability = "full"
	// DurabilityProcess answers a change once it is written to the
	// database's log, without waiting for the disk: it survives a crash
	// of Spool, but a power loss or OS crash can lose the last changes
	// answered before it.
	DurabilityProcess Durability = "process"
	// DurabilityMemory keeps the job in memory only: fastest, and lost on
	// any restart, graceful or not.
	DurabilityMemory Durability = "memory"
)

// Durabilities lists every durability level, strongest first.
var Durabilities = []Durability{DurabilityFull, DurabilityProcess, DurabilityMemory}

// Valid reports whether d is one of the known levels.
func (d Durability) Valid() bool {
	return d == DurabilityFull || d == DurabilityProcess || d == DurabilityMemory
}

// Bounds of a job's lease, attempts and delay. The engine holds every job
// it enqueues to them, and QueueSettings.Check holds a queue's job
// defaults to the same, so that a default is always a value a job could
// have been given.
const (
	// MinLease and MaxLease bound a job's lease duration (its timeout).
	MinLease = 100 * time.Millisecond
	MaxLease = 24 * time.Hour
	// MaxAttempts bounds a job's maximum attempts; the least is 1.
	MaxAttempts = 1000
	// MaxDelay bounds delays, run times ahead, unique windows and backoff
	// caps: one year.
	MaxDelay = 365 * 24 * time.Hour
)

// AttemptError records why one attempt of a job failed.
type AttemptError struct {
	// Attempt is the attempt number (1-based) that failed.
	Attempt int `json:"attempt"`
	// Message is the error text the worker reported, or the reason the
	// server gave (for example "lease expired").
	Message string `json:"message"`
	// At is when the failure was recorded.
	At time.Time `json:"at"`
}

// Job is one unit of work and everything Spool knows about it.
type Job struct {
	// ID identifies the job: server-generated (sortable by creation time) or
	// chosen by the client to make its enqueue idempotent.
	ID string
	// Queue is the queue the job waits in.
	Queue string
	// Kind names the handler that runs the job.
	Kind string
	// Payload is the job's JSON argument, stored and returned byte for byte.
	Payload json.RawMessage
	// Priority orders available jobs within a queue: higher runs first.
	Priority int
	// State is where the job stands.
	State State
	// RunAt is when the job becomes (or became) available.
	RunAt time.Time
	// Attempt counts hand-outs to workers so far; the first fetch makes it 1.
	Attempt int
	// MaxAttempts is how many hand-outs the job gets before it is dead.
	MaxAttempts int
	// Backoff is the delay policy between failed attempts.
	Backoff Backoff
	// LeaseDuration is how long a fetch leases the job unless the fetch asks
	// for another duration: the job's timeout.
	LeaseDuration time.Duration
	// UniqueKey, when set, makes the job unique within its queue (see
	// UniqueFor).
	UniqueKey string
	// UniqueFor is the window during which another enqueue with the same
	// UniqueKey in the same queue is a duplicate. Zero means "while the first
	// job is pending" (scheduled, available, active or retrying).
	UniqueFor time.Duration
	// Tags are free labels for filtering and display.
	Tags []string
	// Group is the key the job's queue shares its flow control by (a
	// tenant, a customer, an entity): claims go round-robin over the
	// groups of a queue, and the queue's group limits hold for each group
	// apart. Empty: no group.
	Group string
	// Durability is how the job's changes are kept.
	Durability Durability
	// Result is the JSON a worker stored with its ack, if any.
	Result json.RawMessage
	// Errors has one entry per failed attempt, oldest first: the first
	// and the latest ones, within the bounds BoundErrors holds a history
	// to.
	Errors []AttemptError
	// ErrorsDropped counts the errors of failed attempts that the history
	// dropped to stay within its bounds: they came after Errors[0] and
	// before Errors[1].
	ErrorsDropped int
	// Progress is the latest JSON progress report of the active attempt.
	Progress json.RawMessage
	// LeaseToken is the fencing token of the latest hand-out. It grows with
	// every hand-out; only the holder of the current token may ack, fail,
	// extend or report progress.
	LeaseToken int64
	// LeaseExpiresAt is when the current lease runs out. Zero unless active.
	LeaseExpiresAt time.Time
	// CancelRequested is set when a user cancelled the job while it was
	// active; the worker learns of it at its next heartbeat or ack.
	CancelRequested bool
	// CreatedAt is when the job was enqueued.
	CreatedAt time.Time
	// StartedAt is when the latest attempt was handed out. Zero before.
	StartedAt time.Time
	// FinishedAt is when the job reached a final state. Zero before.
	FinishedAt time.Time
	// DeadLetterOf names the dead job this job is the dead-letter copy
	// of (see DeadLetter); zero for any other job.
	DeadLetterOf JobRef
	// Worker is the name (WorkerName) the fetch that leased the job most
	// recently gave its worker: who holds the job while it is active, and
	// who ran it last after. Each claim replaces it, with empty when the
	// fetch named no worker; nothing else changes it.
	Worker string
	// TraceParent is the W3C traceparent (ValidTraceParent) the job was
	// enqueued with, so that the work it starts continues the trace of
	// the request that enqueued it; empty for none. Given at insert and
	// never changed, it goes to the job's copies: a consumer group's and
	// a dead-letter copy.
	TraceParent string
}
