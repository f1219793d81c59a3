package schedule

import "time"

// LateAfter is how long after its time a tick may fire and still count as
// on time in the server's logs and metrics. A server that keeps up fires
// a tick within milliseconds of its time; one later than this was held up
// (a busy store, a leader election, a restart) or caught up afterwards.
const LateAfter = time.Second

// tallyNames bounds the schedules a Tally names of each kind.
const tallyNames = 5

// Tally counts what became of the ticks that one pass of firing handled,
// for logs and metrics. Its zero value counts nothing.
type Tally struct {
	// Fired counts the ticks that enqueued their job (or found it
	// enqueued already).
	Fired int
	// Late counts the ticks of Fired that fired more than LateAfter after
	// their time, and MostLate is the longest of their delays.
	Late     int
	MostLate time.Duration
	// Skipped counts the ticks handled without a job of their own (see
	// Firing.Skipped), and the ticks whose job the server refused.
	Skipped int
	// LateSchedules and SkippedSchedules count the schedules with late or
	// skipped ticks; LateNames and SkippedNames name the first few.
	LateSchedules, SkippedSchedules int
	LateNames, SkippedNames         []string
}

// AddFired counts the ticks of schedule name that fired at now.
func (t *Tally) AddFired(name string, ticks []time.Time, now time.Time) {
	t.Fired += len(ticks)
	late := 0
	for _, tick := range ticks {
		if d := now.Sub(tick); d > LateAfter {
			late++
			t.MostLate = max(t.MostLate, d)
		}
	}
	if late > 0 {
		t.Late += late
		t.LateSchedules++
		if len(t.LateNames) < tallyNames {
			t.LateNames = append(t.LateNames, name)
		}
	}
}

// AddSkipped counts n ticks of schedule name handled without a job.
func (t *Tally) AddSkipped(name string, n int) {
	if n <= 0 {
		return
	}
	t.Skipped += n
	t.SkippedSchedules++
	if len(t.SkippedNames) < tallyNames {
		t.SkippedNames = append(t.SkippedNames, name)
	}
}
