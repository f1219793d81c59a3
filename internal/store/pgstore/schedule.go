package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

const (
	scheduleColumns = `name, cron, timezone, every_ns, misfire, max_catch_up, job, paused, created_at, updated_at,
	last_tick, last_run_at, last_job_id, next_run_at`
	sqlScheduleByName = `SELECT ` + scheduleColumns + ` FROM spool_schedules WHERE name = $1`
	sqlScheduleLock   = sqlScheduleByName + ` FOR UPDATE`
	sqlScheduleList   = `SELECT ` + scheduleColumns + ` FROM spool_schedules ORDER BY name COLLATE "C"`
	sqlScheduleDue    = `SELECT ` + scheduleColumns + ` FROM spool_schedules
WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2`
	sqlScheduleNext = `SELECT min(next_run_at) FROM spool_schedules
WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at > $1`
	// sqlScheduleUpsert creates a schedule or redefines it, keeping its
	// last tick unless $14 (restart) is set.
	sqlScheduleUpsert = `INSERT INTO spool_schedules (` + scheduleColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, NULL, NULL, $11)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, every_ns = excluded.every_ns,
	misfire = excluded.misfire, max_catch_up = excluded.max_catch_up, job = excluded.job, paused = excluded.paused,
	updated_at = excluded.updated_at, next_run_at = excluded.next_run_at,
	last_tick = CASE WHEN $12::bool THEN excluded.last_tick ELSE spool_schedules.last_tick END
RETURNING (xmax = 0) AS created, ` + scheduleColumns
	// sqlScheduleExact stores a schedule exactly as given.
	sqlScheduleExact = `INSERT INTO spool_schedules (` + scheduleColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, every_ns = excluded.every_ns,
	misfire = excluded.misfire, max_catch_up = excluded.max_catch_up, job = excluded.job, paused = excluded.paused,
	created_at = excluded.created_at, updated_at = excluded.updated_at, last_tick = excluded.last_tick,
	last_run_at = excluded.last_run_at, last_job_id = excluded.last_job_id, next_run_at = excluded.next_run_at
RETURNING (xmax = 0) AS created, ` + scheduleColumns
	sqlScheduleDelete = `DELETE FROM spool_schedules WHERE name = $1`
	sqlSchedulePause  = `UPDATE spool_schedules SET paused = $2, updated_at = $3 WHERE name = $1 RETURNING ` + scheduleColumns
	sqlScheduleFired  = `UPDATE spool_schedules SET last_tick = $2, next_run_at = $3,
	last_run_at = COALESCE($4, last_run_at), last_job_id = COALESCE($5, last_job_id) WHERE name = $1`
)

// scanSchedule reads one row of scheduleColumns, after the leading
// columns in lead.
func scanSchedule(row pgx.Row, lead ...any) (*store.Schedule, error) {
	var (
		s             store.Schedule
		every         int64
		maxCatchUp    int32
		lastRun, next pgtype.Timestamptz
		lastJob       pgtype.Text
	)
	dest := append(lead, &s.Name, &s.Cron, &s.Timezone, &every, &s.Misfire, &maxCatchUp, &s.Job, &s.Paused,
		&s.CreatedAt, &s.UpdatedAt, &s.LastTick, &lastRun, &lastJob, &next)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	s.Every, s.MaxCatchUp, s.LastJobID = time.Duration(every), int(maxCatchUp), lastJob.String
	s.CreatedAt, s.UpdatedAt, s.LastTick = s.CreatedAt.UTC(), s.UpdatedAt.UTC(), s.LastTick.UTC()
	if lastRun.Valid {
		s.LastRunAt = lastRun.Time.UTC()
	}
	if next.Valid {
		s.NextRunAt = next.Time.UTC()
	}
	return &s, nil
}

