package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/consumergroup"
)

// Consumer groups (store.ConsumerGroups) on PostgreSQL. A group is a row
// of spool_consumer_groups; its jobs are copies in its lane, whose
// spool_queues row follows its queue's pause, limits and grouped flag
// (QueueSetPaused, QueueSetLimits and markGrouped change both in one
// transaction, under the locks a creation takes too).
//
// Every transaction that puts jobs into a queue holds the queue's flow
// lock shared from before the statement that reads its groups, and copies
// what it inserted into their lanes (sqlCopyToLanes) before it commits.
// A creation commits the group under the lock held exclusively, so a
// writer under way ends first and a later one sees the group and makes
// its copies itself; it then copies its start (sqlStartLane) in a second
// transaction, under the lock shared, skipping the copies those writers
// made, and deletes the group again if that fails. A deletion runs under
// the lock held exclusively; a seek clears the lane and copies its start
// in one transaction. Creations, seeks and deletions of one group run one
// at a time across the nodes, under a session lock of its lane.

// copyColumns are the columns a copy sets; the others take their
// defaults (no attempt, no unique key, no lease).
const copyColumns = `id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind, backoff_base,
	backoff_max, backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent`

// isLane is the predicate of the lane index: only a lane's name holds
// job.LaneSep. A query meant for the index states it as written here.
const isLane = `queue LIKE '%` + job.LaneSep + `%'`

// consumerGroups creates, seeks, deletes and lists the consumer groups of
// queues, and copies jobs into their lanes.
type consumerGroups struct {
	*db
	*beliefs
	queues *queueReader
}

