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

// scheduler keeps the cron schedules and fires them.
type scheduler struct {
	*db
	*beliefs
	ins *inserter
}

const (
	scheduleColumns = `name, cron, timezone, every_ns, misfire, max_catch_up, job, paused, created_at, updated_at,
	last_tick, last_run_at, last_job_id, next_run_at`
	sqlScheduleByName = `SELECT ` + scheduleColumns + ` FROM spool_schedules WHERE name = $1`
	sqlScheduleList   = `SELECT ` + scheduleColumns + ` FROM spool_schedules ORDER BY name COLLATE "C"`
	sqlScheduleDue    = `SELECT ` + scheduleColumns + ` FROM spool_schedules
WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2`
	sqlScheduleNext = `SELECT min(next_run_at) FROM spool_schedules
WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at > $1`
	// sqlScheduleLock serialises the upserts of one schedule across
	// nodes, so that two creations at once cannot both create it.
	sqlScheduleLock = `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || ':schedule:' || $2))`
	// sqlScheduleWrite stores a whole schedule, replacing the one of its
	// name.
	sqlScheduleWrite = `INSERT INTO spool_schedules (` + scheduleColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, timezone = excluded.timezone, every_ns = excluded.every_ns,
	misfire = excluded.misfire, max_catch_up = excluded.max_catch_up, job = excluded.job, paused = excluded.paused,
	created_at = excluded.created_at, updated_at = excluded.updated_at, last_tick = excluded.last_tick,
	last_run_at = excluded.last_run_at, last_job_id = excluded.last_job_id, next_run_at = excluded.next_run_at
RETURNING ` + scheduleColumns
	sqlScheduleDelete = `DELETE FROM spool_schedules WHERE name = $1`
	sqlSchedulePause  = `UPDATE spool_schedules SET paused = $2, updated_at = $3 WHERE name = $1 RETURNING ` + scheduleColumns
	// sqlSchedulesLock locks the rows of the schedules named $1, in name
	// order.
	sqlSchedulesLock = `SELECT ` + scheduleColumns + ` FROM spool_schedules WHERE name = ANY($1::text[])
ORDER BY name COLLATE "C" FOR UPDATE`
	// sqlSchedulesFired records the firings of the schedules named $1:
	// last tick $2, next tick $3, and, where not NULL, last run $4 and
	// last job $5.
	sqlSchedulesFired = `UPDATE spool_schedules s SET last_tick = f.last_tick, next_run_at = f.next_run_at,
	last_run_at = COALESCE(f.last_run_at, s.last_run_at), last_job_id = COALESCE(f.last_job_id, s.last_job_id)
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::text[])
	AS f(name, last_tick, next_run_at, last_run_at, last_job_id)
