package sqlkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Schedules keeps the cron schedules in a store's schedules table and
// fires them; it implements store.Scheduler.
type Schedules struct {
	d    *Dialect
	db   DB
	jobs Firings
	sql  scheduleSQL
}

// Firings is how a store writes the firings of schedules inside the write
// that fires them, so that a firing and its jobs commit together.
type Firings interface {
	// CheckJobs refuses jobs that no insert takes; it runs before the
	// write changes anything.
	CheckJobs(c Conn, jobs []store.JobInsertParams) error
	// InsertJobs inserts jobs checked by CheckJobs at now, through the
	// store's insert path.
	InsertJobs(ctx context.Context, c Conn, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error)
	// RecordFirings writes what each firing moves of its schedule.
	RecordFirings(ctx context.Context, c Conn, fired []Fired) error
}

// Fired is what a firing records of its schedule: LastTick becomes Tick
// and NextRunAt Next; when RanAt is not zero, LastRunAt becomes RanAt and
// LastJobID JobID, and otherwise both are kept.
type Fired struct {
	Name       string
	Tick, Next time.Time
	RanAt      time.Time
	JobID      string
}

// scheduleSQL are the statements of Schedules, spelt in one dialect.
type scheduleSQL struct {
	lock, byName, list, due, next, del, pause string
	// write stores a whole schedule, replacing the one of its name.
	write string
	// lockAll locks and reads the schedules named in a list, in name
	// order, so that two firings never wait on each other in a cycle.
	lockAll string
}

// scheduleColumns are the columns scanSchedule reads.
const scheduleColumns = `name, cron, timezone, every_ns, misfire, max_catch_up, job, paused, created_at, updated_at,
	last_tick, last_run_at, last_job_id, next_run_at`

