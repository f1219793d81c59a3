package sqlitestore

import (
	"context"
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// maintenance runs the maintenance passes (sqlkit.Maintenance).
type maintenance = sqlkit.Maintenance

const (
	sqlDueJobs = `SELECT seq, queue, state, priority, run_at, COALESCE(grp, '') FROM jobs INDEXED BY jobs_due
WHERE ` + condDue + ` AND run_at <= ?1 ORDER BY run_at LIMIT ?2`
	sqlPromote = `UPDATE jobs NOT INDEXED SET state = 'available' WHERE seq IN (SELECT value FROM json_each(?1))`
	sqlNextDue = `SELECT MIN(run_at) FROM jobs INDEXED BY jobs_due WHERE ` + condDue

	sqlPruneOldest = `DELETE FROM jobs NOT INDEXED WHERE seq IN (
	SELECT seq FROM jobs INDEXED BY jobs_finished WHERE finished_at < ?3 AND state IN (SELECT value FROM json_each(?1))
	ORDER BY finished_at LIMIT ?2)
RETURNING queue, state`
)

func newMaintenance(s *Store) *maintenance {
	return sqlkit.NewMaintenance(&dialect, kitDB{s}, maintained{}, sqlkit.MaintenanceSQL{Due: sqlDueJobs,
		Promote: sqlPromote, Seqs: func(seqs []int64) any { return seqList(seqs) }, NextDue: sqlNextDue,
		PruneOldest: sqlPruneOldest})
}

// maintain runs pass on the writer as sqlkit.Maintenance.Pass runs it.
func (s *Store) maintain(ctx context.Context, what string, pass func(*writer, *store.MaintenanceResult) error) (*store.MaintenanceResult, error) {
	return s.maintenance.Pass(ctx, what, func(c sqlkit.Conn, res *store.MaintenanceResult) error { return pass(c.(kitConn).w, res) })
}

// maintained keeps the writer's windows, leases and counts in step with
// the passes; see sqlkit.MaintainedJobs.
type maintained struct{}

func (maintained) Promoted(c sqlkit.Conn, due []sqlkit.DueJob, _ *store.MaintenanceResult) {
	w := c.(kitConn).w
	for _, d := range due {
		w.fx.move(d.Queue, d.State, job.StateAvailable, 1)
		w.madeAvailable(d.Queue, d.Group, entry{priority: d.Priority, runAt: d.RunAt.UnixNano(), seq: d.Seq})
	}
}

// Rescue reads nothing: the leases are in memory, ordered by expiry.
func (maintained) Rescue(_ context.Context, c sqlkit.Conn, now time.Time, limit int, res *store.MaintenanceResult) error {
	w := c.(kitConn).w
	for res.Count < limit {
		l := w.leases.earliest()
		if l == nil || l.expiresAt.After(now) {
			break
		}
		h := l.held()
		end := attempt.Expire(&h, w.settingsOf(l.queue), now)
		letter, err := w.endAttempt(l, &end, now)
		if err != nil {
			return err
		}
		sqlkit.NoteRescued(res, l.queue, &end, letter.Queue)
	}
	if l := w.leases.earliest(); l != nil {
		res.Next = l.expiresAt
	}
	return nil
}

// CountFinished counts in memory.
func (maintained) CountFinished(_ context.Context, c sqlkit.Conn, states []job.State) (int64, error) {
	w := c.(kitConn).w
	return w.counts.totals(states...) + w.batch.total(states...) + w.fx.total(states...), nil
}

func (maintained) Pruned(c sqlkit.Conn, queue string, state job.State) {
	c.(kitConn).w.fx.move(queue, state, "", 1)
}

func (maintained) AfterPrune(context.Context, sqlkit.Conn, *store.JobPruneParams) error { return nil }
