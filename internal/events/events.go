// Package events carries the changes the engine makes to jobs to whoever
// watches them: the server-sent events of GET /v1/events, the dashboard's
// live pages, and callers waiting for a job to finish. A Bus numbers every
// event and keeps the latest in a ring bounded in count and in bytes.
// Publishing appends to the ring and wakes the readers with one broadcast,
// whatever their number: each Reader copies what passes its filter from
// the ring at its own pace, with its own cursor, and is told when the ring
// overtook it. Waiters on one job (Watch) are kept by job id, so that a
// publish costs them one map lookup per event.
package events

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Type names what happened to a job. It is the SSE event name.
type Type string

// The types of events.
const (
	// Enqueued: the job was stored, scheduled or available.
	Enqueued Type = "job.enqueued"
	// Started: a fetch leased the job (an attempt began).
	Started Type = "job.started"
	// Completed: the job was acknowledged.
	Completed Type = "job.completed"
	// Failed: an attempt failed and the job waits to run again.
	Failed Type = "job.failed"
	// Dead: the job failed for the last time, or waited past its
	// queue's maximum wait.
	Dead Type = "job.dead"
	// Cancelled: the job was cancelled.
	Cancelled Type = "job.cancelled"
	// Released: the job was handed back unrun and is available again.
	Released Type = "job.released"
	// Retried: the job was retried by hand and is available again.
	Retried Type = "job.retried"
	// Deleted: the job was deleted.
	Deleted Type = "job.deleted"
)

// Final reports whether t leaves a job in a final state.
func (t Type) Final() bool { return t == Completed || t == Dead || t == Cancelled || t == Deleted }

// Event is one change of one job.
type Event struct {
	// ID names the event: its bus and its number there, from 1 up in the
	// order the bus published them; a reader resumes after the last ID it
	// saw. The bus sets it.
	ID ID `json:"id"`
	// Type is what happened.
	Type Type `json:"type"`
	// At is when it happened, by the engine's clock.
	At time.Time `json:"at"`
	// Job is the job's id.
	Job string `json:"job_id"`
	// Queue is the job's queue (the queue of a consumer group's copy).
	Queue string `json:"queue"`
	// ConsumerGroup names the consumer group of a copy; empty otherwise.
	ConsumerGroup string `json:"consumer_group,omitempty"`
	// Kind is the job's kind, when the engine knows it.
	Kind string `json:"kind,omitempty"`
	// State is the job's state after the change; empty once deleted.
	State job.State `json:"state,omitempty"`
	// Attempt is the job's attempt, when the engine knows it: for a
	// start, the attempt that started; for the end of an attempt (an
	// ack, a failure, a release), the attempt that ended.
	Attempt int `json:"attempt,omitempty"`
	// Worker is the fetch's worker name, for a start.
	Worker string `json:"worker,omitempty"`
	// Error is the failed attempt's error, for a failure; the bus keeps
	// at most its first MaxErrorBytes.
	Error string `json:"error,omitempty"`
	// Waited is, for a start, how long the job waited from its run time.
	Waited time.Duration `json:"-"`
	// Ran is, for the end of an attempt by its worker (an ack, a failure,
	// a release), how long the attempt ran, from its start; zero when the
	// store did not tell the start.
	Ran time.Duration `json:"-"`
}

// Of returns an event of type t about job id of queue (a consumer group's
// lane is split into its queue and group), at.
func Of(t Type, at time.Time, id, queue string) Event {
	e := Event{Type: t, At: at, Job: id, Queue: queue}
	if q, g, ok := job.SplitLane(queue); ok {
		e.Queue, e.ConsumerGroup = q, g
	}
	return e
}

// Filter chooses the events a reader gets; a zero field lets every
// value through.
type Filter struct {
	// Queues are the queues whose events pass; a consumer group's events
	// pass with their queue's.
	Queues []string
	// Kinds are the kinds whose events pass; an event whose kind the
	// engine did not know passes.
	Kinds []string
	// Types are the types of the events that pass.
	Types []Type
	// Allow, when set, must also let the event's queue through (a token's
	// namespaces).
	Allow func(queue string) bool
}

// Passes reports whether e passes f.
func (f *Filter) Passes(e *Event) bool {
	if len(f.Types) > 0 && !slices.Contains(f.Types, e.Type) {
		return false
	}
	if len(f.Queues) > 0 && !slices.Contains(f.Queues, e.Queue) {
		return false
	}
	if len(f.Kinds) > 0 && e.Kind != "" && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	return f.Allow == nil || f.Allow(e.Queue)
}
