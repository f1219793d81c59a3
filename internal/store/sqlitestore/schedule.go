package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// schedules keeps the cron schedules (store.Scheduler) in the schedules
// table and fires them in one operation of the writer.
type schedules = sqlkit.Schedules

func newSchedules(s *Store) *schedules { return sqlkit.NewSchedules(&dialect, kitDB{s}, firings{}) }

// sqlScheduleFired records the firing of one schedule.
const sqlScheduleFired = `UPDATE schedules SET last_tick = ?, next_run_at = ?,
	last_run_at = COALESCE(?, last_run_at), last_job_id = COALESCE(?, last_job_id) WHERE name = ?`

// firings writes the firings of schedules in the writer's operation that
// fires them; see sqlkit.Firings.
type firings struct{}

func (firings) CheckJobs(c sqlkit.Conn, jobs []store.JobInsertParams) error {
	return c.(kitConn).w.checkInserts(jobs)
}

func (firings) InsertJobs(_ context.Context, c sqlkit.Conn, jobs []store.JobInsertParams, now time.Time) ([]store.InsertResult, error) {
	w := c.(kitConn).w
	out := make([]store.InsertResult, len(jobs))
	if err := w.insertCheckedJobs(jobs, now, out); err != nil {
		return nil, err
	}
	// A later refusal must roll back what the firing wrote.
	w.touched = true
	return out, nil
}

func (firings) RecordFirings(ctx context.Context, c sqlkit.Conn, fired []sqlkit.Fired) error {
	for _, f := range fired {
		if _, err := c.Exec(ctx, sqlScheduleFired, f.Tick.UnixNano(), timeOrNull(f.Next), timeOrNull(f.RanAt),
			stringOrNull(f.JobID), f.Name); err != nil {
			return fmt.Errorf("record firing of schedule %s: %w", f.Name, err)
		}
	}
	return nil
}

// timeOrNull is the column value of t: unix nanoseconds, NULL when zero.
func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}
