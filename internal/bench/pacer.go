package bench

import (
	"sync/atomic"
	"time"
)

// pacer hands out the send times of an open-loop load: request i is due at
// start + i/rate, whatever happened to the requests before it. A sender
// still busy at a request's due time measures it from the due time, not
// from when it got round to sending, so a stall on the server shows up in
// the percentiles instead of silently slowing the load down (coordinated
// omission); see loadgen.Call.Due. It is safe for concurrent use by many
// senders.
type pacer struct {
	start time.Time
	rate  float64 // requests per second
	limit int64   // most requests; 0 means no limit
	end   time.Time
	next  atomic.Int64
}

// newPacer paces rate requests a second from start, stopping after limit
// requests (0: no limit) or at the first due time not before start +
// duration (0: no limit). A pacer with neither bound runs until its
// caller stops asking.
func newPacer(start time.Time, rate float64, limit int64, duration time.Duration) *pacer {
	p := &pacer{start: start, rate: rate, limit: limit}
	if duration > 0 {
		p.end = start.Add(duration)
	}
	return p
}

// due is the send time of request i.
func (p *pacer) due(i int64) time.Time {
	return p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
}

// Next claims the next request: its index and due time, or ok false when
// the load is complete.
func (p *pacer) Next() (i int64, at time.Time, ok bool) {
	i = p.next.Add(1) - 1
	if p.limit > 0 && i >= p.limit {
		return i, time.Time{}, false
	}
	at = p.due(i)
	if !p.end.IsZero() && !at.Before(p.end) {
		return i, time.Time{}, false
	}
	return i, at, true
}

// Total is how many requests the pacer hands out in all, or -1 when it is
// unbounded.
func (p *pacer) Total() int64 {
	n := int64(-1)
	if !p.end.IsZero() {
		// The first i whose due time is not before end.
		n = int64(float64(p.end.Sub(p.start)) / float64(time.Second) * p.rate)
		for n > 0 && !p.due(n-1).Before(p.end) {
			n--
		}
		for p.due(n).Before(p.end) {
			n++
		}
	}
	if p.limit > 0 && (n < 0 || p.limit < n) {
		n = p.limit
	}
	return n
}
