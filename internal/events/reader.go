package events

import "errors"

// The ends of a Read.
var (
	// ErrBehind: the ring overtook the reader, so events it had not read
	// are no longer kept. The reader goes on from the oldest event kept.
	ErrBehind = errors.New("events: the reader fell behind the bus's ring")
	// ErrClosed: the bus closed (the server is shutting down).
	ErrClosed = errors.New("events: the bus is closed")
)

// scanLimit bounds the events one Read looks at, so that a reader holds
// the bus's read lock for a bounded time whatever its filter lets pass.
const scanLimit = 1024

// Reader follows a bus from its own cursor, at its own pace: it costs the
// bus nothing while it does not read, and holds no events of its own
// between reads. A reader is used by one goroutine at a time.
type Reader struct {
	bus    *Bus
	filter Filter
	next   uint64 // the number of the next event to look at
}

// Follow starts a reader of the events f lets through. Without resume it
// reads the events published from now on. With resume it reads those
// after the event after names: from the oldest kept when after is the
// zero ID; from the one after it when it is an ID of this bus. gap reports
// that events after it are not kept: the ring overtook it, or it is
// another bus's ID (of an earlier run of the server, of another node),
// which tells nothing of this bus's events. The reader then starts from
// the oldest event kept.
func (b *Bus) Follow(f Filter, resume bool, after ID) (r *Reader, gap bool) {
	b.start.Do(func() { go b.broadcast() })
	b.mu.RLock()
	defer b.mu.RUnlock()
	r = &Reader{bus: b, filter: f, next: b.last + 1}
	if !resume {
		return r, false
	}
	switch {
	case after == ID{}:
		r.next, gap = b.oldest, b.oldest > 1
	case after.Bus != b.epoch:
		r.next, gap = b.oldest, true
	case after.Seq >= b.last:
		// Nothing after it yet: live events.
	case after.Seq+1 < b.oldest:
		r.next, gap = b.oldest, true
	default:
		r.next = after.Seq + 1
	}
	return r, gap
}

// Position is the ID of the last event the reader looked at, whether it
// passed the filter or not (ID.Seq 0 before the first): a reader that
// resumes after it misses nothing it would have got.
func (r *Reader) Position() ID { return ID{Bus: r.bus.epoch, Seq: r.next - 1} }

// Read copies the next events that pass the reader's filter into
// dst[:0]: at most cap(dst) of them and, past the first, at most maxBytes
// (see eventBytes), looking at no more than scanLimit events; the events
// share their texts with the ring, which never changes them. When it has
// looked at every event published, it also returns wait, a channel closed
// once more may have come; otherwise wait is nil and the reader should
// read again. It returns ErrBehind once when the ring overtook the reader
// (it then goes on from the oldest event kept), and ErrClosed once the bus
// is closed. dst must have room for one event.
func (r *Reader) Read(dst []Event, maxBytes int) (evs []Event, wait <-chan struct{}, err error) {
	if cap(dst) == 0 {
		panic("events: Read needs room for an event")
	}
	b := r.bus
	// Take the wake channel before looking: whatever is published after
	// the look is followed by a broadcast that closes it, or closed it.
	wake := *b.wake.Load()
	evs = dst[:0]
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return evs, nil, ErrClosed
	}
	if r.next < b.oldest {
		r.next = b.oldest
		return evs, nil, ErrBehind
	}
	end := min(b.last, r.next+scanLimit-1)
	size := 0
	for ; r.next <= end && len(evs) < cap(evs); r.next++ {
		e := &b.ring[r.next%uint64(len(b.ring))]
		if !r.filter.Passes(e) {
			continue
		}
		n := eventBytes(e)
		if len(evs) > 0 && size+n > maxBytes {
			break
		}
		evs = append(evs, *e)
		size += n
	}
	if r.next > b.last {
		return evs, wake, nil
	}
	return evs, nil, nil
}
