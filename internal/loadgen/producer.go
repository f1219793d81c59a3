package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Producer is an enqueue load: Clients clients send calls at once, each
// its next call as soon as its last one is answered (a closed loop), or
// each call when the Schedule says it is due (an open loop). The calls
// are the caller's; the Producer decides how many, when, and when to
// stop.
type Producer struct {
	// Clients is how many clients send calls at once. Defaults to 1.
	Clients int
	// Calls bounds the calls of a closed loop, numbered 0 to Calls-1
	// across the clients; 0 for no bound.
	Calls int64
	// Until, when set, ends a closed loop: no call starts at or after it.
	Until time.Time
	// Pace is each client's pause after each of its calls; 0 for none.
	Pace time.Duration
	// Schedule, when set, makes the load an open loop: each client asks
	// it for the next call's number and due time, waits until then and
	// sends the call, so that a slow answer delays the measurement, never
	// the schedule. ok false ends the load. It must be safe for
	// concurrent use.
	Schedule func() (index int64, due time.Time, ok bool)
	// Stop, when closed, ends the load gracefully: no call starts after
	// it, and the calls under way finish. Ending the context of Run
	// instead cuts them short too.
	Stop <-chan struct{}
}

// Call is one call a producer's client is to send.
type Call struct {
	// Index numbers the call across all clients, from 0.
	Index int64
	// Due is what an open loop measures the call from: when it was sent,
	// if its client was free and waited for its due time, else (its client
	// still busy with earlier calls at the due time) the due time, so that
	// a slow system shows in the latency rather than in a slower load. A
	// timer that fires late is the load generator's delay, not the
	// system's. Zero in a closed loop.
	Due time.Time
}

// Sender sends one call of a producer's client and returns once it is
// answered. An error ends that client, and Run returns the first one;
// a load that goes on after a failed call counts the failure itself and
// returns nil.
type Sender func(ctx context.Context, c Call) error

// Run runs the load and returns once every client has ended: the calls
// are all sent, Until passed, the Schedule ended, Stop closed or ctx
// ended. Each client sends with the Sender that newSender returns for it
// (client numbers 0 to Clients-1), which can keep state of its own: a
// buffer, a random source, a counter. It returns the first error a
// Sender returned, or else ctx's error if ctx ended.
func (p Producer) Run(ctx context.Context, newSender func(client int) Sender) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	for client := range max(p.Clients, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := newSender(client)
			var err error
			if p.Schedule != nil {
				err = p.openLoop(ctx, send)
			} else {
				err = p.closedLoop(ctx, &next, send)
			}
			if err != nil {
				errOnce.Do(func() { first = err })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// closedLoop sends calls one after the other until the load ends.
func (p Producer) closedLoop(ctx context.Context, next *atomic.Int64, send Sender) error {
	for ctx.Err() == nil && !stopped(p.Stop) {
		i := next.Add(1) - 1
		if p.Calls > 0 && i >= p.Calls {
			return nil
		}
		if !p.Until.IsZero() && !time.Now().Before(p.Until) {
			return nil
		}
		if err := send(ctx, Call{Index: i}); err != nil {
			return err
		}
		if p.Pace > 0 && !wait(ctx, p.Stop, p.Pace) {
			return nil
		}
	}
	return nil
}

// openLoop sends each call the Schedule hands out when it is due.
func (p Producer) openLoop(ctx context.Context, send Sender) error {
	for ctx.Err() == nil && !stopped(p.Stop) {
		i, due, ok := p.Schedule()
		if !ok {
			return nil
		}
		if d := time.Until(due); d > 0 {
			if !wait(ctx, p.Stop, d) {
				return nil
			}
			due = time.Now()
		}
		if err := send(ctx, Call{Index: i, Due: due}); err != nil {
			return err
		}
		if p.Pace > 0 && !wait(ctx, p.Stop, p.Pace) {
			return nil
		}
	}
	return nil
}
