package events

// DefaultWatchBuffer is how many events a watch holds before it is
// dropped.
const DefaultWatchBuffer = 16

// Watch is a waiter's subscription to the events of one job, for callers
// that await a job's result: many may wait at once, on as many jobs, and
// a publish costs them one map lookup per event. A watch whose buffer is
// full is dropped (its channel closed) rather than ever slowing the
// publisher; its owner then reads the job's state on its own.
type Watch struct {
	bus  *Bus
	job  string
	ch   chan Event
	done bool // under bus.watchMu
}

// WatchJob starts a watch of job id's events published from now on, with
// a buffer of size events (DefaultWatchBuffer when size < 1). On a closed
// bus the watch's channel is closed at once.
func (b *Bus) WatchJob(id string, size int) *Watch {
	if size < 1 {
		size = DefaultWatchBuffer
	}
	w := &Watch{bus: b, job: id, ch: make(chan Event, size)}
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	if b.watchesClosed {
		w.done = true
		close(w.ch)
		return w
	}
	m := b.byJob[id]
	if m == nil {
		m = map[*Watch]struct{}{}
		b.byJob[id] = m
	}
	m[w] = struct{}{}
	b.watching.Add(1)
	return w
}

// C delivers the job's events; it is closed when the watch ends: by Close,
// by the bus closing, or because the watch's buffer was full.
func (w *Watch) C() <-chan Event { return w.ch }

// Close ends the watch. It is idempotent.
func (w *Watch) Close() {
	w.bus.watchMu.Lock()
	defer w.bus.watchMu.Unlock()
	w.bus.unwatch(w)
}

// deliverToWatches hands each of evs to the watches of its job. b.mu is
// held, so that watches get a job's events in the order of their IDs.
func (b *Bus) deliverToWatches(evs []Event) {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	for i := range evs {
		for w := range b.byJob[evs[i].Job] {
			select {
			case w.ch <- evs[i]:
			default:
				b.unwatch(w)
			}
		}
	}
}

// unwatch ends w: no more events, its channel closed. b.watchMu is held.
func (b *Bus) unwatch(w *Watch) {
	if w.done {
		return
	}
	w.done = true
	if m := b.byJob[w.job]; m != nil {
		delete(m, w)
		if len(m) == 0 {
			delete(b.byJob, w.job)
		}
	}
	b.watching.Add(-1)
	close(w.ch)
}

// closeWatches ends every watch and refuses new ones.
func (b *Bus) closeWatches() {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	b.watchesClosed = true
	for _, m := range b.byJob {
		for w := range m {
			b.unwatch(w)
		}
	}
}