const (
	// sqlLockGroup and sqlUnlockGroup take and release the session lock
	// of the consumer group whose lane is $2.
	sqlLockGroup   = `SELECT pg_advisory_lock($1, hashtext(current_schema() || ':group:' || $2::text))`
	sqlUnlockGroup = `SELECT pg_advisory_unlock($1, hashtext(current_schema() || ':group:' || $2::text))`
	// sqlSetPaused pauses or resumes a queue, creating it if unknown.
	sqlSetPaused = `INSERT INTO spool_queues (name, paused) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`
	sqlEnsureQueue = `INSERT INTO spool_queues (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`
	// sqlLockQueueRow locks a queue's row, as QueueSetPaused and
	// QueueSetLimits do by writing it, and reads whether it is grouped.
	sqlLockQueueRow = `SELECT grouped FROM spool_queues WHERE name = $1 FOR NO KEY UPDATE`
	sqlGroupAdd     = `INSERT INTO spool_consumer_groups (queue, name, created_at) VALUES ($1, $2, $3)
ON CONFLICT (queue, name) DO NOTHING`
	sqlGroupRemove = `DELETE FROM spool_consumer_groups WHERE queue = $1 AND name = $2`
	sqlGroupExists = `SELECT EXISTS (SELECT 1 FROM spool_consumer_groups WHERE queue = $1 AND name = $2)`
	// sqlClearLaneHot deletes the pending jobs of lane $1, active ones
	// with their leases; sqlClearLaneDone its finished ones.
	sqlClearLaneHot = `WITH gone AS (
	DELETE FROM spool_jobs WHERE queue = $1 AND ` + isLane + ` RETURNING seq
)
DELETE FROM spool_leases WHERE seq = ANY (ARRAY(SELECT seq FROM gone))`
	sqlClearLaneDone = `DELETE FROM spool_jobs_done WHERE queue = $1`
	// sqlCopyToLanes copies the jobs $1, which the transaction has just
	// inserted, into the lanes of the groups ($2 queue, $3 name) of their
	// queues, in enqueue order. A copy keeps its job's state, times and
	// group; a job without a group has the empty group in a lane with flow
	// control, whose flow lock (its queue's) the transaction holds. A copy
	// whose id exists, in either table, is skipped.
	sqlCopyToLanes = `WITH c AS (
	SELECT j.seq, j.id || '` + job.LaneSep + `' || g.name AS id, g.queue || '` + job.LaneSep + `' || g.name AS queue,
		j.kind, j.payload, j.priority, j.state, j.run_at, j.max_attempts, j.backoff_kind, j.backoff_base,
		j.backoff_max, j.backoff_jitter, j.lease_ns, j.tags, j.durability, j.grp, j.created_at, j.traceparent
	FROM spool_jobs j JOIN unnest($2::text[], $3::text[]) AS g(queue, name) ON g.queue = j.queue
	WHERE j.id = ANY($1::text[])
)
INSERT INTO spool_jobs (` + copyColumns + `)
SELECT c.id, c.queue, c.kind, c.payload, c.priority, c.state, c.run_at, c.max_attempts, c.backoff_kind,
	c.backoff_base, c.backoff_max, c.backoff_jitter, c.lease_ns, c.tags, c.durability,
	CASE WHEN c.grp IS NOT NULL THEN c.grp WHEN l.flow THEN '' END, c.created_at, c.traceparent
FROM c LEFT JOIN spool_queues l ON l.name = c.queue
WHERE NOT EXISTS (SELECT 1 FROM spool_jobs x WHERE x.id = c.id)
	AND NOT EXISTS (SELECT 1 FROM spool_jobs_done d WHERE d.id = c.id)
ORDER BY c.seq, c.queue
ON CONFLICT (id) DO NOTHING`
	// sqlStartLane gives lane $2 of queue $1 a copy (store.CopyOf, id
	// suffix $3) of each job of the queue, pending or finished, created
	// at or after $4 (NULL: every job), in enqueue order, scheduled when
	// due after $5, and counts them and the available ones. A copy the
	// snapshot holds in either table is skipped, so one that an ack moves
	// meanwhile cannot come back as a second one.
	sqlStartLane = `WITH c AS (
	SELECT seq, id || $3::text AS copy_id, kind, payload, priority, run_at, max_attempts, backoff_kind, backoff_base,
		backoff_max, backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent
	FROM spool_jobs WHERE queue = $1::text AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
	UNION ALL
	SELECT seq, id || $3::text, kind, payload, priority, run_at, max_attempts, backoff_kind, backoff_base,
		backoff_max, backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent
	FROM spool_jobs_done WHERE queue = $1::text AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
), ins AS (
	INSERT INTO spool_jobs (` + copyColumns + `)
	SELECT c.copy_id, $2::text, c.kind, c.payload, c.priority,
		CASE WHEN c.run_at > $5::timestamptz THEN 'scheduled' ELSE 'available' END, c.run_at, c.max_attempts,
		c.backoff_kind, c.backoff_base, c.backoff_max, c.backoff_jitter, c.lease_ns, c.tags, c.durability,
		CASE WHEN c.grp IS NOT NULL THEN c.grp WHEN (SELECT flow FROM spool_queues WHERE name = $2::text) THEN '' END,
		c.created_at, c.traceparent
	FROM c
	WHERE NOT EXISTS (SELECT 1 FROM spool_jobs x WHERE x.id = c.copy_id)
		AND NOT EXISTS (SELECT 1 FROM spool_jobs_done d WHERE d.id = c.copy_id)
	ORDER BY c.seq
	ON CONFLICT (id) DO NOTHING
	RETURNING state
)
SELECT count(*), count(*) FILTER (WHERE state = 'available') FROM ins`
	// sqlGroupList reads the groups of queue $1 in byte order of their
	// names; sqlGroupListAll a page of $3 groups of every queue after the
	// group ($1, $2), in byte order of queue then name.
	sqlGroupList    = `SELECT queue, name, created_at FROM spool_consumer_groups WHERE queue = $1 ORDER BY name COLLATE "C"`
	sqlGroupListAll = `SELECT queue, name, created_at FROM spool_consumer_groups
WHERE queue COLLATE "C" > $1 OR (queue = $1 AND name COLLATE "C" > $2)
ORDER BY queue COLLATE "C", name COLLATE "C" LIMIT $3`
	// sqlLaneStanding reads, for each lane of $1, the creation time of
	// its oldest pending job (a seek of the lane index) and its counts,
	// one row a state, as sqlQueues computes them.
	sqlLaneStanding = `SELECT l.name, o.oldest, c.state, c.n FROM unnest($1::text[]) AS l(name)
CROSS JOIN LATERAL (SELECT min(j.created_at) AS oldest FROM spool_jobs j WHERE j.queue = l.name AND j.` + isLane + `) o
LEFT JOIN LATERAL (
	SELECT state, sum(n)::int8 AS n FROM (
		SELECT state, n FROM spool_counts WHERE queue = l.name
		UNION ALL
		SELECT state, n FROM spool_count_deltas WHERE queue = l.name) x
	GROUP BY state
) c ON true`
)

