package engine

import (
	"slices"
	"sync"

	"github.com/spoolq/spool/internal/job"
)

// waiters parks long-polling fetches per queue and wakes them when jobs
// become available. A waiter registers before it looks for jobs, so a
// wake-up between its look and its park is never lost: the buffered channel
// keeps it.
type waiters struct {
	mu     sync.Mutex
	byName map[string]map[*waiter]struct{}
	closed bool
}

type waiter struct {
	queues []string
	ch     chan struct{}
}

func newWaiters() *waiters {
	return &waiters{byName: make(map[string]map[*waiter]struct{})}
}

// add registers a waiter on queues. It returns nil once closed.
func (ws *waiters) add(queues []string) *waiter {
	w := &waiter{queues: queues, ch: make(chan struct{}, 1)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return nil
	}
	for _, q := range wakeNames(queues) {
		set := ws.byName[q]
		if set == nil {
			set = make(map[*waiter]struct{})
			ws.byName[q] = set
		}
		set[w] = struct{}{}
	}
	return w
}

// wakeNames are the names whose jobs wake a fetch of queues: the queues,
// and for a consumer group's lane its queue too, since a job enqueued
// into the queue is copied into its lanes in the same commit.
func wakeNames(queues []string) []string {
	out := queues
	for _, q := range queues {
		if base, _, ok := job.SplitLane(q); ok {
			if len(out) == len(queues) {
				out = slices.Clone(queues)
			}
			out = append(out, base)
		}
	}
	return out
}

// remove unregisters w.
func (ws *waiters) remove(w *waiter) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, q := range wakeNames(w.queues) {
		set := ws.byName[q]
		delete(set, w)
		if len(set) == 0 {
			delete(ws.byName, q)
		}
	}
}

// wake signals every waiter parked on any of queues.
func (ws *waiters) wake(queues []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, q := range queues {
		for w := range ws.byName[q] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// count returns how many waiters are parked.
func (ws *waiters) count() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	seen := make(map[*waiter]struct{})
	for _, set := range ws.byName {
		for w := range set {
			seen[w] = struct{}{}
		}
	}
	return len(seen)
}

// close wakes every waiter and refuses new ones.
func (ws *waiters) close() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.closed = true
	for _, set := range ws.byName {
		for w := range set {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}
