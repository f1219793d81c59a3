// Package engine is Spool's engine: it validates requests and applies
// defaults, runs the job state machine through a store.Store, and parks
// long-polling fetches until jobs become available. It never writes SQL.
package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Limits and defaults of the engine.
const (
	// DefaultQueue is the queue of jobs enqueued without one.
	DefaultQueue = "default"
	// DefaultMaxPayloadBytes bounds one job's payload (and result, progress).
	DefaultMaxPayloadBytes = 1 << 20
	// DefaultMaxBatch bounds the jobs of one enqueue and items of one batch
	// ack, fail or extend.
	DefaultMaxBatch = 10_000
	// MaxFetch bounds the jobs of one fetch.
	MaxFetch = 1000
	// MaxFetchQueues bounds the queues one fetch may name.
	MaxFetchQueues = 100
	// MaxWait bounds a long poll.
	MaxWait = 60 * time.Second
	// MinLease and MaxLease bound lease durations (job.MinLease and
	// job.MaxLease, which bound a queue's default lease as well).
	MinLease = job.MinLease
	MaxLease = job.MaxLease
	// DefaultLease is the lease of jobs enqueued without lease_ms into a
	// queue without a default lease.
	DefaultLease = 30 * time.Second
	// DefaultMaxAttempts is the attempts of jobs enqueued without
	// max_attempts into a queue without default maximum attempts.
	DefaultMaxAttempts = 25
	// MaxAttempts bounds max_attempts (job.MaxAttempts, which bounds a
	// queue's default maximum attempts as well).
	MaxAttempts = job.MaxAttempts
	// MaxPriority bounds priority in both directions.
	MaxPriority = 1000
	// MaxDelay bounds delays, unique windows and backoff caps: one year
	// (job.MaxDelay, which bounds a queue's default delay as well).
	MaxDelay = job.MaxDelay
	// MaxBackoffBase bounds the first backoff delay.
	MaxBackoffBase = 24 * time.Hour
	// MaxUniqueKeyBytes bounds unique keys.
	MaxUniqueKeyBytes = 256
	// MaxErrorBytes bounds the error message of one failed attempt.
	MaxErrorBytes = job.MaxErrorBytes
	// MaxGroupBytes bounds a job's group.
	MaxGroupBytes = 256
	// MaxWorkerBytes bounds the free-text worker name of a fetch
	// (job.MaxWorkerBytes).
	MaxWorkerBytes = job.MaxWorkerBytes
	// MaxListLimit bounds one page of a job listing. A listing without a
	// limit gets job.ListParams.PageSize's default.
	MaxListLimit = 1000
)

// DefaultBackoff is the retry policy of jobs enqueued without one.
var DefaultBackoff = job.Backoff{Kind: job.BackoffExponential, Base: time.Second, Max: time.Hour, Jitter: 0.2}

// ErrClosed is returned by calls made after Close began.
var ErrClosed = fmt.Errorf("engine closed: %w", job.ErrUnavailable)

// Clock tells the time. Tests inject their own.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now().UTC() }

// Config configures an Engine.
type Config struct {
	// MaxPayloadBytes bounds one payload, result or progress report.
	// Defaults to DefaultMaxPayloadBytes.
	MaxPayloadBytes int
	// MaxBatch bounds batch sizes. Defaults to DefaultMaxBatch.
	MaxBatch int
	// Clock tells the time. Defaults to the wall clock in UTC.
	Clock Clock
	// OnScheduled is told the run time of every job that became scheduled
	// or retrying, so the scheduler can wake for it. Optional.
	OnScheduled func(runAt time.Time)
	// OnLeased is told the earliest lease expiry of every claim and extend,
	// so the rescuer can wake for it. Optional.
	OnLeased func(expiry time.Time)
	// OnSchedule is told the next tick of every schedule created, changed
	// or resumed, so the service that fires schedules can wake for it.
	// Optional.
	OnSchedule func(next time.Time)
	// DecodeJob reads a schedule's job template, the wire form of an
	// enqueue body, into a request; its errors name the template's fields
	// as the fields of a schedule ("job.kind"). Required for schedules.
	DecodeJob func(raw json.RawMessage) (EnqueueRequest, error)
	// Observe is told of every job event the engine publishes (see
	// Events), in order, before the call that made them returns; it must
	// not block. Optional.
	Observe func(evs []events.Event)
	// EventRing is how many of the latest events the bus keeps for
	// readers that resume or fall behind (at most events.DefaultRingBytes
	// of them). Defaults to events.DefaultRingSize.
	EventRing int
}

// Engine runs the job state machine on a store. It is safe for concurrent
// use.
type Engine struct {
	st      store.Store
	cfg     Config
	waiters *waiters
	// capped are the queues in which an active cap held jobs back: a job
	// of theirs that stops being active wakes their parked fetches.
	capped sync.Map
	// lanes are the consumer groups' lanes fetches have found.
	lanes *laneCache
	// bus carries the job events (see Events).
	bus *events.Bus
	// workers are the workers seen fetching (see Workers).
	workers *workerRegistry

	closeOnce sync.Once
	closing   chan struct{}
}

// New returns an engine on st. It does not own st: the caller closes it
// after the engine.
func New(st store.Store, cfg Config) *Engine {
	if cfg.MaxPayloadBytes <= 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Clock == nil {
		cfg.Clock = wallClock{}
	}
	return &Engine{st: st, cfg: cfg, waiters: newWaiters(), lanes: newLaneCache(), bus: events.NewBus(events.Options{Size: cfg.EventRing}),
		workers: newWorkerRegistry(MaxWorkers), closing: make(chan struct{})}
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.cfg.Clock.Now() }

// MaxBatch is the most jobs or items one batch call may carry
// (Config.MaxBatch).
func (e *Engine) MaxBatch() int { return e.cfg.MaxBatch }

// Close wakes every parked fetch (they return what they have), refuses
// new calls that would park, and closes the event bus (its readers end).
// It does not close the store. Idempotent.
func (e *Engine) Close() {
	e.closeOnce.Do(func() {
		close(e.closing)
		e.waiters.close()
		e.bus.Close()
	})
}

// NotifyAvailable wakes the fetches parked on queues. Maintenance services
// and stores with ListenNotify call it when jobs become available.
func (e *Engine) NotifyAvailable(queues []string) {
	if len(queues) > 0 {
		e.waiters.wake(queues)
	}
}

// Waiting returns how many fetches are parked.
func (e *Engine) Waiting() int { return e.waiters.count() }

// Ping reports whether the store can serve.
func (e *Engine) Ping(ctx context.Context) error {
	select {
	case <-e.closing:
		return ErrClosed
	default:
	}
	return e.st.Ping(ctx)
}

func (e *Engine) scheduled(runAt time.Time) {
	if e.cfg.OnScheduled != nil {
		e.cfg.OnScheduled(runAt)
	}
}

func (e *Engine) leased(expiry time.Time) {
	if e.cfg.OnLeased != nil && !expiry.IsZero() {
		e.cfg.OnLeased(expiry)
	}
}

func (e *Engine) rand() float64 { return rand.Float64() }
