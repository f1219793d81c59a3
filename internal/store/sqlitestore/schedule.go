package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	scheduleColumns = `name, cron, timezone, every_ns, misfire, max_catch_up, job, paused, created_at, updated_at,
	last_tick, last_run_at, last_job_id, next_run_at`
	sqlScheduleByName = `SELECT ` + scheduleColumns + ` FROM schedules WHERE name = ?`
	sqlScheduleList   = `SELECT ` + scheduleColumns + ` FROM schedules ORDER BY name`
	sqlScheduleDue    = `SELECT ` + scheduleColumns + ` FROM schedules INDEXED BY schedules_due
WHERE paused = 0 AND next_run_at IS NOT NULL AND next_run_at <= ? ORDER BY next_run_at LIMIT ?`
	sqlScheduleNext = `SELECT MIN(next_run_at) FROM schedules INDEXED BY schedules_due
WHERE paused = 0 AND next_run_at IS NOT NULL AND next_run_at > ?`
	// sqlScheduleWrite stores a whole schedule, replacing the one of its
	// name.
	sqlScheduleWrite = `INSERT OR REPLACE INTO schedules (` + scheduleColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING ` + scheduleColumns
	sqlScheduleDelete = `DELETE FROM schedules WHERE name = ?`
	sqlSchedulePause  = `UPDATE schedules SET paused = ?, updated_at = ? WHERE name = ? RETURNING ` + scheduleColumns
	sqlScheduleFired  = `UPDATE schedules SET last_tick = ?, next_run_at = ?,
	last_run_at = COALESCE(?, last_run_at), last_job_id = COALESCE(?, last_job_id) WHERE name = ?`
)

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(sc scanner) (*job.Schedule, error) {
	var (
		s                          job.Schedule
		every, maxCatchUp          int64
		paused                     bool
		created, updated, lastTick int64
		lastRun, next              sql.NullInt64
		lastJob                    sql.NullString
	)
	if err := sc.Scan(&s.Name, &s.Cron, &s.Timezone, &every, &s.Misfire, &maxCatchUp, &s.Job, &paused, &created, &updated,
		&lastTick, &lastRun, &lastJob, &next); err != nil {
		return nil, err
	}
	s.Every, s.MaxCatchUp, s.Paused = time.Duration(every), int(maxCatchUp), paused
	s.CreatedAt, s.UpdatedAt, s.LastTick = fromNanos(created), fromNanos(updated), fromNanos(lastTick)
	s.LastRunAt, s.NextRunAt, s.LastJobID = nullTime(lastRun), nullTime(next), lastJob.String
	return &s, nil
}

// timeOrNull is the column value of t: unix nanoseconds, NULL when zero.
func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

// ScheduleUpsert creates or redefines a schedule, as
// store.ScheduleUpsertParams.Stored decides; see store.Scheduler.
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*job.Schedule, bool, error) {
	var out *job.Schedule
	var created bool
	err := s.do(ctx, 1, func(w *writer) error {
		old, err := w.schedule(p.Schedule.Name)
		if errors.Is(err, job.ErrNotFound) {
			old, err = nil, nil
		}
		if err != nil {
			return err
		}
		var def job.Schedule
		def, created = p.Stored(old)
		out, err = oneSchedule(w.conn.QueryRowContext(context.Background(), sqlScheduleWrite, def.Name, def.Cron, def.Timezone,
			int64(def.Every), def.Misfire, def.MaxCatchUp, []byte(def.Job), def.Paused, def.CreatedAt.UTC().UnixNano(),
			def.UpdatedAt.UTC().UnixNano(), def.LastTick.UTC().UnixNano(), timeOrNull(def.LastRunAt),
			stringOrNull(def.LastJobID), timeOrNull(def.NextRunAt)), def.Name)
		return err
	})
	if err != nil {
		return nil, false, wrap("upsert schedule", err)
	}
	return out, created, nil
}

// schedule reads one schedule in the writer's transaction.
func (w *writer) schedule(name string) (*job.Schedule, error) {
	return oneSchedule(w.conn.QueryRowContext(context.Background(), sqlScheduleByName, name), name)
}

// oneSchedule reads the schedule named name from row, job.ErrNotFound
// when there is none.
func oneSchedule(row *sql.Row, name string) (*job.Schedule, error) {
	sc, err := scanSchedule(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %s: %w", name, job.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read schedule %s: %w", name, err)
	}
	return sc, nil
}

// ScheduleGet returns one schedule; see store.Scheduler.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*job.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get schedule", err)
	}
	sc, err := oneSchedule(s.rdb.QueryRowContext(ctx, sqlScheduleByName, name), name)
	return sc, wrap("get schedule", err)
}

// ScheduleList returns every schedule; see store.Scheduler.
func (s *Store) ScheduleList(ctx context.Context) ([]*job.Schedule, error) {
	out, err := s.schedules(ctx, sqlScheduleList)
	return out, wrap("list schedules", err)
}

// schedules reads the schedules a query selects on the read pool.
func (s *Store) schedules(ctx context.Context, query string, args ...any) ([]*job.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	return scanAll(rows, err, func(r *sql.Rows, sc **job.Schedule) (err error) {
		*sc, err = scanSchedule(r)
		return err
	})
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (s *Store) ScheduleDelete(ctx context.Context, name string) error {
	return wrap("delete schedule", s.do(ctx, 1, func(w *writer) error {
		res, err := w.conn.ExecContext(context.Background(), sqlScheduleDelete, name)
		if err != nil {
			return fmt.Errorf("delete schedule %s: %w", name, err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return fmt.Errorf("schedule %s: %w", name, job.ErrNotFound)
		}
		return nil
	}))
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (s *Store) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*job.Schedule, error) {
	return call(ctx, s, "pause schedule", func(w *writer) (*job.Schedule, error) {
		return oneSchedule(w.conn.QueryRowContext(context.Background(), sqlSchedulePause, paused, now.UTC().UnixNano(), name), name)
	})
}

// ScheduleFire inserts the jobs of a firing and records it; see
// store.Scheduler.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]store.InsertResult, error) {
	res, err := s.fireSchedules(ctx, []*store.ScheduleFireParams{p})
	if err != nil {
		return nil, wrap("fire schedule", err)
	}
	jobs, err := p.FireOne(res[0])
	return jobs, wrap("fire schedule", err)
}

// ScheduleFireMany fires several schedules as one operation of the
// writer, in one transaction; see store.Scheduler.
func (s *Store) ScheduleFireMany(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if err := store.CheckFireMany(fires); err != nil {
		return nil, fmt.Errorf("fire schedules: %w", err)
	}
	out, err := s.fireSchedules(ctx, fires)
	return out, wrap("fire schedules", err)
}

// fireSchedules fires the schedules of fires as one operation of the
// writer, in one transaction. A schedule that is gone (or, unless
// Manual, moved) is left out with Moved set.
func (s *Store) fireSchedules(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	out := make([]store.ScheduleFireResult, len(fires))
	weight := 0
	for _, p := range fires {
		weight += max(len(p.Jobs), 1)
	}
	err := s.do(ctx, weight, func(w *writer) error {
		for i, p := range fires {
			out[i] = store.ScheduleFireResult{Moved: true}
			sc, err := w.schedule(p.Name)
			if errors.Is(err, job.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			handled, next, err := p.Fires(sc)
			if errors.Is(err, store.ErrScheduleMoved) {
				continue
			}
			out[i] = store.ScheduleFireResult{Jobs: make([]store.InsertResult, len(p.Jobs))}
			if err := w.fireSchedule(p, handled, next, out[i].Jobs); err != nil {
				return err
			}
			// A later refusal must roll back what this firing wrote.
			w.touched = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fireSchedule inserts the jobs of firing p, filling out, and records
// the firing: last tick handled, next tick next.
func (w *writer) fireSchedule(p *store.ScheduleFireParams, handled, next time.Time, out []store.InsertResult) error {
	if err := w.insertJobs(p.Jobs, p.Now, out); err != nil {
		return err
	}
	var lastRun, lastJob any
	if id, ok := p.Ran(out); ok {
		lastRun, lastJob = p.Now.UTC().UnixNano(), id
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlScheduleFired, handled.UTC().UnixNano(), timeOrNull(next),
		lastRun, lastJob, p.Name); err != nil {
		return fmt.Errorf("record firing of schedule %s: %w", p.Name, err)
	}
	return nil
}

// ScheduleDue returns the schedules due at now; see store.Scheduler.
func (s *Store) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*job.Schedule, time.Time, error) {
	at := now.UTC().UnixNano()
	due, err := s.schedules(ctx, sqlScheduleDue, at, limit)
	if err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	var next sql.NullInt64
	if err := s.rdb.QueryRowContext(ctx, sqlScheduleNext, at).Scan(&next); err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	return due, nullTime(next), nil
}