// laneSet holds the consumer groups of queues: their names by queue.
type laneSet map[string][]string

// add records group name of queue.
func (ls *laneSet) add(queue, name string) {
	if *ls == nil {
		*ls = make(laneSet)
	}
	(*ls)[queue] = append((*ls)[queue], name)
}

// copyToLanes adds to batch, sent in tx, the statement that copies the
// jobs of ids, which tx has just inserted, into the lanes of their
// queues' groups, lanes, and announces the lanes of the queues among
// available that get available jobs once tx commits; see sqlCopyToLanes.
func (cg *consumerGroups) copyToLanes(tx pgx.Tx, batch *pgx.Batch, lanes laneSet, ids, available []string) {
	if len(ids) == 0 || len(lanes) == 0 {
		return
	}
	var queues, names, wake []string
	for q, gs := range lanes {
		for _, g := range gs {
			queues, names = append(queues, q), append(names, g)
			if slices.Contains(available, q) {
				wake = append(wake, job.LaneName(q, g))
			}
		}
	}
	batch.Queue(sqlCopyToLanes, ids, queues, names)
	cg.announceOnCommit(tx, wake)
}

// ConsumerGroupCreate creates a consumer group and gives it the jobs it
// starts with; see store.ConsumerGroups and the top of this file.
func (cg *consumerGroups) ConsumerGroupCreate(ctx context.Context, p *store.ConsumerGroupParams) (bool, error) {
	lane := job.LaneName(p.Queue, p.Name)
	created := false
	err := cg.withGroupLock(ctx, lane, func(conn *pgxpool.Conn) error {
		var flow bool
		err := cg.txOn(ctx, conn, func(tx pgx.Tx) (err error) {
			created, flow, err = cg.record(ctx, tx, p, lane)
			return err
		})
		if err != nil || !created {
			return err
		}
		cg.rememberFlow(map[string]bool{lane: flow})
		if p.Start == job.StartNew {
			return nil
		}
		err = cg.txOn(ctx, conn, func(tx pgx.Tx) error {
			if err := lockFlow(ctx, tx, sqlLockFlowShared, p.Queue); err != nil {
				return err
			}
			_, err := cg.copyStart(ctx, tx, p)
			return err
		})
		if err != nil {
			return cg.undoCreate(ctx, p, err)
		}
		return nil
	})
	if err != nil {
		return false, wrap(fmt.Sprintf("create consumer group %s of %s", p.Name, p.Queue), err)
	}
	return created, nil
}

// record records group p in tx unless it exists, under its queue's flow
// and row locks, and gives its lane, cleared of what an earlier group of
// its name left, the queue's pause, limits and grouped flag. It returns
// whether it created the group and whether the lane has flow control.
func (cg *consumerGroups) record(ctx context.Context, tx pgx.Tx, p *store.ConsumerGroupParams, lane string) (created, flow bool, err error) {
	if err := lockFlow(ctx, tx, sqlLockFlow, p.Queue); err != nil {
		return false, false, err
	}
	if _, err := tx.Exec(ctx, sqlEnsureQueue, p.Queue); err != nil {
		return false, false, fmt.Errorf("create queue: %w", err)
	}
	var grouped bool
	if err := tx.QueryRow(ctx, sqlLockQueueRow, p.Queue).Scan(&grouped); err != nil {
		return false, false, fmt.Errorf("lock queue: %w", err)
	}
	tag, err := tx.Exec(ctx, sqlGroupAdd, p.Queue, p.Name, micro(p.Now))
	if err != nil {
		return false, false, fmt.Errorf("record consumer group: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return false, false, nil
	}
	qs, err := cg.queues.read(ctx, tx, p.Queue, false)
	if err == nil && len(qs) != 1 {
		err = fmt.Errorf("%d rows", len(qs))
	}
	if err != nil {
		return false, false, fmt.Errorf("read queue: %w", err)
	}
	if err := clearLane(ctx, tx, lane); err != nil {
		return false, false, err
	}
	if flow, _, err = applyLimits(ctx, tx, lane, qs[0].Limits, grouped); err != nil {
		return false, false, err
	}
	if _, err := tx.Exec(ctx, sqlSetPaused, lane, qs[0].Paused); err != nil {
		return false, false, fmt.Errorf("pause lane %s: %w", lane, err)
	}
	return true, flow, nil
}

// undoCreate deletes group p, whose start failed with cause, so that
// creating it again starts over, and returns cause with what the undo
// met. It runs on even when ctx has ended.
func (cg *consumerGroups) undoCreate(ctx context.Context, p *store.ConsumerGroupParams, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := cg.tx(ctx, func(tx pgx.Tx) error {
		if err := lockFlow(ctx, tx, sqlLockFlow, p.Queue); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlGroupRemove, p.Queue, p.Name); err != nil {
			return fmt.Errorf("remove consumer group: %w", err)
		}
		return clearLane(ctx, tx, job.LaneName(p.Queue, p.Name))
	})
	if err != nil {
		return fmt.Errorf("%w; the group stays without its start (delete it or seek it): %w", cause, err)
	}
	return fmt.Errorf("%w; the group was not created", cause)
}