// ScheduleUpsert creates or redefines a schedule; see store.Scheduler.
func (s *Store) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*store.Schedule, bool, error) {
	def := &p.Schedule
	var out *store.Schedule
	var created bool
	err := s.retry(ctx, func() error {
		var err error
		if p.Exact {
			var lastJob pgtype.Text
			if def.LastJobID != "" {
				lastJob = pgtype.Text{String: def.LastJobID, Valid: true}
			}
			out, err = scanSchedule(s.pool.QueryRow(ctx, sqlScheduleExact, def.Name, def.Cron, def.Timezone, int64(def.Every),
				def.Misfire, int32(def.MaxCatchUp), []byte(def.Job), def.Paused, micro(def.CreatedAt), micro(def.UpdatedAt),
				micro(def.LastTick), tstz(def.LastRunAt), lastJob, tstz(def.NextRunAt)), &created)
			return err
		}
		out, err = scanSchedule(s.pool.QueryRow(ctx, sqlScheduleUpsert, def.Name, def.Cron, def.Timezone, int64(def.Every),
			def.Misfire, int32(def.MaxCatchUp), []byte(def.Job), def.Paused, micro(p.Now), micro(def.LastTick),
			tstz(def.NextRunAt), p.Restart), &created)
		return err
	})
	if err != nil {
		return nil, false, wrap("upsert schedule", err)
	}
	return out, created, nil
}

// ScheduleGet returns one schedule; see store.Scheduler.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, wrap("get schedule", err)
	}
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlScheduleByName, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get schedule %s: %w", name, job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get schedule", err)
	}
	return sc, nil
}

// ScheduleList returns every schedule; see store.Scheduler.
func (s *Store) ScheduleList(ctx context.Context) ([]*store.Schedule, error) {
	out, err := s.schedules(ctx, sqlScheduleList)
	if err != nil {
		return nil, wrap("list schedules", err)
	}
	return out, nil
}

// schedules reads the schedules a query selects.
func (s *Store) schedules(ctx context.Context, query string, args ...any) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (s *Store) ScheduleDelete(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return wrap("delete schedule", err)
	}
	tag, err := s.pool.Exec(ctx, sqlScheduleDelete, name)
	if err != nil {
		return wrap("delete schedule", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", name, job.ErrNotFound)
	}
	return nil
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (s *Store) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, wrap("pause schedule", err)
	}
	sc, err := scanSchedule(s.pool.QueryRow(ctx, sqlSchedulePause, name, paused, micro(now)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pause schedule %s: %w", name, job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("pause schedule", err)
	}
	return sc, nil
}

// ScheduleFire inserts the jobs of a firing and records it, holding the
// schedule's row lock so that two nodes never fire one tick; see
// store.Scheduler.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]store.InsertResult, error) {
	if err := checkInserts(p.Jobs); err != nil {
		return nil, fmt.Errorf("fire schedule: %w", err)
	}
	var out []store.InsertResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		sc, err := scanSchedule(tx.QueryRow(ctx, sqlScheduleLock, p.Name))
		switch {
		case errors.Is(err, pgx.ErrNoRows) && !p.Manual:
			return store.ErrScheduleMoved
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("schedule %s: %w", p.Name, job.ErrNotFound)
		case err != nil:
			return fmt.Errorf("lock schedule %s: %w", p.Name, err)
		}
		at := *p
		at.Last, at.Handled = micro(p.Last), micro(p.Handled)
		handled, next, err := at.Fires(sc)
		if err != nil {
			return err
		}
		out = make([]store.InsertResult, len(p.Jobs))
		if len(p.Jobs) > 0 {
			if out, err = s.insert(ctx, tx, p.Jobs, micro(p.Now), true); err != nil {
				return err
			}
		}
		var lastRun pgtype.Timestamptz
		var lastJob pgtype.Text
		if id, ok := p.Ran(out); ok {
			lastRun, lastJob = tstz(p.Now), pgtype.Text{String: id, Valid: true}
		}
		if _, err := tx.Exec(ctx, sqlScheduleFired, p.Name, handled, tstz(next), lastRun, lastJob); err != nil {
			return fmt.Errorf("record firing of schedule %s: %w", p.Name, err)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("fire schedule", err)
	}
	return out, nil
}

// ScheduleDue returns the schedules due at now; see store.Scheduler.
func (s *Store) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, time.Time, error) {
	due, err := s.schedules(ctx, sqlScheduleDue, micro(now), limit)
	if err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	var next pgtype.Timestamptz
	if err := s.pool.QueryRow(ctx, sqlScheduleNext, micro(now)).Scan(&next); err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	if !next.Valid {
		return due, time.Time{}, nil
	}
	return due, next.Time.UTC(), nil
}
