package sqlitestore

import (
	"sort"

	"github.com/spoolq/spool/internal/job"
)

// entry is one available job in a ready window: what claim order needs,
// and the job itself when the window caches it.
type entry struct {
	priority int
	runAt    int64 // unix nanoseconds
	seq      int64
	// body is the whole job as inserted, kept so that a claim soon after
	// the insert needs no read; nil when not cached. Never changed once set.
	body *job.Job
}

// before reports whether e is claimed before o: higher priority first, then
// earlier run time, then enqueue order.
func (e entry) before(o entry) bool {
	if e.priority != o.priority {
		return e.priority > o.priority
	}
	if e.runAt != o.runAt {
		return e.runAt < o.runAt
	}
	return e.seq < o.seq
}

// bodyCache bounds the memory that windows spend on cached jobs, across
// every queue.
type bodyCache struct {
	used, limit int64
}

// cost is the memory a cached job takes, roughly.
func cost(j *job.Job) int64 {
	n := 320 + len(j.ID) + len(j.Queue) + len(j.Kind) + len(j.Payload) + len(j.UniqueKey)
	for _, t := range j.Tags {
		n += 16 + len(t)
	}
	return int64(n)
}

// keep reports whether e's body may stay cached and accounts for it; when
// the budget is spent the body is dropped.
func (c *bodyCache) keep(e *entry) {
	if e.body == nil || c == nil {
		e.body = nil
		return
	}
	n := cost(e.body)
	if c.used+n > c.limit {
		e.body = nil
		return
	}
	c.used += n
}

// reset forgets every body kept: the windows were dropped.
func (c *bodyCache) reset() { c.used = 0 }

// release returns the budget of e's body.
func (c *bodyCache) release(e entry) {
	if e.body != nil && c != nil {
		c.used -= cost(e.body)
	}
}

// window holds the first available jobs of one queue in claim order.
//
// Invariant: items[head:] are exactly the queue's available, not leased
// jobs whose key ranks at or before the window's bound, in claim order.
// The bound is "everything" when complete is set, the key after when
// bounded is set, and "nothing" otherwise (a fresh window that has not
// been filled: every job is in the database only). Only the writer
// goroutine touches a window.
type window struct {
	items    []entry
	head     int
	complete bool
	bounded  bool
	after    entry
	capacity int
	cache    *bodyCache
}

func newWindow(capacity int, complete bool, cache *bodyCache) *window {
	return &window{capacity: capacity, complete: complete, cache: cache}
}

// len is the number of jobs in the window.
func (w *window) len() int { return len(w.items) - w.head }

// live returns the window's jobs in claim order. The slice is the window's
// own; callers must not keep it across changes.
func (w *window) live() []entry { return w.items[w.head:] }

// covers reports whether a job with key e falls within the window's bound.
func (w *window) covers(e entry) bool {
	return w.complete || w.bounded && !w.after.before(e)
}

// dropAll empties the window, returning the budget of its bodies.
func (w *window) dropAll() {
	for _, e := range w.live() {
		w.cache.release(e)
	}
	clear(w.items)
	w.items = w.items[:0]
	w.head = 0
}

// reset empties the window and forgets its bound, so that the next claim
// refills it from the start of the queue.
func (w *window) reset() {
	w.dropAll()
	w.complete, w.bounded = false, false
}

// clear empties the window and marks it complete: the queue has no
// available job left.
func (w *window) clear() {
	w.dropAll()
	w.complete, w.bounded = true, false
}

// extend appends es, the next jobs in claim order after the window's bound
// as read from the database up to the key last (es leaves out the leased
// ones), and moves the bound to last, or to everything when complete.
func (w *window) extend(es []entry, complete bool, last entry) {
	if w.head > 0 {
		w.compact()
	}
	w.items = append(w.items, es...)
	w.complete = complete
	if !complete {
		w.bounded, w.after = true, last
	}
}

// add records that e became available, keeping the invariant.
func (w *window) add(e entry) {
	if !w.covers(e) {
		return // it ranks after the window: the database holds it
	}
	w.cache.keep(&e)
	if w.head > 0 && len(w.items) == cap(w.items) {
		w.compact()
	}
	n := w.len()
	live := w.live()
	i := w.head + sort.Search(n, func(k int) bool { return e.before(live[k]) })
	w.items = append(w.items, entry{})
	copy(w.items[i+1:], w.items[i:])
	w.items[i] = e
	if w.len() > w.capacity {
		last := w.items[len(w.items)-1]
		w.cache.release(last)
		w.items[len(w.items)-1] = entry{}
		w.items = w.items[:len(w.items)-1]
		w.complete = false
		w.bounded, w.after = true, w.items[len(w.items)-1]
	}
}

// remove drops e from the window if it is there.
func (w *window) remove(e entry) {
	live := w.live()
	i := sort.Search(len(live), func(k int) bool { return !live[k].before(e) })
	if i < len(live) && live[i].seq == e.seq {
		w.cache.release(live[i])
		copy(live[i:], live[i+1:])
		w.items[len(w.items)-1] = entry{}
		w.items = w.items[:len(w.items)-1]
	}
}

// peek returns the first job of the window; ok is false when it is empty.
func (w *window) peek() (e entry, ok bool) {
	if w.head == len(w.items) {
		return entry{}, false
	}
	return w.items[w.head], true
}

// pop removes the first job of the window.
func (w *window) pop() {
	w.cache.release(w.items[w.head])
	w.items[w.head] = entry{}
	w.head++
	if w.head == len(w.items) {
		w.items = w.items[:0]
		w.head = 0
	}
}

// compact moves the live jobs to the front of items, so that head is 0.
func (w *window) compact() {
	if w.head == 0 {
		return
	}
	n := copy(w.items, w.items[w.head:])
	clear(w.items[n:])
	w.items = w.items[:n]
	w.head = 0
}