// ConsumerGroupSeek empties a group's lane and gives it the jobs of its
// new start, in one transaction; see store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupSeek(ctx context.Context, p *store.ConsumerGroupParams) (int, error) {
	lane := job.LaneName(p.Queue, p.Name)
	n := 0
	err := cg.withGroupLock(ctx, lane, func(conn *pgxpool.Conn) error {
		return cg.txOn(ctx, conn, func(tx pgx.Tx) (err error) {
			var exists bool
			if err := tx.QueryRow(ctx, sqlGroupExists, p.Queue, p.Name).Scan(&exists); err != nil {
				return fmt.Errorf("read consumer group: %w", err)
			}
			if !exists {
				return job.ErrNotFound
			}
			if err := lockFlow(ctx, tx, sqlLockFlowShared, p.Queue); err != nil {
				return err
			}
			if err := clearLane(ctx, tx, lane); err != nil {
				return err
			}
			n, err = cg.copyStart(ctx, tx, p)
			return err
		})
	})
	if err != nil {
		return 0, wrap(fmt.Sprintf("seek consumer group %s of %s", p.Name, p.Queue), err)
	}
	return n, nil
}

// ConsumerGroupDelete deletes a group and its lane's jobs, of which the
// other nodes hear once it commits (Hooks.OnConsumerGroupsDeleted); the
// lane's queue row stays; see store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupDelete(ctx context.Context, queue, name string) error {
	lane := job.LaneName(queue, name)
	err := cg.withGroupLock(ctx, lane, func(conn *pgxpool.Conn) error {
		return cg.txOn(ctx, conn, func(tx pgx.Tx) error {
			if err := lockFlow(ctx, tx, sqlLockFlow, queue); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, sqlGroupRemove, queue, name)
			if err != nil {
				return fmt.Errorf("remove consumer group: %w", err)
			}
			if tag.RowsAffected() == 0 {
				return job.ErrNotFound
			}
			if _, err := tx.Exec(ctx, sqlClearGroupStarts, lane); err != nil {
				return fmt.Errorf("clear group start logs of %s: %w", lane, err)
			}
			if err := cg.notify(ctx, tx, groupsTag, []string{lane}); err != nil {
				return fmt.Errorf("announce the deletion: %w", err)
			}
			return clearLane(ctx, tx, lane)
		})
	})
	return wrap(fmt.Sprintf("delete consumer group %s of %s", name, queue), err)
}

// ConsumerGroupList lists a queue's groups with their lanes' counts; see
// store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	out, err := consumergroup.List(ctx, groupReader{cg}, queue, nil)
	return out, wrap(fmt.Sprintf("list consumer groups of %s", queue), err)
}

// ConsumerGroupListAll lists a page of the groups of every queue with
// their lanes' counts; see store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	out, err := consumergroup.List(ctx, groupReader{cg}, "", p)
	return out, wrap("list consumer groups", err)
}

