package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// Scheduler keeps cron schedules: their definitions, and how far each has
// fired. The store does not read cron expressions: the engine decides
// which ticks are due (package schedule) and the store records, in one
// atomic step with the jobs those ticks enqueue, that they were handled.
type Scheduler interface {
	// ScheduleUpsert stores p.Schedule under its name, creating it
	// (created=true) or replacing the definition of the one there. A
	// replaced schedule keeps its LastTick, LastRunAt and LastJobID unless
	// p.Restart is set, which sets LastTick to p.Schedule.LastTick: the
	// engine restarts a schedule whose timing changed. With p.Exact every
	// field is stored as given. It returns the schedule as stored.
	ScheduleUpsert(ctx context.Context, p *ScheduleUpsertParams) (s *job.Schedule, created bool, err error)
	// ScheduleGet returns one schedule or job.ErrNotFound.
	ScheduleGet(ctx context.Context, name string) (*job.Schedule, error)
	// ScheduleList returns every schedule, sorted by name.
	ScheduleList(ctx context.Context) ([]*job.Schedule, error)
	// ScheduleDelete removes a schedule (job.ErrNotFound if unknown). The
	// jobs it enqueued stay.
	ScheduleDelete(ctx context.Context, name string) error
	// ScheduleSetPaused pauses or resumes a schedule and returns it
	// (job.ErrNotFound if unknown). Ticks that pass while it is paused
	// are missed ticks when it resumes.
	ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*job.Schedule, error)
	// ScheduleFire inserts p.Jobs as JobInsertMany does and records the
	// firing, atomically: LastTick becomes p.Handled, NextRunAt p.Next,
	// and, when p.Jobs is not empty, LastRunAt p.Now and LastJobID the id
	// of the last job. It fires only a schedule whose LastTick is still
	// p.Last and that is not paused; otherwise it changes nothing and
	// returns ErrScheduleMoved (another node fired it, or a user changed
	// or paused it in between). With p.Manual set (a trigger by hand)
	// neither condition applies and LastTick and NextRunAt are kept.
	ScheduleFire(ctx context.Context, p *ScheduleFireParams) ([]InsertResult, error)
	// ScheduleFireMany fires several schedules in one atomic step, each
	// as ScheduleFire would (none of them Manual), so that a pass over
	// many due schedules costs the store one transaction. A schedule that
	// is not where the caller saw it is left alone, and its result says
	// Moved; the others fire. Any other error (a job refused, a failure
	// to write) fires none of them and changes nothing. The fires are
	// made at one moment: their jobs are inserted at the first one's Now.
	// The results are in the order of fires.
	ScheduleFireMany(ctx context.Context, fires []*ScheduleFireParams) ([]ScheduleFireResult, error)
	// ScheduleDue returns up to limit schedules that are not paused and
	// whose NextRunAt is not after now, earliest first, and the earliest
	// NextRunAt of the other schedules that are not paused (zero when
	// there is none).
	ScheduleDue(ctx context.Context, now time.Time, limit int) (due []*job.Schedule, next time.Time, err error)
}

// ErrScheduleMoved is ScheduleFire's answer when the schedule is no
// longer where the caller saw it: paused, redefined, deleted or fired by
// another node. The caller reads it again.
var ErrScheduleMoved = errors.New("schedule moved on")

// ScheduleUpsertParams creates or redefines a schedule.
type ScheduleUpsertParams struct {
	// Schedule is the definition. Its LastTick is where a new (or
	// restarted) schedule starts; LastRunAt and LastJobID are ignored.
	Schedule job.Schedule
	// Restart sets LastTick of an existing schedule too.
	Restart bool
	// Exact stores the schedule exactly as given, every time and
	// LastJobID included, whether or not it exists (a copy between
	// stores); Restart and Now are then ignored.
	Exact bool
	Now   time.Time
}