// NewSchedules serves store.Scheduler on db, which speaks d, writing
// firings with jobs.
func NewSchedules(d *Dialect, db DB, jobs Firings) *Schedules {
	t := d.Prefix + "schedules"
	sel := `SELECT ` + scheduleColumns + ` FROM ` + t
	due := ` WHERE paused = {false} AND next_run_at IS NOT NULL AND next_run_at `
	return &Schedules{d: d, db: db, jobs: jobs, sql: scheduleSQL{
		lock:   d.render(d.Lock),
		byName: d.render(sel + ` WHERE name = $1`),
		list:   d.render(sel + ` ORDER BY name COLLATE {bytewise}`),
		due:    d.render(sel + d.indexed("schedules_due") + due + `<= $1 ORDER BY next_run_at LIMIT $2`),
		next:   d.render(`SELECT MIN(next_run_at) FROM ` + t + d.indexed("schedules_due") + due + `> $1`),
		del:    d.render(`DELETE FROM ` + t + ` WHERE name = $1`),
		pause:  d.render(`UPDATE ` + t + ` SET paused = $2, updated_at = $3 WHERE name = $1 RETURNING ` + scheduleColumns),
		write: d.render(`INSERT INTO ` + t + ` (` + scheduleColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, every_ns = excluded.every_ns,
	misfire = excluded.misfire, max_catch_up = excluded.max_catch_up, job = excluded.job, paused = excluded.paused,
	created_at = excluded.created_at, updated_at = excluded.updated_at, last_tick = excluded.last_tick,
	last_run_at = excluded.last_run_at, last_job_id = excluded.last_job_id, next_run_at = excluded.next_run_at
RETURNING ` + scheduleColumns),
		lockAll: d.render(sel + ` WHERE name {in} ORDER BY name COLLATE {bytewise}{forupdate}`),
	}}
}

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(r Row) (*job.Schedule, error) {
	var (
		s                 job.Schedule
		every, maxCatchUp int64
		lastJob           sql.NullString
	)
	if err := r.Scan(&s.Name, &s.Cron, &s.Timezone, &every, &s.Misfire, &maxCatchUp, &s.Job, &s.Paused,
		timeInto(&s.CreatedAt), timeInto(&s.UpdatedAt), timeInto(&s.LastTick), timeInto(&s.LastRunAt), &lastJob,
		timeInto(&s.NextRunAt)); err != nil {
		return nil, err
	}
	s.Every, s.MaxCatchUp, s.LastJobID = time.Duration(every), int(maxCatchUp), lastJob.String
	return &s, nil
}

// one reads the schedule that query returns, its first argument being
// the schedule's name: job.ErrNotFound when there is none.
func one(ctx context.Context, c Conn, query string, args ...any) (*job.Schedule, error) {
	var sc *job.Schedule
	err := c.Query(ctx, query, args, func(r Row) (err error) {
		if sc == nil {
			sc, err = scanSchedule(r)
		}
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("read schedule %s: %w", args[0], err)
	case sc == nil:
		return nil, fmt.Errorf("schedule %s: %w", args[0], job.ErrNotFound)
	}
	return sc, nil
}

// all reads every schedule that query returns.
func all(ctx context.Context, c Conn, query string, args ...any) ([]*job.Schedule, error) {
	var out []*job.Schedule
	err := c.Query(ctx, query, args, func(r Row) error {
		sc, err := scanSchedule(r)
		out = append(out, sc)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScheduleUpsert creates or redefines a schedule, as
// store.ScheduleUpsertParams.Stored decides, under the schedule's lock;
// see store.Scheduler.
func (s *Schedules) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*job.Schedule, bool, error) {
	var out *job.Schedule
	var created bool
	err := s.db.Write(ctx, 1, func(c Conn) error {
		if err := run(ctx, c, step{"lock schedule", s.sql.lock, []any{"schedule", p.Schedule.Name}}); err != nil {
			return err
		}
		old, err := one(ctx, c, s.sql.byName, p.Schedule.Name)
		if errors.Is(err, job.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return err
		}
		var def job.Schedule
		def, created = p.Stored(old)
		out, err = one(ctx, c, s.sql.write, def.Name, def.Cron, def.Timezone, int64(def.Every), def.Misfire,
			def.MaxCatchUp, []byte(def.Job), def.Paused, s.d.time(def.CreatedAt), s.d.time(def.UpdatedAt),
			s.d.time(def.LastTick), s.d.nullTime(def.LastRunAt), nullString(def.LastJobID), s.d.nullTime(def.NextRunAt))
		return err
	})
	if err != nil {
		return nil, false, s.db.Wrap("upsert schedule", err)
	}
	return out, created, nil
}

// ScheduleGet returns one schedule; see store.Scheduler.
func (s *Schedules) ScheduleGet(ctx context.Context, name string) (*job.Schedule, error) {
	c, err := s.db.Read()
	if err != nil {
		return nil, s.db.Wrap("get schedule", err)
	}
	sc, err := one(ctx, c, s.sql.byName, name)
	return sc, s.db.Wrap("get schedule", err)
}

// ScheduleList returns every schedule; see store.Scheduler.
func (s *Schedules) ScheduleList(ctx context.Context) ([]*job.Schedule, error) {
	c, err := s.db.Read()
	if err != nil {
		return nil, s.db.Wrap("list schedules", err)
	}
	out, err := all(ctx, c, s.sql.list)
	return out, s.db.Wrap("list schedules", err)
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (s *Schedules) ScheduleDelete(ctx context.Context, name string) error {
	return s.db.Wrap("delete schedule", s.db.WriteAlone(ctx, func(c Conn) error {
		n, err := c.Exec(ctx, s.sql.del, name)
		if err == nil && n == 0 {
			err = fmt.Errorf("schedule %s: %w", name, job.ErrNotFound)
		}
		return err
	}))
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (s *Schedules) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*job.Schedule, error) {
	var sc *job.Schedule
	err := s.db.WriteAlone(ctx, func(c Conn) (err error) {
		sc, err = one(ctx, c, s.sql.pause, name, paused, s.d.time(now))
		return err
	})
	if err != nil {
		return nil, s.db.Wrap("pause schedule", err)
	}
	return sc, nil
}

// ScheduleDue returns the schedules due at now; see store.Scheduler.
func (s *Schedules) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*job.Schedule, time.Time, error) {
	c, err := s.db.Read()
	if err != nil {
		return nil, time.Time{}, s.db.Wrap("read due schedules", err)
	}
	due, err := all(ctx, c, s.sql.due, s.d.time(now), limit)
	var next time.Time
	if err == nil {
		_, err = queryRow(ctx, c, s.sql.next, []any{s.d.time(now)}, timeInto(&next))
	}
	if err != nil {
		return nil, time.Time{}, s.db.Wrap("read due schedules", err)
	}
	return due, next, nil
}

// ScheduleFire inserts the jobs of a firing and records it, under the
// schedule's row lock, so that two nodes never fire one tick; see
// store.Scheduler.
func (s *Schedules) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]store.InsertResult, error) {
	res, err := s.fire(ctx, []*store.ScheduleFireParams{p})
	if err != nil {
		return nil, s.db.Wrap("fire schedule", err)
	}
	jobs, err := p.FireOne(res[0])
	return jobs, s.db.Wrap("fire schedule", err)
}

// ScheduleFireMany fires several schedules in one write: one statement
// locks and reads them, one insert takes the jobs of all, one record
// moves every schedule that fires; see store.Scheduler.
func (s *Schedules) ScheduleFireMany(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if err := store.CheckFireMany(fires); err != nil {
		return nil, fmt.Errorf("fire schedules: %w", err)
	}
	out, err := s.fire(ctx, fires)
	return out, s.db.Wrap("fire schedules", err)
}

// fire fires the schedules of fires in one write, under their row locks.
// A schedule that is gone (or, unless Manual, moved) is left out with
// Moved set; so is a later firing of a schedule fired earlier in fires
// unless it still applies to the schedule as the earlier one left it.
func (s *Schedules) fire(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	names := make([]string, len(fires))
	weight := 0
	for i, p := range fires {
		names[i] = p.Name
		weight += max(len(p.Jobs), 1)
	}
	var out []store.ScheduleFireResult
	err := s.db.Write(ctx, weight, func(c Conn) error {
		for _, p := range fires {
			if err := s.jobs.CheckJobs(c, p.Jobs); err != nil {
				return fmt.Errorf("fire schedule %s: %w", p.Name, err)
			}
		}
		found, err := all(ctx, c, s.sql.lockAll, s.d.List(names))
		if err != nil {
			return fmt.Errorf("lock schedules: %w", err)
		}
		current := make(map[string]*job.Schedule, len(found))
		for _, sc := range found {
			current[sc.Name] = sc
		}
		out = make([]store.ScheduleFireResult, len(fires))
		var fired []Fired
		var firing []int // indexes of the fires that fire
		var jobs []store.JobInsertParams
		for i, p := range fires {
			at := *p
			at.Last, at.Handled = s.d.trunc(p.Last), s.d.trunc(p.Handled)
			sc := current[p.Name]
			if sc == nil {
				out[i].Moved = true
				continue
			}
			tick, next, err := at.Fires(sc)
			if errors.Is(err, store.ErrScheduleMoved) {
				out[i].Moved = true
				continue
			}
			moved := *sc
			moved.LastTick, moved.NextRunAt = tick, next
			current[p.Name] = &moved
			fired = append(fired, Fired{Name: p.Name, Tick: tick, Next: next})
			firing = append(firing, i)
			jobs = append(jobs, p.Jobs...)
		}
		if len(firing) == 0 {
			return nil
		}
		if len(jobs) > 0 {
			res, err := s.jobs.InsertJobs(ctx, c, jobs, fires[firing[0]].Now)
			if err != nil {
				return err
			}
			for _, i := range firing {
				n := len(fires[i].Jobs)
				out[i].Jobs, res = res[:n:n], res[n:]
			}
		}
		for k, i := range firing {
			if id, ok := fires[i].Ran(out[i].Jobs); ok {
				fired[k].RanAt, fired[k].JobID = fires[i].Now, id
			}
		}
		return s.jobs.RecordFirings(ctx, c, fired)
	})
	return out, err
}
