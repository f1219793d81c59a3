// Package events carries the changes the engine makes to jobs to whoever
// watches them: the server-sent events of GET /v1/events, the dashboard's
// live pages, and callers waiting for a job to finish. A Bus numbers every
// event, keeps the latest in a ring so that a reader that reconnects
// resumes where it left off, and hands them to subscribers through bounded
// buffers: a subscriber that falls behind is dropped, and told so, rather
// than ever slowing the engine that publishes.
package events

import (
	"slices"
	"sync"
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
	// ID numbers the event, from 1 up in the order the bus published
	// them; a reader resumes after the last ID it saw. The bus sets it.
	ID uint64 `json:"id"`
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
	// Error is the failed attempt's error, for a failure.
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

// Filter chooses the events a subscriber gets; a zero field lets every
// value through.
type Filter struct {
	// Queues are the queues whose events pass; a consumer group's events
	// pass with their queue's.
	Queues []string
	// Kinds are the kinds whose events pass; an event whose kind the
	// engine did not know passes.
	Kinds []string
	// Job is the one job whose events pass.
	Job string
	// Types are the types of the events that pass.
	Types []Type
	// Allow, when set, must also let the event's queue through (a token's
	// namespaces).
	Allow func(queue string) bool
}

// Passes reports whether e passes f.
func (f *Filter) Passes(e *Event) bool {
	if f.Job != "" && e.Job != f.Job {
		return false
	}
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

// Bounds of a bus.
const (
	// DefaultRingSize is how many of the latest events a bus keeps for
	// readers that resume.
	DefaultRingSize = 16_384
	// DefaultBuffer is how many events a subscriber may fall behind
	// before it is dropped.
	DefaultBuffer = 4_096
)

// Bus publishes events to subscribers. It is safe for concurrent use; its
// zero value is not: make one with NewBus.
type Bus struct {
	mu     sync.Mutex
	ring   []Event
	last   uint64 // the ID of the latest event; 0 before the first
	closed bool
	// subs are the subscribers to every job's events; byJob those to one
	// job's, so that many waiters on single jobs cost a map lookup per
	// event, not a filter each.
	subs  map[*Subscription]struct{}
	byJob map[string]map[*Subscription]struct{}
}

// NewBus returns a bus that keeps the latest ringSize events
// (DefaultRingSize when ringSize < 1).
func NewBus(ringSize int) *Bus {
	if ringSize < 1 {
		ringSize = DefaultRingSize
	}
	return &Bus{ring: make([]Event, ringSize), subs: map[*Subscription]struct{}{}, byJob: map[string]map[*Subscription]struct{}{}}
}

// Publish numbers evs, keeps them, and hands each to the subscribers it
// passes. It never blocks: a subscriber whose buffer is full is dropped
// (see Subscription.Dropped). evs get their IDs.
func (b *Bus) Publish(evs []Event) {
	if len(evs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for i := range evs {
		b.last++
		evs[i].ID = b.last
		b.ring[b.last%uint64(len(b.ring))] = evs[i]
		for s := range b.subs {
			b.deliver(s, &evs[i])
		}
		for s := range b.byJob[evs[i].Job] {
			b.deliver(s, &evs[i])
		}
	}
}

// deliver hands e to s if it passes s's filter, and drops s if it cannot
// take it. b.mu is held.
func (b *Bus) deliver(s *Subscription, e *Event) {
	if !s.filter.Passes(e) {
		return
	}
	select {
	case s.ch <- *e:
	default:
		s.dropped = true
		b.remove(s)
	}
}

// remove ends s: no more events, its channel closed. b.mu is held.
func (b *Bus) remove(s *Subscription) {
	if s.done {
		return
	}
	s.done = true
	if s.filter.Job != "" {
		if m := b.byJob[s.filter.Job]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(b.byJob, s.filter.Job)
			}
		}
	} else {
		delete(b.subs, s)
	}
	close(s.ch)
}

// Last is the ID of the latest event published; 0 before the first.
func (b *Bus) Last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Subscribe starts a subscription to the events f lets through, with a
// buffer of size events (DefaultBuffer when size < 1). With resume set it
// first returns the kept events after the ID after that pass f, oldest
// first; gap is true when some events after it are no longer kept. Events
// published later arrive on the subscription's channel.
func (b *Bus) Subscribe(f Filter, resume bool, after uint64, size int) (s *Subscription, backlog []Event, gap bool) {
	if size < 1 {
		size = DefaultBuffer
	}
	s = &Subscription{bus: b, filter: f, ch: make(chan Event, size)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.done = true
		close(s.ch)
		return s, nil, false
	}
	if resume && after < b.last {
		oldest := uint64(1)
		if n := uint64(len(b.ring)); b.last > n {
			oldest = b.last - n + 1
		}
		from := after + 1
		if from < oldest {
			gap, from = true, oldest
		}
		for id := from; id <= b.last; id++ {
			if e := &b.ring[id%uint64(len(b.ring))]; f.Passes(e) {
				backlog = append(backlog, *e)
			}
		}
	}
	if f.Job != "" {
		m := b.byJob[f.Job]
		if m == nil {
			m = map[*Subscription]struct{}{}
			b.byJob[f.Job] = m
		}
		m[s] = struct{}{}
	} else {
		b.subs[s] = struct{}{}
	}
	return s, backlog, gap
}

// Close ends every subscription and refuses new ones, for a server
// shutting down: readers see their channels closed, not dropped.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.remove(s)
	}
	for _, m := range b.byJob {
		for s := range m {
			b.remove(s)
		}
	}
}

// Subscription is one reader's events.
type Subscription struct {
	bus     *Bus
	filter  Filter
	ch      chan Event
	done    bool // under bus.mu
	dropped bool // under bus.mu
}

// C delivers the events; it is closed when the subscription ends: by
// Close, by the bus closing, or because the reader fell behind (Dropped).
func (s *Subscription) C() <-chan Event { return s.ch }

// Dropped reports whether the bus ended the subscription because its
// buffer was full.
func (s *Subscription) Dropped() bool {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	return s.dropped
}

// Close ends the subscription. It is idempotent.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	defer s.bus.mu.Unlock()
	s.bus.remove(s)
}
