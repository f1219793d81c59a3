package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/sqlkit"
)

// maintainer runs the leader's passes over the jobs (sqlkit.Maintenance).
type maintainer = sqlkit.Maintenance

const (
	sqlDueJobs = `SELECT seq, queue, state, priority, run_at, COALESCE(grp, '') FROM spool_jobs
WHERE state IN ('scheduled', 'retrying') AND run_at <= $1
ORDER BY run_at LIMIT $2
FOR UPDATE SKIP LOCKED`
	sqlPromote = `UPDATE spool_jobs SET state = 'available' WHERE seq = ANY($1)`
	sqlNextDue = `SELECT min(run_at) FROM spool_jobs WHERE state IN ('scheduled', 'retrying')`

	// sqlExpired locks the jobs whose lease ran out, with their lease rows,
	// passing over those that an ack or extend holds right now, and reads
	// their queues' dead-letter queues, whether each is a dead-letter
	// copy, and their errors.
	sqlExpired = `SELECT j.seq, j.queue, j.cancel_requested, j.attempt, j.max_attempts, j.run_at, COALESCE(q.dead_letter_queue, ''),
	j.dead_letter_of_id IS NOT NULL, j.errors, COALESCE(j.grp, ''), COALESCE(q.ordered, false)
FROM spool_leases l JOIN spool_jobs j ON j.seq = l.seq
LEFT JOIN spool_queues q ON q.name = j.queue
WHERE l.expires_at <= $1 AND j.state = 'active'
ORDER BY l.expires_at, l.seq LIMIT $2
FOR UPDATE OF j, l SKIP LOCKED`
	sqlNextExpiry = `SELECT min(expires_at) FROM spool_leases`

	sqlPruneOldest = `DELETE FROM spool_jobs_done WHERE seq IN (
	SELECT seq FROM spool_jobs_done WHERE finished_at < $3 AND state = ANY($1)
	ORDER BY finished_at, seq LIMIT $2)
RETURNING queue, state`
	sqlFinishedCount = `SELECT COALESCE(sum(n), 0)::int8 FROM (
	SELECT n FROM spool_counts WHERE state = ANY($1)
	UNION ALL SELECT n FROM spool_count_deltas WHERE state = ANY($1)) c`
)

func newMaintainer(d *db, fin *finisher) *maintainer {
	return sqlkit.NewMaintenance(&dialect, kitDB{d}, maintained{d, fin}, sqlkit.MaintenanceSQL{Due: sqlDueJobs,
		Promote: sqlPromote, Seqs: func(seqs []int64) any { return seqs }, NextDue: sqlNextDue,
		PruneOldest: sqlPruneOldest})
}

// maintained is the part of the passes that PostgreSQL runs its own way;
// see sqlkit.MaintainedJobs.
type maintained struct {
	*db
	fin *finisher
}

// txOf is the transaction of a write of kitDB.
func txOf(c sqlkit.Conn) pgx.Tx { return c.(kitConn).q.(pgx.Tx) }

// Promoted announces the queues of the promoted jobs once the pass commits.
func (m maintained) Promoted(c sqlkit.Conn, _ []sqlkit.DueJob, res *store.MaintenanceResult) {
	m.announceOnCommit(txOf(c), res.Available)
}

// Rescue locks the expired leases, passing over those an ack or extend
// holds right now.
func (m maintained) Rescue(ctx context.Context, c sqlkit.Conn, now time.Time, limit int, res *store.MaintenanceResult) error {
	tx := txOf(c)
	rows, err := tx.Query(ctx, sqlExpired, now, limit)
	if err != nil {
		return err
	}
	var (
		changes     []change
		members     []runMember
		l           leased
		att, maxAtt int32
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.seq, &l.Queue, &l.CancelRequested, &att, &maxAtt, &l.runAt,
		&l.settings.DeadLetterQueue, &l.Letter, &l.errors, &l.run.group, &l.run.ordered}, func() error {
		c := l
		c.Attempt, c.MaxAttempts, c.runAt, c.errors = int(att), int(maxAtt), l.runAt.UTC(), slices.Clone(l.errors)
		changes, members = append(changes, c.changeOf(attempt.Expire(&c.Held, c.settings, now))), append(members, c.run)
		return nil
	}); err != nil {
		return err
	}
	// The rest of an expired job's run goes back unrun; an expired job
	// of it is returned, not expired.
	all, dropped, err := withRunReturns(ctx, tx, changes, members)
	if err != nil {
		return err
	}
	expired := len(changes)
	for _, d := range dropped {
		if d {
			expired--
		}
	}
	changes = all
	letters := make([]string, len(changes))
	if err := m.fin.endAll(ctx, tx, changes, now, func(k int, ref job.JobRef) { letters[k] = ref.Queue }); err != nil {
		return err
	}
	for k := range changes[:expired] {
		sqlkit.NoteRescued(res, changes[k].queue, &changes[k].end, letters[k])
	}
	return scanNullTime(tx.QueryRow(ctx, sqlNextExpiry), &res.Next)
}

// CountFinished reads the counts and their deltas.
func (maintained) CountFinished(ctx context.Context, c sqlkit.Conn, states []job.State) (int64, error) {
	var have int64
	if err := txOf(c).QueryRow(ctx, sqlFinishedCount, states).Scan(&have); err != nil {
		return 0, fmt.Errorf("count %v jobs: %w", states, err)
	}
	return have, nil
}

// Pruned has nothing to do: triggers keep the counts.
func (maintained) Pruned(sqlkit.Conn, string, job.State) {}

// AfterPrune drops the start logs of idle groups and the listening rows of
// sessions that are gone (listeners.go).
func (maintained) AfterPrune(ctx context.Context, c sqlkit.Conn, p *store.JobPruneParams) error {
	if !p.Now.IsZero() {
		if _, err := c.Exec(ctx, sqlPruneGroupStarts, p.Now.UnixNano(), p.Limit); err != nil {
			return fmt.Errorf("drop idle start logs: %w", err)
		}
	}
	if _, err := c.Exec(ctx, sqlPruneListeners); err != nil {
		return fmt.Errorf("drop listeners that are gone: %w", err)
	}
	return nil
}
