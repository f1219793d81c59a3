package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
	"github.com/spoolq/spool/internal/store"
)

// ScheduleRequest defines a cron schedule as a client gives it.
type ScheduleRequest struct {
	// Name identifies the schedule: a name of at most
	// schedule.MaxNameLength characters.
	Name string
	// Timing says when it fires.
	Timing schedule.Timing
	// Misfire is the policy for missed ticks; empty means skip.
	Misfire schedule.Misfire
	// MaxCatchUp bounds the jobs catch_up fires at once; zero means
	// schedule.DefaultMaxCatchUp.
	MaxCatchUp int
	// Job is the template of the jobs it enqueues, in the wire form of an
	// enqueue body; it is stored byte for byte and decoded with
	// Config.DecodeJob at every firing.
	Job json.RawMessage
	// Paused creates (or keeps) the schedule paused.
	Paused bool
}

// ScheduleFired is a schedule's firing by hand.
type ScheduleFired struct {
	Schedule *job.Schedule
	Job      EnqueueResult
}

// SchedulePassLimit bounds the schedules one firing pass handles; a full
// pass is followed at once by another.
const SchedulePassLimit = 100

// PutSchedule creates or redefines a schedule. Invalid input gives an
// *job.InputError naming the field (job template fields as "job.kind").
// A new schedule, or one whose timing changed, starts at now: ticks
// before it are not missed ticks. created tells which it was.
func (e *Engine) PutSchedule(ctx context.Context, req ScheduleRequest) (s *job.Schedule, created bool, err error) {
	def, tt, err := e.checkSchedule(req)
	if err != nil {
		return nil, false, err
	}
	now := e.Now()
	restart := true
	if old, err := e.st.ScheduleGet(ctx, req.Name); err == nil {
		restart = old.Cron != def.Cron || old.Timezone != def.Timezone || old.Every != def.Every
		if !restart {
			def.LastTick = old.LastTick
		}
	} else if !errors.Is(err, job.ErrNotFound) {
		return nil, false, fmt.Errorf("put schedule: %w", err)
	}
	if restart {
		def.LastTick = now
	}
	def.NextRunAt = nextAfter(tt, def.LastTick, now)
	s, created, err = e.st.ScheduleUpsert(ctx, &store.ScheduleUpsertParams{Schedule: *def, Restart: restart, Now: now})
	if err != nil {
		return nil, false, fmt.Errorf("put schedule: %w", err)
	}
	e.scheduleChanged(s)
	return s, created, nil
}

// nextAfter is when a schedule whose newest handled tick is last next has
// something to do at now: its first tick after last (which may be due
// already), or its first tick after now.
func nextAfter(tt schedule.Timetable, last, now time.Time) time.Time {
	if n := tt.Next(last); !n.IsZero() && !n.After(now) {
		return n
	}
	return tt.Next(now)
}

// checkSchedule validates req and returns the definition to store with
// its timetable.
func (e *Engine) checkSchedule(req ScheduleRequest) (*job.Schedule, schedule.Timetable, error) {
	if !job.ValidName(req.Name) || len(req.Name) > schedule.MaxNameLength {
		return nil, nil, job.Invalid("name", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", schedule.MaxNameLength)
	}
	if req.Timing.Cron != "" && req.Timing.Timezone == "" {
		req.Timing.Timezone = "UTC"
	}
	tt, err := schedule.Parse(req.Timing)
	if err != nil {
		return nil, nil, err
	}
	misfire := req.Misfire
	if misfire == "" {
		misfire = schedule.MisfireSkip
	} else if !misfire.Valid() {
		return nil, nil, job.Invalid("misfire", "must be skip, run_once or catch_up")
	}
	catchUp := req.MaxCatchUp
	if catchUp == 0 {
		catchUp = schedule.DefaultMaxCatchUp
	} else if catchUp < 1 || catchUp > schedule.MaxCatchUp {
		return nil, nil, job.Invalid("max_catch_up", "must be between 1 and %d", schedule.MaxCatchUp)
	}
	if len(req.Job) == 0 {
		return nil, nil, job.Invalid("job", "is required: the job each tick enqueues, as POST /v1/jobs takes it")
	}
	if _, err := e.templateJob(req.Job, schedule.JobID(req.Name, time.Unix(0, 0)), e.Now()); err != nil {
		return nil, nil, err
	}
	return &job.Schedule{
		Name: req.Name, Cron: req.Timing.Cron, Timezone: req.Timing.Timezone, Every: req.Timing.Every,
		Misfire: string(misfire), MaxCatchUp: catchUp, Job: req.Job, Paused: req.Paused,
	}, tt, nil
}

// templateJob decodes and validates a schedule's job template and returns
// the job it makes with id at now, as prepare leaves it: applyQueueDefaults
// completes it before an insert. Errors name template fields "job.…".
func (e *Engine) templateJob(raw json.RawMessage, id string, now time.Time) (store.JobInsertParams, error) {
	var p store.JobInsertParams
	if e.cfg.DecodeJob == nil {
		return p, errors.New("make a schedule's job: the engine has no job decoder")
	}
	req, err := e.cfg.DecodeJob(raw)
	if err != nil {
		return p, err
	}
	switch {
	case req.ID != "":
		return p, job.Invalid("job.id", "must be left out: a schedule names its jobs itself, one id per tick")
	case !req.RunAt.IsZero():
		return p, job.Invalid("job.run_at", "must be left out: a scheduled job runs at its tick (delay_ms may put it later)")
	}
	req.ID = id
	field := func(name string) string { return "job." + name }
	if err := e.prepare(&req, &p, now, field); err != nil {
		return p, err
	}
	return p, nil
}

// GetSchedule returns one schedule or job.ErrNotFound.
func (e *Engine) GetSchedule(ctx context.Context, name string) (*job.Schedule, error) {
	if !job.ValidName(name) {
		return nil, fmt.Errorf("get schedule %q: %w", name, job.ErrNotFound)
	}
	s, err := e.st.ScheduleGet(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", err)
	}
	return s, nil
}

// ListSchedules returns every schedule, sorted by name.
func (e *Engine) ListSchedules(ctx context.Context) ([]*job.Schedule, error) {
	s, err := e.st.ScheduleList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return s, nil
}

// DeleteSchedule removes a schedule; the jobs it enqueued stay.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	if !job.ValidName(name) {
		return fmt.Errorf("delete schedule %q: %w", name, job.ErrNotFound)
	}
	if err := e.st.ScheduleDelete(ctx, name); err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	return nil
}

