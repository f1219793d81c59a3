package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// beliefs are what a node believes of the queues, to spare its calls a
// read: which have flow control, which are grouped, which have consumer
// groups, their maximum waits and their job defaults. Each belief may be
// wrong for a while (another node changed the queue); what relies on it
// is safe all the same, as each says, and a node that hears of a change
// forgets what it changed.
type beliefs struct {
	db *db
	// flowQueues holds the queues this node knows to have flow control,
	// so that their claims skip the plain claim, and plainSeen when it
	// last found others without (see JobClaim); groupedQueues holds those
	// it knows to be grouped, so that inserts of their jobs with a group
	// skip marking them (see markGrouped).
	flowQueues, plainSeen, groupedQueues sync.Map
	// lanedQueues holds the queues this node found with consumer groups,
	// whose inserts take the full path (see insertFast).
	lanedQueues sync.Map
	// waits holds the maximum waits of the queues that have one
	// (waits.go).
	waits waitSet
	// defaults keeps the queues' job defaults that enqueues read.
	defaults *defaultsCache
}

// sqlFlowAmong reads which of the queues $1 have flow control.
const sqlFlowAmong = `SELECT name FROM spool_queues WHERE name = ANY($1) AND flow`

// heard forgets what a notification from another node with tag says
// changed in queues; with no tag, the queues got available jobs.
func (b *beliefs) heard(tag string, queues []string) {
	switch tag {
	case "":
		b.forgetPlain(queues)
	case settingsTag:
		b.defaults.forget(queues)
		b.forgetWaits()
	}
}

// forgetAll forgets what may have changed while the node did not listen.
func (b *beliefs) forgetAll(queues []string) {
	b.forgetPlain(queues)
	b.defaults.forget(nil)
	b.forgetWaits()
}

// rememberFlow records, once their transaction committed, which queues
// have flow control.
func (b *beliefs) rememberFlow(flows map[string]bool) {
	for name, flow := range flows {
		if flow {
			b.flowQueues.Store(name, struct{}{})
			b.plainSeen.Delete(name)
		} else {
			b.flowQueues.Delete(name)
		}
	}
}

// plainRecheck is how long a node trusts that a queue it found without
// flow control still has none, unless a notification of the queue comes
// first: a queue gets flow control on another node by a change that
// announces it (new limits, or jobs with a group made available), so the
// trust ends at once on a node that listens. It only spares short claims
// of plain queues a look at spool_queues: the plain claim passes over
// flow queues whatever a node believes, so limits hold all the same.
const plainRecheck = time.Second

// lookForFlow finds which of queues, which a plain claim just came out
// short on, have flow control, and remembers them; queues found plain
// less than plainRecheck ago are not looked at again.
func (b *beliefs) lookForFlow(ctx context.Context, queues []string) error {
	now := time.Now()
	var stale []string
	for _, q := range queues {
		if at, ok := b.plainSeen.Load(q); !ok || now.Sub(at.(time.Time)) >= plainRecheck {
			stale = append(stale, q)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	flow, err := collect[string](ctx, b.db.pool, sqlFlowAmong, stale)
	if err != nil {
		return fmt.Errorf("read flow control: %w", err)
	}
	for _, q := range stale {
		if slices.Contains(flow, q) {
			b.flowQueues.Store(q, struct{}{})
			b.plainSeen.Delete(q)
		} else {
			b.plainSeen.Store(q, now)
		}
	}
	return nil
}

// forgetPlain drops what this node believed of queues without flow
// control, on news of them from another node.
func (b *beliefs) forgetPlain(queues []string) {
	for _, q := range queues {
		b.plainSeen.Delete(q)
	}
}

// isFlow reports whether this node knows queue to have flow control. It
// may be wrong both ways: the plain claim passes over flow queues, and a
// flow claim claims the plain way a queue that turns out to have none.
func (b *beliefs) isFlow(queue string) bool {
	_, ok := b.flowQueues.Load(queue)
	return ok
}

// noteGrouped remembers queues as grouped, with flow control, once the
// transaction that marked them (see markGrouped) committed.
func (b *beliefs) noteGrouped(queues []string) {
	for _, q := range queues {
		b.groupedQueues.Store(q, struct{}{})
		b.flowQueues.Store(q, struct{}{})
		b.plainSeen.Delete(q)
	}
}

// waitRecheck is how long a node trusts what it read of which queues
// have a maximum wait, unless it hears of a change first.
const waitRecheck = time.Second

// waitSet is what a node believes of the queues' maximum waits.
type waitSet struct {
	mu      sync.Mutex // held by the one refresh at a time
	queues  atomic.Pointer[map[string]time.Duration]
	checked atomic.Int64 // Unix nanoseconds of the last read; 0: read again
}

// waiting returns the maximum waits this node believes the queues that
// have one to have, reading them again through q when what it read is
// older than waitRecheck. A caller that holds a connection of the pool
// passes it (its transaction), so that no call waits for a second one.
func (b *beliefs) waiting(ctx context.Context, q querier) (map[string]time.Duration, error) {
	w := &b.waits
	fresh := func() bool { return time.Since(time.Unix(0, w.checked.Load())) < waitRecheck }
	if m := w.queues.Load(); m != nil && fresh() {
		return *m, nil
	}
	if !w.mu.TryLock() {
		if m := w.queues.Load(); m != nil {
			return *m, nil // another call is reading them
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	if m := w.queues.Load(); m != nil && fresh() {
		return *m, nil
	}
	started := time.Now()
	m, err := readWaits(ctx, q, sqlWaitQueues)
	if err != nil {
		return nil, err
	}
	w.queues.Store(&m)
	w.checked.Store(started.UnixNano())
	return m, nil
}

// forgetWaits makes the next call read the maximum waits again.
func (b *beliefs) forgetWaits() { b.waits.checked.Store(0) }
