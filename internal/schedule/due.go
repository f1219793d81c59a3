package schedule

import (
	"strconv"
	"time"
)

// Misfire is what a schedule does about ticks that passed while nothing
// fired them: the server was down, the schedule paused, the leader
// changing.
type Misfire string

// The misfire policies.
const (
	// MisfireSkip fires only ticks that are on time (see Grace); missed
	// ones are dropped and the schedule goes on with the next tick. The
	// default.
	MisfireSkip Misfire = "skip"
	// MisfireRunOnce fires one job for all the ticks missed, at the
	// newest of them.
	MisfireRunOnce Misfire = "run_once"
	// MisfireCatchUp fires one job per missed tick, the newest
	// MaxCatchUp of them.
	MisfireCatchUp Misfire = "catch_up"
)

// Valid reports whether m is a known policy.
func (m Misfire) Valid() bool {
	return m == MisfireSkip || m == MisfireRunOnce || m == MisfireCatchUp
}

// Grace is how late a tick may be fired and still count as on time under
// MisfireSkip: long enough for a leader to be elected again after a crash
// and for a busy scheduler to get to it.
const Grace = time.Minute

// Limits of catch-up.
const (
	// DefaultMaxCatchUp is how many missed ticks catch_up fires unless the
	// schedule says otherwise.
	DefaultMaxCatchUp = 100
	// MaxCatchUp bounds max_catch_up.
	MaxCatchUp = 10_000
)

// Firing is what Due decides for one schedule at a moment.
type Firing struct {
	// Fire are the ticks to fire, oldest first.
	Fire []time.Time
	// Handled is the newest tick looked at, fired or not: the schedule's
	// new last tick (its old one when nothing was due).
	Handled time.Time
	// Next is the first tick after now, zero when there is none.
	Next time.Time
	// Skipped counts the ticks after the old last tick and not after
	// Handled that Fire leaves out: the missed ticks the misfire policy
	// dropped (skip), folded into one job (run_once) or left past
	// max_catch_up (catch_up). A cron expression counts at most
	// MaxCounted of them a call; a fixed interval counts them all.
	Skipped int
}

// MaxCounted bounds the skipped ticks of a cron expression that one call
// of Due counts, so that a schedule ticking every second that was paused
// for a year costs a bounded number of ticks to look at.
const MaxCounted = 10_000

// Due returns what to fire at now for a schedule whose newest tick
// handled is last (the moment it was created or resumed, for a schedule
// that never fired). Every tick after last and not after now is handled
// by the call: the caller fires the returned ticks and records Handled as
// the new last, in one atomic step, so that a tick is fired once across
// crashes and leader changes.
func Due(tt Timetable, last, now time.Time, policy Misfire, maxCatchUp int) Firing {
	keep := 1 // the newest ticks that can fire
	if policy == MisfireCatchUp {
		keep = max(maxCatchUp, 1)
	}
	passed, next := newest(tt, since(tt, last, now, keep), now, keep)
	if len(passed) == 0 {
		return Firing{Handled: last, Next: next}
	}
	f := Firing{Fire: passed, Handled: passed[len(passed)-1], Next: next}
	switch policy {
	case MisfireRunOnce:
		f.Fire = passed[len(passed)-1:]
	case MisfireCatchUp:
	default:
		f.Fire = passed[len(passed)-1:]
		if now.Sub(f.Handled) > Grace {
			f.Fire = nil
		}
	}
	f.Skipped = count(tt, last, f.Handled, MaxCounted+len(f.Fire)) - len(f.Fire)
	return f
}

// count returns how many ticks of tt lie after from and not after to:
// all of them for a fixed interval, at most limit for any other timing.
func count(tt Timetable, from, to time.Time, limit int) int {
	if d, ok := tt.(interval); ok {
		return int(d.multiples(to) - d.multiples(from))
	}
	n := 0
	for t := tt.Next(from); n < limit && !t.IsZero() && !t.After(to); t = tt.Next(t) {
		n++
	}
	return n
}

// since returns where to start looking for the newest keep ticks up to
// now: last, or a later moment when keep ticks lie after it already, so
// that a schedule down for a year with a tick every second costs keep
// ticks to look at, not thirty million.
func since(tt Timetable, last, now time.Time, keep int) time.Time {
	for span := Grace; ; span *= 2 {
		start := now.Add(-span)
		if !start.After(last) {
			return last
		}
		n := 0
		for t := tt.Next(start); !t.IsZero() && !t.After(now); t = tt.Next(t) {
			if n++; n >= keep {
				return start
			}
		}
	}
}

// newest returns the newest keep ticks after from and not after now,
// oldest first, and the first tick after now.
func newest(tt Timetable, from, now time.Time, keep int) (ticks []time.Time, next time.Time) {
	t := from
	for {
		t = tt.Next(t)
		if t.IsZero() || t.After(now) {
			return ticks, t
		}
		if len(ticks) == keep {
			copy(ticks, ticks[1:])
			ticks = ticks[:keep-1]
		}
		ticks = append(ticks, t)
	}
}

// JobID is the id of the job that a schedule's tick enqueues: the same
// for every node and every retry of the tick, so that a tick fired twice
// (by a leader that crashed after its commit, say) is a duplicate the
// second time, never a second job.
func JobID(name string, tick time.Time) string {
	return name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}

// MaxNameLength bounds a schedule's name, so that its tick job ids stay
// within job.MaxNameLength.
const MaxNameLength = 100