// PauseSchedule pauses (or, with paused false, resumes) a schedule. The
// ticks that pass while it is paused are missed ticks when it resumes: its
// misfire policy decides what becomes of them.
func (e *Engine) PauseSchedule(ctx context.Context, name string, paused bool) (*job.Schedule, error) {
	if !job.ValidName(name) {
		return nil, fmt.Errorf("pause schedule %q: %w", name, job.ErrNotFound)
	}
	s, err := e.st.ScheduleSetPaused(ctx, name, paused, e.Now())
	if err != nil {
		return nil, fmt.Errorf("pause schedule: %w", err)
	}
	e.scheduleChanged(s)
	return s, nil
}

// TriggerSchedule enqueues one job of a schedule now, whatever its ticks
// and pause (which it leaves as they are).
func (e *Engine) TriggerSchedule(ctx context.Context, name string) (*ScheduleFired, error) {
	s, err := e.GetSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	now := e.Now()
	p, err := e.templateJob(s.Job, job.NewID(now), now)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	jobs := []store.JobInsertParams{p}
	if err := e.applyQueueDefaults(ctx, jobs, now); err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	res, err := e.st.ScheduleFire(ctx, &store.ScheduleFireParams{Name: name, Manual: true, Jobs: jobs, Now: now})
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	e.inserted(res)
	if s, err = e.st.ScheduleGet(ctx, name); err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	r := res[0]
	return &ScheduleFired{Schedule: s, Job: EnqueueResult{ID: r.Job.ID, State: r.Job.State, RunAt: r.Job.RunAt, Duplicate: r.Duplicate}}, nil
}

// FireSchedules fires the schedules due at now, one job per tick their
// misfire policies let through, each tick's job with the id
// schedule.JobID gives it, so that a tick fired twice is a duplicate. It
// fires them in batches (ScheduleFireMany), so that a pass over many
// schedules costs the store a few transactions rather than one per
// schedule. It returns when the next schedule is due (now when it left
// some due) and a tally of the ticks it handled. Schedules that another
// node fired, or a user changed, in between are left to the next pass.
// The maintenance service runs it on the node that leads.
func (e *Engine) FireSchedules(ctx context.Context, now time.Time) (time.Time, schedule.Tally, error) {
	var tally schedule.Tally
	due, next, err := e.st.ScheduleDue(ctx, now, SchedulePassLimit)
	if err != nil {
		return time.Time{}, tally, fmt.Errorf("fire schedules: %w", err)
	}
	var errs []error
	var batch []*firing
	jobs := 0
	flush := func() {
		if len(batch) == 0 {
			return
		}
		errs = append(errs, e.fireBatch(ctx, batch, now, &tally))
		for _, f := range batch {
			if !f.moved && !f.Next.IsZero() && (next.IsZero() || f.Next.Before(next)) {
				next = f.Next
			}
		}
		batch, jobs = batch[:0], 0
	}
	for _, s := range due {
		f, err := e.plan(s, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("fire schedule %s: %w", s.Name, err))
			continue
		}
		if len(batch) > 0 && jobs+len(f.params.Jobs) > fireBatchJobs {
			flush()
		}
		batch = append(batch, f)
		jobs += len(f.params.Jobs)
	}
	flush()
	if len(due) >= SchedulePassLimit {
		next = now
	}
	return next, tally, errors.Join(errs...)
}