WHERE s.name = f.name`
)

// scanSchedule reads one row of scheduleColumns.
func scanSchedule(row pgx.Row) (*job.Schedule, error) {
	var (
		s             job.Schedule
		every         int64
		maxCatchUp    int32
		lastRun, next pgtype.Timestamptz
		lastJob       pgtype.Text
	)
	if err := row.Scan(&s.Name, &s.Cron, &s.Timezone, &every, &s.Misfire, &maxCatchUp, &s.Job, &s.Paused,
		&s.CreatedAt, &s.UpdatedAt, &s.LastTick, &lastRun, &lastJob, &next); err != nil {
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

// ScheduleUpsert creates or redefines a schedule, as
// store.ScheduleUpsertParams.Stored decides, under the schedule's lock;
// see store.Scheduler.
func (sch *scheduler) ScheduleUpsert(ctx context.Context, p *store.ScheduleUpsertParams) (*job.Schedule, bool, error) {
	var out *job.Schedule
	var created bool
	err := sch.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlScheduleLock, lockClass, p.Schedule.Name); err != nil {
			return fmt.Errorf("lock schedule: %w", err)
		}
		old, err := scanSchedule(tx.QueryRow(ctx, sqlScheduleByName, p.Schedule.Name))
		if errors.Is(err, pgx.ErrNoRows) {
			old, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("read schedule: %w", err)
		}
		var def job.Schedule
		def, created = p.Stored(old)
		lastJob := pgtype.Text{String: def.LastJobID, Valid: def.LastJobID != ""}
		out, err = scanSchedule(tx.QueryRow(ctx, sqlScheduleWrite, def.Name, def.Cron, def.Timezone, int64(def.Every),
			def.Misfire, int32(def.MaxCatchUp), []byte(def.Job), def.Paused, micro(def.CreatedAt), micro(def.UpdatedAt),
			micro(def.LastTick), tstz(def.LastRunAt), lastJob, tstz(def.NextRunAt)))
		return err
	})
	if err != nil {
		return nil, false, wrap("upsert schedule", err)
	}
	return out, created, nil
}

// ScheduleGet returns one schedule; see store.Scheduler.
func (sch *scheduler) ScheduleGet(ctx context.Context, name string) (*job.Schedule, error) {
	if err := sch.check(); err != nil {
		return nil, wrap("get schedule", err)
	}
	sc, err := scanSchedule(sch.pool.QueryRow(ctx, sqlScheduleByName, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get schedule %s: %w", name, job.ErrNotFound)
	}
	if err != nil {
		return nil, wrap("get schedule", err)
	}
	return sc, nil
}

// ScheduleList returns every schedule; see store.Scheduler.
func (sch *scheduler) ScheduleList(ctx context.Context) ([]*job.Schedule, error) {
	out, err := sch.schedules(ctx, sqlScheduleList)
	if err != nil {
		return nil, wrap("list schedules", err)
	}
	return out, nil
}

// schedules reads the schedules a query selects.
func (sch *scheduler) schedules(ctx context.Context, query string, args ...any) ([]*job.Schedule, error) {
	if err := sch.check(); err != nil {
		return nil, err
	}
	rows, err := sch.pool.Query(ctx, query, args...)
	return collectSchedules(rows, err)
}

// collectSchedules reads every row of rows, the outcome of a query that
// failed with err unless nil, and closes rows.
func collectSchedules(rows pgx.Rows, err error) ([]*job.Schedule, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*job.Schedule, error) { return scanSchedule(r) })
}

// ScheduleDelete removes a schedule; see store.Scheduler.
func (sch *scheduler) ScheduleDelete(ctx context.Context, name string) error {
	if err := sch.check(); err != nil {
		return wrap("delete schedule", err)
	}
	tag, err := sch.pool.Exec(ctx, sqlScheduleDelete, name)
	if err != nil {
		return wrap("delete schedule", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", name, job.ErrNotFound)
	}
	return nil
}

// ScheduleSetPaused pauses or resumes a schedule; see store.Scheduler.
func (sch *scheduler) ScheduleSetPaused(ctx context.Context, name string, paused bool, now time.Time) (*job.Schedule, error) {
	if err := sch.check(); err != nil {
		return nil, wrap("pause schedule", err)
	}
	sc, err := scanSchedule(sch.pool.QueryRow(ctx, sqlSchedulePause, name, paused, micro(now)))
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
func (sch *scheduler) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]store.InsertResult, error) {
	res, err := sch.fireSchedules(ctx, []*store.ScheduleFireParams{p})
	if err != nil {
		return nil, err
	}
	jobs, err := p.FireOne(res[0])
	return jobs, wrap("fire schedule", err)
}

// ScheduleFireMany fires several schedules in one transaction: one
// statement locks their rows, one inserts the jobs of all, one records
// every firing; see store.Scheduler.
func (sch *scheduler) ScheduleFireMany(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	if err := store.CheckFireMany(fires); err != nil {
		return nil, fmt.Errorf("fire schedules: %w", err)
	}
	return sch.fireSchedules(ctx, fires)
}

// fireSchedules fires the schedules of fires in one transaction under
// their row locks, taken in name order so that two transactions never
// wait on each other in a cycle. A schedule that is gone (or, unless
// Manual, moved) is left out with Moved set.
func (sch *scheduler) fireSchedules(ctx context.Context, fires []*store.ScheduleFireParams) ([]store.ScheduleFireResult, error) {
	names := make([]string, len(fires))
	var all []store.JobInsertParams
	for i, p := range fires {
		if err := checkInserts(p.Jobs); err != nil {
			return nil, fmt.Errorf("fire schedule %s: %w", p.Name, err)
		}
		names[i] = p.Name
	}
	var out []store.ScheduleFireResult
	err := sch.tx(ctx, func(tx pgx.Tx) error {
		current, err := sch.lockSchedules(ctx, tx, names)
		if err != nil {
			return err
		}
		out = make([]store.ScheduleFireResult, len(fires))
		rec := scheduleRecords{}
		all = all[:0]
		var firing []int // indexes of the fires that fire
		for i, p := range fires {
			sc := current[p.Name]
			if sc == nil {
				out[i].Moved = true
				continue
			}
			at := *p
			at.Last, at.Handled = micro(p.Last), micro(p.Handled)
			handled, next, err := at.Fires(sc)
			if errors.Is(err, store.ErrScheduleMoved) {
				out[i].Moved = true
				continue
			}
			rec.add(p.Name, handled, next)
			firing = append(firing, i)
			all = append(all, p.Jobs...)
		}
		if len(all) > 0 {
			res, err := sch.ins.insert(ctx, tx, all, micro(fires[firing[0]].Now), true)
			if err != nil {
				return err
			}
			for _, i := range firing {
				out[i].Jobs, res = res[:len(fires[i].Jobs):len(fires[i].Jobs)], res[len(fires[i].Jobs):]
			}
		}
		for k, i := range firing {
			if id, ok := fires[i].Ran(out[i].Jobs); ok {
				rec.ran(k, fires[i].Now, id)
			}
		}
		if len(firing) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, sqlSchedulesFired, rec.names, rec.ticks, rec.next, rec.runAt, rec.jobID); err != nil {
			return fmt.Errorf("record firings of %d schedules: %w", len(firing), err)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("fire schedule", err)
	}
	return out, nil
}

// lockSchedules locks the rows of the schedules named and reads them,
// by name; names that no schedule has are missing from the map. Sent as
// a batch, it opens tx in the same round trip.
func (sch *scheduler) lockSchedules(ctx context.Context, tx pgx.Tx, names []string) (map[string]*job.Schedule, error) {
	b := &pgx.Batch{}
	b.Queue(sqlSchedulesLock, names)
	br := tx.SendBatch(ctx, b)
	found, err := collectSchedules(br.Query())
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("lock schedules: %w", err)
	}
	out := make(map[string]*job.Schedule, len(found))
	for _, sc := range found {
		out[sc.Name] = sc
	}
	return out, nil
}

// scheduleRecords are the arguments of sqlSchedulesFired, one entry per
// schedule that fires.
type scheduleRecords struct {
	names       []string
	ticks, next []pgtype.Timestamptz
	runAt       []pgtype.Timestamptz
	jobID       []pgtype.Text
}

// add records the firing of a schedule that moves to tick handled and
// next, with no run (see ran).
func (r *scheduleRecords) add(name string, handled, next time.Time) {
	r.names = append(r.names, name)
	r.ticks = append(r.ticks, tstz(handled))
	r.next = append(r.next, tstz(next))
	r.runAt = append(r.runAt, pgtype.Timestamptz{})
	r.jobID = append(r.jobID, pgtype.Text{})
}

// ran records the run of the k-th firing added: at now, job id.
func (r *scheduleRecords) ran(k int, now time.Time, id string) {
	r.runAt[k], r.jobID[k] = tstz(now), pgtype.Text{String: id, Valid: true}
}

// ScheduleDue returns the schedules due at now; see store.Scheduler.
func (sch *scheduler) ScheduleDue(ctx context.Context, now time.Time, limit int) ([]*job.Schedule, time.Time, error) {
	due, err := sch.schedules(ctx, sqlScheduleDue, micro(now), limit)
	if err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	var next pgtype.Timestamptz
	if err := sch.pool.QueryRow(ctx, sqlScheduleNext, micro(now)).Scan(&next); err != nil {
		return nil, time.Time{}, wrap("read due schedules", err)
	}
	if !next.Valid {
		return due, time.Time{}, nil
	}
	return due, next.Time.UTC(), nil
}
