package job

import (
	"fmt"
	"sort"
	"time"
)

// Rate is a limit on job starts: at most Limit starts in any window of
// Period. The zero Rate is no limit.
type Rate struct {
	Limit  int
	Period time.Duration
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r.Limit == 0 }

// Limits are a queue's flow control; a zero field sets no limit. They
// hold across every node that shares a store.
type Limits struct {
	// Rate bounds the starts of the queue's jobs.
	Rate Rate
	// MaxActive bounds the queue's jobs active at once.
	MaxActive int
	// GroupRate bounds the starts of each group's jobs, separately.
	GroupRate Rate
	// GroupMaxActive bounds each group's jobs active at once: 1 runs a
	// group's jobs one at a time, in claim order.
	GroupMaxActive int
	// Ordered makes each group an ordered group: its jobs go out one
	// at a time in claim order, and a job handed out holds its group until
	// it is finished, through failures, retries and expired leases (see
	// HoldsGroup). An ordered queue's GroupMaxActive is 1.
	Ordered bool
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool {
	return l.Rate.IsZero() && l.MaxActive == 0 && l.GroupRate.IsZero() && l.GroupMaxActive == 0 && !l.Ordered
}

// Grouped reports whether l limits groups.
func (l Limits) Grouped() bool { return !l.GroupRate.IsZero() || l.GroupMaxActive != 0 || l.Ordered }

// Normalized is l as stores keep it: an ordered queue's GroupMaxActive is
// 1.
func (l Limits) Normalized() Limits {
	if l.Ordered {
		l.GroupMaxActive = 1
	}
	return l
}

// HoldsGroup reports whether a job of an ordered queue in state s, handed
// out attempt times, holds its group: it was handed out and has not
// finished. Its group hands out no other job meanwhile, and the holding
// job itself goes out first whenever it is available again (after a
// retry's backoff, an expired lease or a release), so that a group's jobs
// finish in claim order. A first attempt handed back unrun (AfterRelease)
// leaves attempt 0: that job holds nothing, and keeps its place in claim
// order only.
func HoldsGroup(s State, attempt int) bool { return attempt > 0 && s.Pending() }

// Bounds of limits.
const (
	// MaxRateLimit bounds Rate.Limit: a store keeps the times of the
	// latest Limit starts. A faster rate takes a shorter period.
	MaxRateLimit = 100_000
	// MinRatePeriod and MaxRatePeriod bound Rate.Period.
	MinRatePeriod = time.Millisecond
	MaxRatePeriod = 24 * time.Hour
	// MaxActiveLimit bounds MaxActive and GroupMaxActive.
	MaxActiveLimit = 1_000_000
)

// Check refuses limits out of their ranges, with an *InputError naming
// the wire field ("rate.limit", "group_max_active", …).
func (l Limits) Check() error {
	for _, r := range []struct {
		field string
		rate  Rate
	}{{"rate", l.Rate}, {"group_rate", l.GroupRate}} {
		if r.rate.IsZero() && r.rate.Period == 0 {
			continue
		}
		if r.rate.Limit < 1 || r.rate.Limit > MaxRateLimit {
			return Invalid(r.field+".limit", "must be between 1 and %d", MaxRateLimit)
		}
		if r.rate.Period < MinRatePeriod || r.rate.Period > MaxRatePeriod || r.rate.Period%time.Millisecond != 0 {
			return Invalid(r.field+".period_ms", "must be between %d and %d", MinRatePeriod.Milliseconds(), MaxRatePeriod.Milliseconds())
		}
	}
	for _, m := range []struct {
		field string
		n     int
	}{{"max_active", l.MaxActive}, {"group_max_active", l.GroupMaxActive}} {
		if m.n < 0 || m.n > MaxActiveLimit {
			return Invalid(m.field, "must be between 1 and %d", MaxActiveLimit)
		}
	}
	if l.Ordered && l.GroupMaxActive > 1 {
		return Invalid("group_max_active", "must be 1 or left out in an ordered queue, whose groups run one job at a time")
	}
	return nil
}

// String describes l for logs.
func (l Limits) String() string {
	return fmt.Sprintf("rate %d/%v, max active %d, group rate %d/%v, group max active %d",
		l.Rate.Limit, l.Rate.Period, l.MaxActive, l.GroupRate.Limit, l.GroupRate.Period, l.GroupMaxActive)
}

// StartLog is the start times of the latest starts under a rate, oldest
// first, in Unix nanoseconds: what a store keeps to hold a rate exactly.
// A rate of N per period lets a job start at t when fewer than N of the
// latest starts lie in (t-period, t]. A log holds no start older than the
// period at its latest Add and at most N starts, so its size is bounded by
// both the rate and the starts it saw.
type StartLog []int64

// inWindow returns the index of the first start in (now-period, now].
func (l StartLog) inWindow(r Rate, now time.Time) int {
	since := now.Add(-r.Period).UnixNano()
	return sort.Search(len(l), func(i int) bool { return l[i] > since })
}

// Room returns how many jobs may start at now under r, and, when none may,
// the first moment one may. A zero r has no limit: room is -1.
func (l StartLog) Room(r Rate, now time.Time) (room int, next time.Time) {
	if r.IsZero() {
		return -1, time.Time{}
	}
	first := l.inWindow(r, now)
	room = r.Limit - (len(l) - first)
	if room > 0 {
		return room, time.Time{}
	}
	// The window holds Limit starts or more: one may start once the
	// start that leaves room behind it is out of the window.
	return 0, time.Unix(0, l[len(l)-r.Limit]).Add(r.Period).UTC()
}

// Add records starts at now under r and returns the log, without the
// starts it no longer needs. A start is never recorded before the latest
// one, so a clock that steps back makes the rate stricter, never looser.
func (l StartLog) Add(r Rate, now time.Time, starts int) StartLog {
	if r.IsZero() {
		return nil
	}
	at := now.UnixNano()
	if n := len(l); n > 0 && l[n-1] > at {
		at = l[n-1]
	}
	for range starts {
		l = append(l, at)
	}
	drop := max(l.inWindow(r, now), len(l)-r.Limit)
	if drop == len(l) {
		return l[:0]
	}
	return l[drop:]
}

// Idle reports whether no start of l counts under r at now: a store may
// drop the log.
func (l StartLog) Idle(r Rate, now time.Time) bool {
	return r.IsZero() || l.inWindow(r, now) == len(l)
}
