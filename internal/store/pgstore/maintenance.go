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
)

// maintainer runs the leader's passes over the jobs: it makes due jobs
// available, rescues expired leases and prunes finished jobs.
type maintainer struct {
	*db
	fin *finisher
}

const (
	sqlPromote = `WITH due AS (
	SELECT seq FROM spool_jobs WHERE state IN ('scheduled', 'retrying') AND run_at <= $1
	ORDER BY run_at LIMIT $2
	FOR UPDATE SKIP LOCKED
), up AS (
	UPDATE spool_jobs j SET state = 'available' FROM due WHERE j.seq = due.seq RETURNING j.queue
)
SELECT queue, count(*) FROM up GROUP BY queue`
	sqlNextDue = `SELECT min(run_at) FROM spool_jobs WHERE state IN ('scheduled', 'retrying')`

	// sqlExpired locks the jobs whose lease ran out, with their lease rows,
	// passing over those that an ack or extend holds right now, and reads
	// their queues' dead-letter queues, whether each is a dead-letter
	// copy, and their errors.
	sqlExpired = `SELECT j.seq, j.queue, j.cancel_requested, j.attempt, j.max_attempts, j.run_at, COALESCE(q.dead_letter_queue, ''),
	j.dead_letter_of_id IS NOT NULL, j.errors
FROM spool_leases l JOIN spool_jobs j ON j.seq = l.seq
LEFT JOIN spool_queues q ON q.name = j.queue
WHERE l.expires_at <= $1 AND j.state = 'active'
ORDER BY l.expires_at LIMIT $2
FOR UPDATE OF j, l SKIP LOCKED`
	sqlNextExpiry = `SELECT min(expires_at) FROM spool_leases`

	// sqlPruneOld deletes up to $3 of the oldest finished jobs in states
	// $2 that finished before $1.
	sqlPruneOld = `DELETE FROM spool_jobs_done WHERE seq IN (
	SELECT seq FROM spool_jobs_done WHERE finished_at < $1 AND state = ANY($2)
	ORDER BY finished_at, seq LIMIT $3)`
	sqlFinishedCount = `SELECT COALESCE(sum(n), 0)::int8 FROM (
	SELECT n FROM spool_counts WHERE state = ANY($1)
	UNION ALL SELECT n FROM spool_count_deltas WHERE state = ANY($1)) c`
	// sqlPruneLock keeps two prune passes from both deleting the same
	// excess over a count cap.
	sqlPruneLock = `SELECT pg_advisory_xact_lock($1, $2)`
)

// JobPromoteDue makes due scheduled and retrying jobs available; see
// store.Maintainer.
func (m *maintainer) JobPromoteDue(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	var res *store.MaintenanceResult
	err := m.tx(ctx, func(tx pgx.Tx) error {
		res = &store.MaintenanceResult{}
		rows, err := tx.Query(ctx, sqlPromote, micro(now), limit)
		if err != nil {
			return err
		}
		var queue string
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&queue, &n}, func() error {
			res.Available = append(res.Available, queue)
			res.Count += int(n)
			return nil
		}); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		batch.Queue(sqlNextDue).QueryRow(func(row pgx.Row) error { return scanNullTime(row, &res.Next) })
		m.announceOnCommit(tx, res.Available)
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, wrap("promote due jobs", err)
	}
	return res, nil
}

// JobRescueExpired takes back jobs whose lease ran out, each where
// job.AfterLeaseExpiry sends it; see store.Maintainer.
func (m *maintainer) JobRescueExpired(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	now = micro(now)
	var res *store.MaintenanceResult
	err := m.tx(ctx, func(tx pgx.Tx) error {
		res = &store.MaintenanceResult{}
		rows, err := tx.Query(ctx, sqlExpired, now, limit)
		if err != nil {
			return err
		}
		var changes []change
		var (
			l           leased
			att, maxAtt int32
		)
		if _, err := pgx.ForEachRow(rows, []any{&l.seq, &l.Queue, &l.CancelRequested, &att, &maxAtt, &l.runAt,
			&l.settings.DeadLetterQueue, &l.Letter, &l.errors}, func() error {
			c := l
			c.Attempt, c.MaxAttempts, c.runAt, c.errors = int(att), int(maxAtt), l.runAt.UTC(), slices.Clone(l.errors)
			changes = append(changes, c.changeOf(attempt.Expire(&c.Held, c.settings, now)))
			if res.Rescued == nil {
				res.Rescued = make(map[string]int)
			}
			res.Rescued[l.Queue]++
			return nil
		}); err != nil {
			return err
		}
		res.Count = len(changes)
		for _, c := range changes {
			if c.end.Available() {
				res.Available = appendOnce(res.Available, c.queue)
			}
		}
		if err := m.fin.endAll(ctx, tx, changes, now, func(_ int, ref job.JobRef) {
			res.Available = appendOnce(res.Available, ref.Queue)
		}); err != nil {
			return err
		}
		return scanNullTime(tx.QueryRow(ctx, sqlNextExpiry), &res.Next)
	})
	if err != nil {
		return nil, wrap("rescue expired jobs", err)
	}
	return res, nil
}

// JobPrune deletes up to p.Limit final jobs by retention, pass by pass as
// p.Passes lists them; see store.Maintainer. It also removes the listening
// rows of sessions that are gone (listeners.go).
func (m *maintainer) JobPrune(ctx context.Context, p *store.JobPruneParams) (int, error) {
	if err := m.check(); err != nil {
		return 0, wrap("prune jobs", err)
	}
	if p.Limit <= 0 {
		return 0, nil
	}
	total := 0
	err := m.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlPruneLock, lockClass, m.lockKey("prune")); err != nil {
			return err
		}
		var err error
		if total, err = job.Prune(p.Passes(), p.Limit, countFinished(ctx, tx), pruneOldest(ctx, tx)); err != nil {
			return err
		}
		if !p.Now.IsZero() {
			if _, err := tx.Exec(ctx, sqlPruneGroupStarts, p.Now.UnixNano(), p.Limit); err != nil {
				return fmt.Errorf("drop idle start logs: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, sqlPruneListeners); err != nil {
			return fmt.Errorf("drop listeners that are gone: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, wrap("prune jobs", err)
	}
	return total, nil
}

// countFinished counts, in tx, the jobs in states, for job.Prune.
func countFinished(ctx context.Context, tx pgx.Tx) func(states []job.State) (int64, error) {
	return func(states []job.State) (int64, error) {
		var have int64
		if err := tx.QueryRow(ctx, sqlFinishedCount, states).Scan(&have); err != nil {
			return 0, fmt.Errorf("count %v jobs: %w", states, err)
		}
		return have, nil
	}
}

// pruneOldest deletes, in tx, up to n of the oldest jobs in the states of
// a pass finished before its Before, for job.Prune; a pass by count has
// no age bound.
func pruneOldest(ctx context.Context, tx pgx.Tx) func(pass *job.PrunePass, n int) (int, error) {
	return func(pass *job.PrunePass, n int) (int, error) {
		before := pass.Before
		if !pass.ByAge() {
			before = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		tag, err := tx.Exec(ctx, sqlPruneOld, micro(before), pass.States, n)
		if err != nil {
			return 0, fmt.Errorf("delete %v jobs: %w", pass.States, err)
		}
		return int(tag.RowsAffected()), nil
	}
}