// fireBatchJobs bounds the jobs of one ScheduleFireMany; a schedule whose
// ticks make more goes in a call of its own.
const fireBatchJobs = 1000

// firing is one schedule's part in a pass.
type firing struct {
	schedule.Firing
	params *store.ScheduleFireParams
	// refused is why the ticks' jobs could not be made: they pass
	// without a job.
	refused error
	// moved is set once the store found the schedule moved on.
	moved bool
}

// plan decides the firing of schedule s at now and makes its jobs, as
// prepare leaves them: fireBatch applies the queues' defaults.
func (e *Engine) plan(s *job.Schedule, now time.Time) (*firing, error) {
	tt, err := schedule.ParseStored(schedule.Timing{Cron: s.Cron, Timezone: s.Timezone, Every: s.Every})
	if err != nil {
		return nil, err
	}
	f := &firing{Firing: schedule.Due(tt, s.LastTick, now, schedule.Misfire(s.Misfire), s.MaxCatchUp)}
	f.params = &store.ScheduleFireParams{Name: s.Name, Last: s.LastTick, Handled: f.Handled, Next: f.Next, Now: now}
	jobs := make([]store.JobInsertParams, 0, len(f.Fire))
	for _, tick := range f.Fire {
		p, err := e.templateJob(s.Job, schedule.JobID(s.Name, tick), now)
		if err != nil {
			f.refused = err
			return f, nil
		}
		jobs = append(jobs, p)
	}
	f.params.Jobs = jobs
	return f, nil
}

// fireBatch fires batch at now with one ScheduleFireMany and counts its
// ticks in tally. When the store refuses a job of the batch, it fires its
// schedules one by one, so that the refusal stays with its schedule.
func (e *Engine) fireBatch(ctx context.Context, batch []*firing, now time.Time, tally *schedule.Tally) error {
	// The jobs of the whole batch, so that each queue's defaults are read
	// once.
	n := 0
	for _, f := range batch {
		n += len(f.params.Jobs)
	}
	all := make([]store.JobInsertParams, 0, n)
	for _, f := range batch {
		all = append(all, f.params.Jobs...)
	}
	if err := e.applyQueueDefaults(ctx, all, now); err != nil {
		return fmt.Errorf("fire schedules: %w", err)
	}
	fires := make([]*store.ScheduleFireParams, len(batch))
	for i, f := range batch {
		k := len(f.params.Jobs)
		f.params.Jobs, all = all[:k:k], all[k:]
		fires[i] = f.params
	}
	res, err := e.st.ScheduleFireMany(ctx, fires)
	if refusal(err) {
		var errs []error
		for _, f := range batch {
			errs = append(errs, e.fireOne(ctx, f, tally))
		}
		return errors.Join(errs...)
	}
	if err != nil {
		return fmt.Errorf("fire schedules: %w", err)
	}
	var errs []error
	for i, f := range batch {
		if res[i].Moved {
			f.moved = true
			continue
		}
		e.inserted(res[i].Jobs)
		errs = append(errs, f.count(tally))
	}
	return errors.Join(errs...)
}

// fireOne fires one schedule of a batch that the store refused. When
// the store refuses its jobs (the template no longer fits the queue's
// settings, or their ids are taken), its ticks pass without a job rather
// than hold the schedule on them forever.
func (e *Engine) fireOne(ctx context.Context, f *firing, tally *schedule.Tally) error {
	res, err := e.st.ScheduleFire(ctx, f.params)
	if refusal(err) {
		f.refused = err
		f.params.Jobs = nil
		res, err = e.st.ScheduleFire(ctx, f.params)
	}
	if errors.Is(err, store.ErrScheduleMoved) {
		f.moved = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("fire schedule %s: %w", f.params.Name, err)
	}
	e.inserted(res)
	return f.count(tally)
}

// count counts the ticks of a firing the store recorded, and returns the
// refusal that made its ticks pass without a job.
func (f *firing) count(tally *schedule.Tally) error {
	if f.refused != nil {
		tally.AddSkipped(f.params.Name, f.Skipped+len(f.Fire))
		return fmt.Errorf("fire schedule %s: %d ticks passed without a job: %w", f.params.Name, len(f.Fire), f.refused)
	}
	tally.AddSkipped(f.params.Name, f.Skipped)
	tally.AddFired(f.params.Name, f.Fire, f.params.Now)
	return nil
}

// refusal reports whether err refuses the request itself (bad input, an
// id taken) rather than reports a failure to store it.
func refusal(err error) bool {
	var in *job.InputError
	return errors.As(err, &in) || errors.Is(err, job.ErrIDTaken)
}

// scheduleChanged wakes the service that fires schedules for s's next
// tick.
func (e *Engine) scheduleChanged(s *job.Schedule) {
	if e.cfg.OnSchedule != nil && !s.Paused && !s.NextRunAt.IsZero() {
		e.cfg.OnSchedule(s.NextRunAt)
	}
}