// groupReader reads the consumer groups in one statement and their lanes'
// standing in another.
type groupReader struct{ *consumerGroups }

// Groups reads the groups' rows; see consumergroup.Reader.
func (r groupReader) Groups(ctx context.Context, queue string, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	query, args := sqlGroupList, []any{queue}
	if p != nil {
		query, args = sqlGroupListAll, []any{p.AfterQueue, p.AfterName, p.PageSize()}
	}
	rows, err := r.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (g job.ConsumerGroup, err error) {
		err = row.Scan(&g.Queue, &g.Name, &g.CreatedAt)
		g.CreatedAt = g.CreatedAt.UTC()
		return g, err
	})
}

// Standing reads the lanes' standing (sqlLaneStanding); see
// consumergroup.Reader.
func (r groupReader) Standing(ctx context.Context, gs []job.ConsumerGroup) error {
	lanes := make([]string, len(gs))
	byLane := make(map[string]*job.ConsumerGroup, len(gs))
	for i := range gs {
		lanes[i] = job.LaneName(gs[i].Queue, gs[i].Name)
		byLane[lanes[i]] = &gs[i]
	}
	rows, err := r.pool.Query(ctx, sqlLaneStanding, lanes)
	if err != nil {
		return err
	}
	var (
		lane   string
		oldest *time.Time
		state  *string
		n      *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&lane, &oldest, &state, &n}, func() error {
		g := byLane[lane]
		g.OldestPending = utc(oldest)
		if state != nil && n != nil {
			g.Counts[job.State(*state)] += *n
		}
		return nil
	})
	return err
}

// clearLane deletes every job of lane in tx, active ones with their
// leases. It deletes the pending jobs first, then the finished ones: a
// job that an ack moves meanwhile is waited for by the first and seen
// by the second. It deletes the pending jobs again after, for a job that
// a retry moved back from spool_jobs_done in between.
func clearLane(ctx context.Context, tx pgx.Tx, lane string) error {
	for _, sql := range []string{sqlClearLaneHot, sqlClearLaneDone, sqlClearLaneHot} {
		if _, err := tx.Exec(ctx, sql, lane); err != nil {
			return fmt.Errorf("clear lane %s: %w", lane, err)
		}
	}
	return nil
}

// copyStart gives group p the jobs its start names (sqlStartLane) in tx,
// which holds the queue's flow lock shared, and returns how many.
func (cg *consumerGroups) copyStart(ctx context.Context, tx pgx.Tx, p *store.ConsumerGroupParams) (int, error) {
	from, none, err := p.Since()
	if none || err != nil {
		return 0, err
	}
	lane := job.LaneName(p.Queue, p.Name)
	var n, available int64
	err = tx.QueryRow(ctx, sqlStartLane, p.Queue, lane, job.CopyID("", p.Name), tstz(from), micro(p.Now)).Scan(&n, &available)
	if err != nil {
		return 0, fmt.Errorf("copy the start: %w", err)
	}
	if available > 0 {
		cg.announceOnCommit(tx, []string{lane})
	}
	return int(n), nil
}

// lockFlow takes the flow lock of queue in tx, exclusive or shared as
// lock (sqlLockFlow, sqlLockFlowShared) says.
func lockFlow(ctx context.Context, tx pgx.Tx, lock, queue string) error {
	if _, err := tx.Exec(ctx, lock, []string{queue}, lockClass); err != nil {
		return fmt.Errorf("lock queue: %w", err)
	}
	return nil
}

// withGroupLock runs fn on a connection that holds the session lock of
// the consumer group whose lane is lane, and releases the lock after. A
// connection that cannot release it is closed, which does.
func (cg *consumerGroups) withGroupLock(ctx context.Context, lane string, fn func(*pgxpool.Conn) error) error {
	if err := cg.check(); err != nil {
		return err
	}
	conn, err := cg.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sqlLockGroup, lockClass, lane); err != nil {
		_ = conn.Conn().Close(context.WithoutCancel(ctx))
		return fmt.Errorf("lock consumer group: %w", err)
	}
	err = fn(conn)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, uerr := conn.Exec(uctx, sqlUnlockGroup, lockClass, lane); uerr != nil {
		_ = conn.Conn().Close(uctx)
	}
	return err
}
