// Package maintenance runs Spool's background services: the scheduler that
// makes due jobs available, the rescuer that takes back expired leases,
// the expirer that kills jobs past their queue's maximum wait and the
// pruner that applies retention. Each is one timed loop that sleeps
// until its next known deadline (or until woken with an earlier one), never
// a fixed-interval poll of the database.
package maintenance

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// passFunc runs one pass at now and returns when the next pass is due; a
// zero time means "nothing known: the loop's idle interval".
type passFunc func(ctx context.Context, now time.Time) (time.Time, error)

// loop runs a pass whenever its deadline comes, Start/Stop style.
type loop struct {
	name string
	pass passFunc
	// idle bounds every sleep, so that changes the loop is not told of
	// (another process, clock jumps) are picked up eventually.
	idle   time.Duration
	now    func() time.Time
	logger *slog.Logger

	mu     sync.Mutex
	nextAt time.Time
	wakeCh chan struct{}

	startOnce sync.Once
	stopOnce  sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
}

func newLoop(name string, idle time.Duration, now func() time.Time, logger *slog.Logger, pass passFunc) *loop {
	if logger == nil {
		logger = slog.Default()
	}
	return &loop{
		name: name, pass: pass, idle: idle, now: now, logger: logger,
		wakeCh: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// Start runs the loop in the background until Stop. It returns at once.
func (l *loop) Start(ctx context.Context) error {
	l.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l.mu.Lock()
		l.cancel = cancel
		l.mu.Unlock()
		go l.run(ctx)
	})
	return nil
}

// Stop ends the loop and waits for a running pass to finish. Idempotent and
// safe before Start.
func (l *loop) Stop() {
	l.stopOnce.Do(func() {
		l.mu.Lock()
		cancel := l.cancel
		l.mu.Unlock()
		if cancel == nil {
			close(l.done)
			return
		}
		cancel()
		<-l.done
	})
}

// Wake asks for a pass no later than at.
func (l *loop) Wake(at time.Time) {
	l.mu.Lock()
	if l.nextAt.IsZero() || at.Before(l.nextAt) {
		l.nextAt = at
	}
	l.mu.Unlock()
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

func (l *loop) run(ctx context.Context) {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	failures := 0
	for {
		now := l.now()
		l.mu.Lock()
		l.nextAt = time.Time{} // wakes during the pass ask for another one
		l.mu.Unlock()
		next, err := l.pass(ctx, now)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			retry := time.Duration(failures) * 100 * time.Millisecond
			if retry > time.Second {
				retry = time.Second
			}
			l.logger.Warn("maintenance pass failed", "service", l.name, "err", err)
			next = now.Add(retry)
		} else {
			failures = 0
		}
		if next.IsZero() || next.After(now.Add(l.idle)) {
			next = now.Add(l.idle)
		}
		l.mu.Lock()
		if l.nextAt.IsZero() || next.Before(l.nextAt) {
			l.nextAt = next
		}
		l.mu.Unlock()
		if !l.sleep(ctx, timer) {
			return
		}
	}
}

// sleep waits until nextAt, following earlier wakes. It reports false once
// ctx ends.
func (l *loop) sleep(ctx context.Context, timer *time.Timer) bool {
	for {
		l.mu.Lock()
		d := l.nextAt.Sub(l.now())
		l.mu.Unlock()
		if d <= 0 {
			return true
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		case <-l.wakeCh:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}
