package events

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Bounds of a bus.
const (
	// DefaultRingSize is how many of the latest events a bus keeps for
	// readers that resume and readers that fall behind.
	DefaultRingSize = 16_384
	// DefaultRingBytes bounds the bytes the kept events hold (see
	// eventBytes): with long errors the ring keeps fewer events.
	DefaultRingBytes = 16 << 20
	// MaxErrorBytes bounds the error an event carries: a longer one is cut
	// to its first MaxErrorBytes, on a character boundary. The job keeps
	// the whole of it.
	MaxErrorBytes = 4 << 10
	// wakeEvery is the shortest time between two wake-ups of the readers:
	// the first event after a quiet spell wakes them at once; the events
	// published within wakeEvery after it wake them once more, together.
	wakeEvery = 10 * time.Millisecond
)

// eventOverhead is what an event costs the ring besides its texts.
const eventOverhead = int(unsafe.Sizeof(Event{}))

// eventBytes is what e costs the ring: the event and its texts. (Type is
// one of the constant names; it costs nothing of its own.)
func eventBytes(e *Event) int {
	return eventOverhead + len(e.Job) + len(e.Queue) + len(e.ConsumerGroup) + len(e.Kind) + len(e.State) +
		len(e.Worker) + len(e.Error)
}

// Options size a bus.
type Options struct {
	// Size is how many of the latest events the bus keeps. Defaults to
	// DefaultRingSize.
	Size int
	// Bytes bounds what the kept events hold; the oldest go first. Defaults
	// to DefaultRingBytes.
	Bytes int
}

// Bus numbers events, keeps the latest in a ring, and lets readers follow
// it. It is safe for concurrent use; its zero value is not: make one with
// NewBus.
//
// Publish does work per event, never per reader: it appends to the ring
// under the write lock, hands the event to the waiters on its job (one map
// lookup) and signals the broadcaster, which wakes every waiting reader at
// once by closing a channel. Readers copy from the ring under the read
// lock, a bounded stretch at a time.
type Bus struct {
	epoch uint64

	mu       sync.RWMutex
	ring     []Event
	last     uint64 // the number of the latest event; 0 before the first
	oldest   uint64 // the number of the oldest event kept; last+1 when none is
	bytes    int    // what the kept events hold (eventBytes)
	maxBytes int
	closed   bool

	// wake is closed to wake the readers that wait, and replaced; kick
	// (one slot) tells the broadcaster that something was published.
	wake      atomic.Pointer[chan struct{}]
	kick      chan struct{}
	start     sync.Once
	stop      chan struct{}
	closeOnce sync.Once

	// watching counts the watches, so that a publish with none skips
	// their lock.
	watching      atomic.Int64
	watchMu       sync.Mutex
	byJob         map[string]map[*Watch]struct{}
	watchesClosed bool // under watchMu: the bus closed its watches
}

// NewBus returns a bus sized by o.
func NewBus(o Options) *Bus {
	if o.Size < 1 {
		o.Size = DefaultRingSize
	}
	if o.Bytes < 1 {
		o.Bytes = DefaultRingBytes
	}
	b := &Bus{epoch: newEpoch(), ring: make([]Event, o.Size), oldest: 1, maxBytes: o.Bytes,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), byJob: map[string]map[*Watch]struct{}{}}
	wake := make(chan struct{})
	b.wake.Store(&wake)
	return b
}

// Epoch is the bus's part of its events' IDs.
func (b *Bus) Epoch() uint64 { return b.epoch }

// Last is the ID of the latest event published; its Seq is 0 before the
// first.
func (b *Bus) Last() ID {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return ID{Bus: b.epoch, Seq: b.last}
}

// Publish numbers evs, cuts their errors to MaxErrorBytes, keeps them, and
// hands each to the watches of its job. Its cost does not depend on the
// number of readers, and it never waits for one. evs get their IDs.
func (b *Bus) Publish(evs []Event) {
	if len(evs) == 0 {
		return
	}
	for i := range evs {
		if len(evs[i].Error) > MaxErrorBytes {
			evs[i].Error = cutError(evs[i].Error)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	size := uint64(len(b.ring))
	for i := range evs {
		b.last++
		evs[i].ID = ID{Bus: b.epoch, Seq: b.last}
		if b.last-b.oldest >= size { // the slot holds the oldest event
			b.forgetOldest()
		}
		b.ring[b.last%size] = evs[i]
		b.bytes += eventBytes(&evs[i])
		for b.bytes > b.maxBytes && b.oldest < b.last {
			b.forgetOldest()
		}
	}
	if b.watching.Load() > 0 {
		b.deliverToWatches(evs)
	}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default: // a kick is pending: the broadcast it brings comes after these events
	}
}

// forgetOldest drops the oldest kept event. b.mu is held for writing and
// an event is kept.
func (b *Bus) forgetOldest() {
	slot := &b.ring[b.oldest%uint64(len(b.ring))]
	b.bytes -= eventBytes(slot)
	*slot = Event{} // let its texts go
	b.oldest++
}

// cutError is the first MaxErrorBytes of a longer error, on a character
// boundary, copied so that the ring does not hold the whole.
func cutError(s string) string {
	cut := MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.Clone(s[:cut])
}

// broadcast wakes the waiting readers after each publish, at most once
// every wakeEvery, until the bus closes. It runs from the first Follow.
func (b *Bus) broadcast() {
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	for {
		select {
		case <-b.kick:
		case <-b.stop:
			return
		}
		b.wakeReaders()
		pace.Reset(wakeEvery)
		select {
		case <-pace.C:
		case <-b.stop:
			pace.Stop()
			return
		}
	}
}

// wakeReaders wakes every reader waiting on the current wake channel.
func (b *Bus) wakeReaders() {
	next := make(chan struct{})
	close(*b.wake.Swap(&next))
}

// Close ends every reader and watch and refuses new ones, for a server
// shutting down: readers get ErrClosed, watches see their channels closed.
// It is idempotent.
func (b *Bus) Close() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
		b.wakeReaders()
		b.closeWatches()
	})
}
