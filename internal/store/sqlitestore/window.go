package sqlitestore

import "sort"

// entry is one available job in a ready window: just what claim order needs.
type entry struct {
	priority int
	runAt    int64 // unix nanoseconds
	seq      int64
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

// window holds the first available jobs of one queue in claim order.
//
// Invariant: items[head:] is exactly the first len(items)-head available
// jobs of the queue in claim order. When complete is true there are no
// others; when false, more may wait in the database beyond the last item.
// Only the writer goroutine touches a window.
type window struct {
	items    []entry
	head     int
	complete bool
	capacity int
}

func newWindow(capacity int, complete bool) *window {
	return &window{capacity: capacity, complete: complete}
}

// len is the number of jobs in the window.
func (w *window) len() int { return len(w.items) - w.head }

// live returns the window's jobs in claim order. The slice is the window's
// own; callers must not keep it across changes.
func (w *window) live() []entry { return w.items[w.head:] }

// reset empties the window and marks it incomplete, so that the next claim
// refills it from the database.
func (w *window) reset() {
	w.items = w.items[:0]
	w.head = 0
	w.complete = false
}

// clear empties the window and marks it complete: the queue has no
// available job left.
func (w *window) clear() {
	w.items = w.items[:0]
	w.head = 0
	w.complete = true
}

// fill replaces the window with es (in claim order, the first available
// jobs of the queue); complete says whether they are all of them.
func (w *window) fill(es []entry, complete bool) {
	w.items = append(w.items[:0], es...)
	w.head = 0
	w.complete = complete
}

// add records that e became available, keeping the invariant.
func (w *window) add(e entry) {
	n := w.len()
	if !w.complete && (n == 0 || !e.before(w.items[len(w.items)-1])) {
		return // it ranks after the window: the database holds it
	}
	if w.head > 0 && len(w.items) == cap(w.items) {
		w.compact()
	}
	live := w.live()
	i := w.head + sort.Search(n, func(k int) bool { return e.before(live[k]) })
	w.items = append(w.items, entry{})
	copy(w.items[i+1:], w.items[i:])
	w.items[i] = e
	if w.len() > w.capacity {
		w.items = w.items[:len(w.items)-1]
		w.complete = false
	}
}

// remove drops e from the window if it is there.
func (w *window) remove(e entry) {
	live := w.live()
	i := sort.Search(len(live), func(k int) bool { return !live[k].before(e) })
	if i < len(live) && live[i].seq == e.seq {
		copy(live[i:], live[i+1:])
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
	w.items = w.items[:n]
	w.head = 0
}