// ScheduleFireParams records a firing of a schedule.
type ScheduleFireParams struct {
	Name string
	// Last is the LastTick the caller read; Handled the newest tick it
	// handled now; Next the tick after now.
	Last    time.Time
	Handled time.Time
	Next    time.Time
	// Jobs are the jobs of the ticks fired (none when all were skipped).
	Jobs []JobInsertParams
	// Manual marks a firing by hand: it enqueues Jobs whatever the
	// schedule's ticks and pause, and moves neither.
	Manual bool
	// Enqueued, when set, is recorded as LastJobID (and Now as LastRunAt)
	// in place of the last of Jobs: the id of a job the caller enqueued
	// elsewhere as part of this firing (a memory job, kept apart from the
	// durable store that keeps schedules).
	Enqueued string
	Now      time.Time
}

// ScheduleFireResult is the outcome of one schedule's firing in
// ScheduleFireMany.
type ScheduleFireResult struct {
	// Moved is set when the schedule was not where the caller saw it (see
	// ErrScheduleMoved): nothing of its firing was written.
	Moved bool
	// Jobs are the results of its inserts, in the order of its Jobs.
	Jobs []InsertResult
}

// Stored decides an upsert: the schedule to write, given old, the one
// of its name the store holds (nil when none), and whether that creates
// it (see Scheduler.ScheduleUpsert). Every store calls it, so that the
// rule is written once.
func (p *ScheduleUpsertParams) Stored(old *job.Schedule) (s job.Schedule, created bool) {
	s = p.Schedule
	if p.Exact {
		return s, old == nil
	}
	s.UpdatedAt = p.Now
	if old == nil {
		s.CreatedAt, s.LastRunAt, s.LastJobID = p.Now, time.Time{}, ""
		return s, true
	}
	s.CreatedAt, s.LastRunAt, s.LastJobID = old.CreatedAt, old.LastRunAt, old.LastJobID
	if !p.Restart {
		s.LastTick = old.LastTick
	}
	return s, false
}

// CheckFireMany refuses fires that ScheduleFireMany may not make: a
// firing by hand goes through ScheduleFire.
func CheckFireMany(fires []*ScheduleFireParams) error {
	for _, p := range fires {
		if p.Manual {
			return fmt.Errorf("%s: a firing by hand goes through ScheduleFire", p.Name)
		}
	}
	return nil
}

// FireOne is what ScheduleFire answers for firing p, given its result as
// ScheduleFireMany makes it (but for a Manual p): a schedule that is gone
// is job.ErrNotFound to a firing by hand, and ErrScheduleMoved to any
// other.
func (p *ScheduleFireParams) FireOne(r ScheduleFireResult) ([]InsertResult, error) {
	switch {
	case r.Moved && p.Manual:
		return nil, fmt.Errorf("schedule %s: %w", p.Name, job.ErrNotFound)
	case r.Moved:
		return nil, fmt.Errorf("schedule %s: %w", p.Name, ErrScheduleMoved)
	}
	return r.Jobs, nil
}

// Fires decides a firing of current, the schedule as the store holds it
// inside the firing's transaction: the LastTick and NextRunAt to record,
// or ErrScheduleMoved when the schedule is not where the caller saw it
// (see Scheduler.ScheduleFire). Every store calls it, so that the rule is
// written once.
func (p *ScheduleFireParams) Fires(current *job.Schedule) (lastTick, next time.Time, err error) {
	if p.Manual {
		return current.LastTick, current.NextRunAt, nil
	}
	if current.Paused || !current.LastTick.Equal(p.Last) {
		return time.Time{}, time.Time{}, ErrScheduleMoved
	}
	return p.Handled, p.Next, nil
}

// Ran is the run a firing records, given the results of its inserts:
// ok is false when it enqueued nothing, and LastRunAt and LastJobID are
// kept.
func (p *ScheduleFireParams) Ran(results []InsertResult) (jobID string, ok bool) {
	switch {
	case p.Enqueued != "":
		return p.Enqueued, true
	case len(results) > 0:
		return results[len(results)-1].Job.ID, true
	}
	return "", false
}
