// Package leader elects one node among the Spool servers that share a
// store, so that the background services that must run once (scheduler,
// rescuer, pruner) run on one node at a time, and on another within seconds
// when that node dies. The election itself is the store's business (a
// PostgreSQL advisory lock, for example); this package campaigns with it
// and starts and stops what the leader runs.
package leader

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultRetry is how often a node that does not lead tries again.
const DefaultRetry = time.Second

// Lock is one node's handle on the leadership of a store.
type Lock interface {
	// TryAcquire tries once to become the leader. It returns nil and no
	// error when another node leads; otherwise a channel that is closed
	// when leadership is lost. After a loss the caller calls Release
	// before trying again.
	TryAcquire(ctx context.Context) (lost <-chan struct{}, err error)
	// Release gives leadership up if held and frees what the lock holds.
	// Idempotent.
	Release()
}

// Config configures an Elector.
type Config struct {
	// Lock decides who leads. Required.
	Lock Lock
	// OnElected is called when this node becomes the leader; it starts
	// what the leader runs. Required.
	OnElected func(ctx context.Context)
	// OnDemoted is called when this node stops leading (lost, or Stop); it
	// stops what OnElected started and returns once it has. Required.
	OnDemoted func()
	// Retry is the time between attempts of a node that does not lead.
	// Defaults to DefaultRetry.
	Retry time.Duration
	// Logger receives elections and losses. Defaults to slog.Default().
	Logger *slog.Logger
}

// Elector campaigns for leadership in the background, Start/Stop style.
type Elector struct {
	cfg Config

	mu      sync.Mutex
	leading bool
	cancel  context.CancelFunc
	done    chan struct{}

	startOnce, stopOnce sync.Once
}

// New returns an elector for cfg; Start runs it.
func New(cfg Config) *Elector {
	if cfg.Retry <= 0 {
		cfg.Retry = DefaultRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Elector{cfg: cfg, done: make(chan struct{})}
}

// Start begins campaigning. It returns at once; the first attempt runs in
// the background.
func (e *Elector) Start(ctx context.Context) error {
	e.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e.mu.Lock()
		e.cancel = cancel
		e.mu.Unlock()
		go e.run(ctx)
	})
	return nil
}

// Stop ends the campaign: a leader stops its services (OnDemoted) and
// gives leadership up, so another node can take over at once. It blocks
// until done, is idempotent and safe before Start.
func (e *Elector) Stop() {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		cancel := e.cancel
		e.mu.Unlock()
		if cancel == nil {
			close(e.done)
			return
		}
		cancel()
		<-e.done
	})
}

// Leader reports whether this node leads now.
func (e *Elector) Leader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

func (e *Elector) run(ctx context.Context) {
	defer close(e.done)
	defer e.cfg.Lock.Release()
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		lost, err := e.cfg.Lock.TryAcquire(ctx)
		switch {
		case err != nil:
			if failures++; failures == 1 || failures%60 == 0 {
				e.cfg.Logger.Warn("leader election failed; retrying", "err", err, "failures", failures)
			}
		case lost != nil:
			failures = 0
			e.lead(ctx, lost)
			e.cfg.Lock.Release()
		default:
			failures = 0
		}
		timer.Reset(e.cfg.Retry)
	}
}

// lead runs the leader's services until leadership is lost or ctx ends.
func (e *Elector) lead(ctx context.Context, lost <-chan struct{}) {
	e.cfg.Logger.Info("elected leader: running the scheduler, rescuer and pruner")
	e.setLeading(true)
	e.cfg.OnElected(ctx)
	select {
	case <-ctx.Done():
	case <-lost:
		e.cfg.Logger.Warn("lost leadership: stopping the scheduler, rescuer and pruner")
	}
	e.cfg.OnDemoted()
	e.setLeading(false)
}

func (e *Elector) setLeading(v bool) {
	e.mu.Lock()
	e.leading = v
	e.mu.Unlock()
}
