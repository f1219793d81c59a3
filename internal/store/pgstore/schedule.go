package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// scheduler keeps the cron schedules (store.Scheduler) in
// spool_schedules and fires them.
type scheduler = sqlkit.Schedules

func newScheduler(d *db, ins *inserter) *scheduler {
	return sqlkit.NewSchedules(&dialect, kitDB{d}, firings{ins})
}

// sqlSchedulesFired records the firings of the schedules named $1: last
// tick $2, next tick $3, and, where not NULL, last run $4 and last job
// $5.
const sqlSchedulesFired = `UPDATE spool_schedules s SET last_tick = f.last_tick, next_run_at = f.next_run_at,
	last_run_at = COALESCE(f.last_run_at, s.last_run_at), last_job_id = COALESCE(f.last_job_id, s.last_job_id)
FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[], $5::text[])
	AS f(name, last_tick, next_run_at, last_run_at, last_job_id)
WHERE s.name = f.name`

// firings writes the firings of schedules in the transaction that fires
// them: the jobs of all in one insert, every record in one statement;
// see sqlkit.Firings.
type firings struct{ ins *inserter }

func (firings) CheckJobs(_ sqlkit.Conn, jobs []store.JobInsertParams) error {
	return checkInserts(jobs)
}

func (f firings) InsertJobs(ctx context.Context, c sqlkit.Conn, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	return f.ins.insert(ctx, c.(kitConn).q.(pgx.Tx), jobs, micro(now), true)
}

func (firings) RecordFirings(ctx context.Context, c sqlkit.Conn, fired []sqlkit.Fired) error {
	names := make([]string, len(fired))
	ticks := make([]pgtype.Timestamptz, len(fired))
	next := make([]pgtype.Timestamptz, len(fired))
	runAt := make([]pgtype.Timestamptz, len(fired))
	jobID := make([]pgtype.Text, len(fired))
	for i, f := range fired {
		names[i], ticks[i], next[i], runAt[i] = f.Name, tstz(f.Tick), tstz(f.Next), tstz(f.RanAt)
		jobID[i] = pgtype.Text{String: f.JobID, Valid: f.JobID != ""}
	}
	if _, err := c.Exec(ctx, sqlSchedulesFired, names, ticks, next, runAt, jobID); err != nil {
		return fmt.Errorf("record firings of %d schedules: %w", len(fired), err)
	}
	return nil
}
