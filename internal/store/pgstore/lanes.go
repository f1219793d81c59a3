package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Consumer groups (store.ConsumerGroups) on PostgreSQL.
//
// A group is a row of spool_consumer_groups; its jobs are copies
// (job.CopyID) in its lane (job.LaneName), a queue like any other. The
// lane's spool_queues row follows the queue's: a creation gives it the
// queue's pause, limits and grouped flag; QueueSetPaused and
// QueueSetLimits change the queue and its lanes in one transaction; a
// queue that becomes grouped makes its lanes grouped. A creation takes the
// queue's flow lock and row lock, which those changes take too, so each
// sees the other whole.
//
// Fan-out. The statement that inserts jobs (sqlInsertJobs) also reads the
// groups of their queues, in its own snapshot; when it finds some, one
// more statement of the transaction (sqlCopyToLanes) copies the jobs it
// inserted into each lane, so that a job and its copies commit together.
// A queue without groups costs one look at the small group table per
// insert, and nothing else. A lane shares its queue's flow lock
// (flowLockKey), so that a copy gets the empty group exactly when its lane
// has flow control, as its job does in its queue.
//
// Creation and deletion. Every transaction that puts jobs into a queue
// holds the queue's flow lock shared from before the statement that reads
// its groups (flow.go). A creation commits the group under the lock held
// exclusively, in a short transaction of its own: a writer under way when
// it came ended first, and a later one reads the group in a snapshot taken
// after the commit and makes its copies itself. The creation then copies
// the jobs of its start (sqlStartLane) in a second transaction, under the
// lock shared, so that inserts go on meanwhile; a job its snapshot holds
// has its copies there too when its insert saw the group, in either
// table, and the start skips those. A creation that fails after its
// commit deletes the group again, so that creating it again starts over.
// A deletion removes the group and clears its lane under the lock held
// exclusively; a seek clears the lane and copies its start in one
// transaction, which leaves each job of the start one copy.
//
// Creations, seeks and deletions of one group run one at a time across
// the nodes, under a session advisory lock of the group's lane.

// copyColumns are the columns a copy sets; the others take their
// defaults (no attempt, no unique key, no lease).
const copyColumns = `id, queue, kind, payload, priority, state, run_at, max_attempts, backoff_kind, backoff_base,
	backoff_max, backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent`

// groupLag joins each consumer group g with the creation time of its
// lane's oldest pending job (a seek of the lane index) and its lane's
// counts, one row a state, as sqlQueues computes them.
const groupLag = `
CROSS JOIN LATERAL (
	SELECT min(j.created_at) AS oldest FROM spool_jobs j
	WHERE j.queue = g.queue || '` + job.LaneSep + `' || g.name AND j.` + isLane + `
) o
LEFT JOIN LATERAL (
	SELECT state, sum(n)::int8 AS n FROM (
		SELECT state, n FROM spool_counts WHERE queue = g.queue || '` + job.LaneSep + `' || g.name
		UNION ALL
		SELECT state, n FROM spool_count_deltas WHERE queue = g.queue || '` + job.LaneSep + `' || g.name) x
	GROUP BY state
) c ON true`

// isLane is the predicate of the lane index: only a lane's name holds
// job.LaneSep. A query meant for the index states it as written here.
const isLane = `queue LIKE '%` + job.LaneSep + `%'`

// consumerGroups creates, seeks, deletes and lists the consumer groups of
// queues, and copies jobs into their lanes.
type consumerGroups struct {
	*db
	*beliefs
	flow   *flowControl
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
	// sqlStartLane gives group $2 of queue $1 a copy (store.CopyOf) of
	// each job of the queue, pending or finished, created at or after $3
	// (every job when NULL), in enqueue order, scheduled when due after
	// $4. It reads both tables whole, since no index of theirs leads to
	// every job of a queue. A job whose copy the snapshot holds, in
	// either table, is skipped: checked against the snapshot rather than
	// left to ON CONFLICT, a copy that an ack moves to spool_jobs_done
	// meanwhile cannot come back as a second one. It returns how many
	// copies it made and how many of them are available.
	sqlStartLane = `WITH src AS (
	SELECT seq, id, kind, payload, priority, run_at, max_attempts, backoff_kind, backoff_base, backoff_max,
		backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent
	FROM spool_jobs WHERE queue = $1::text AND ($3::timestamptz IS NULL OR created_at >= $3::timestamptz)
	UNION ALL
	SELECT seq, id, kind, payload, priority, run_at, max_attempts, backoff_kind, backoff_base, backoff_max,
		backoff_jitter, lease_ns, tags, durability, grp, created_at, traceparent
	FROM spool_jobs_done WHERE queue = $1::text AND ($3::timestamptz IS NULL OR created_at >= $3::timestamptz)
), lane AS (
	SELECT $1::text || '` + job.LaneSep + `' || $2::text AS name,
		COALESCE((SELECT flow FROM spool_queues WHERE name = $1::text || '` + job.LaneSep + `' || $2::text), false) AS flow
), c AS (
	SELECT src.*, src.id || '` + job.LaneSep + `' || $2::text AS copy_id FROM src
), ins AS (
	INSERT INTO spool_jobs (` + copyColumns + `)
	SELECT c.copy_id, lane.name, c.kind, c.payload, c.priority,
		CASE WHEN c.run_at > $4::timestamptz THEN 'scheduled' ELSE 'available' END, c.run_at, c.max_attempts,
		c.backoff_kind, c.backoff_base, c.backoff_max, c.backoff_jitter, c.lease_ns, c.tags, c.durability,
		CASE WHEN c.grp IS NOT NULL THEN c.grp WHEN lane.flow THEN '' END, c.created_at, c.traceparent
	FROM c CROSS JOIN lane
	WHERE NOT EXISTS (SELECT 1 FROM spool_jobs x WHERE x.id = c.copy_id)
		AND NOT EXISTS (SELECT 1 FROM spool_jobs_done d WHERE d.id = c.copy_id)
	ORDER BY c.seq
	ON CONFLICT (id) DO NOTHING
	RETURNING state
)
SELECT count(*), count(*) FILTER (WHERE state = 'available') FROM ins`
	// sqlGroupList reads the groups of queue $1 in byte order of their
	// names, each with its lag (groupLag), one row a state.
	sqlGroupList = `SELECT g.queue, g.name, g.created_at, o.oldest, c.state, c.n
FROM spool_consumer_groups g` + groupLag + `
WHERE g.queue = $1
ORDER BY g.name COLLATE "C"`
	// sqlGroupListAll reads a page of $3 groups of every queue after the
	// group ($1, $2), in byte order of queue then name, each with its lag
	// (groupLag), one row a state.
	sqlGroupListAll = `SELECT g.queue, g.name, g.created_at, o.oldest, c.state, c.n
FROM (SELECT queue, name, created_at FROM spool_consumer_groups
	WHERE queue COLLATE "C" > $1 OR (queue = $1 AND name COLLATE "C" > $2)
	ORDER BY queue COLLATE "C", name COLLATE "C" LIMIT $3) g` + groupLag + `
ORDER BY g.queue COLLATE "C", g.name COLLATE "C"`
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

// ConsumerGroupCreate creates a consumer group, its lane following its
// queue, and gives it the jobs it starts with; see store.ConsumerGroups
// and, for how no job inserted meanwhile goes without a copy, the top of
// this file.
func (cg *consumerGroups) ConsumerGroupCreate(ctx context.Context, p *store.ConsumerGroupParams) (bool, error) {
	lane := job.LaneName(p.Queue, p.Name)
	created := false
	err := cg.withGroupLock(ctx, lane, func(conn *pgxpool.Conn) error {
		var flow bool
		err := cg.txOn(ctx, conn, func(tx pgx.Tx) error {
			created = false
			if _, err := tx.Exec(ctx, sqlLockFlow, []string{p.Queue}, lockClass); err != nil {
				return fmt.Errorf("lock queue: %w", err)
			}
			if _, err := tx.Exec(ctx, sqlEnsureQueue, p.Queue); err != nil {
				return fmt.Errorf("create queue: %w", err)
			}
			var grouped bool
			if err := tx.QueryRow(ctx, sqlLockQueueRow, p.Queue).Scan(&grouped); err != nil {
				return fmt.Errorf("lock queue: %w", err)
			}
			tag, err := tx.Exec(ctx, sqlGroupAdd, p.Queue, p.Name, micro(p.Now))
			if err != nil {
				return fmt.Errorf("record consumer group: %w", err)
			}
			if tag.RowsAffected() == 0 {
				return nil
			}
			created = true
			flow, err = cg.followQueue(ctx, tx, p.Queue, lane, grouped)
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
			if _, err := tx.Exec(ctx, sqlLockFlowShared, []string{p.Queue}, lockClass); err != nil {
				return fmt.Errorf("lock queue: %w", err)
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

// followQueue gives lane, just created in tx, the pause, limits and
// grouped flag of its queue, whose flow lock and row lock tx holds, and
// clears it of the jobs an earlier group of its name may have left. It
// returns whether the lane has flow control.
func (cg *consumerGroups) followQueue(ctx context.Context, tx pgx.Tx, queue, lane string, grouped bool) (bool, error) {
	qs, err := cg.queues.read(ctx, tx, queue, false)
	if err != nil {
		return false, fmt.Errorf("read queue: %w", err)
	}
	if len(qs) != 1 {
		return false, fmt.Errorf("read queue: %d rows", len(qs))
	}
	if err := clearLane(ctx, tx, lane); err != nil {
		return false, err
	}
	flow, _, err := applyLimits(ctx, tx, lane, qs[0].Limits, grouped)
	if err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, sqlSetPaused, lane, qs[0].Paused); err != nil {
		return false, fmt.Errorf("pause lane %s: %w", lane, err)
	}
	return flow, nil
}

// undoCreate deletes group p, whose start failed with cause, so that
// creating it again starts over, and returns cause with what the undo
// met. It runs on even when ctx has ended.
func (cg *consumerGroups) undoCreate(ctx context.Context, p *store.ConsumerGroupParams, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	lane := job.LaneName(p.Queue, p.Name)
	err := cg.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{p.Queue}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlGroupRemove, p.Queue, p.Name); err != nil {
			return fmt.Errorf("remove consumer group: %w", err)
		}
		return clearLane(ctx, tx, lane)
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
		return cg.txOn(ctx, conn, func(tx pgx.Tx) error {
			var exists bool
			if err := tx.QueryRow(ctx, sqlGroupExists, p.Queue, p.Name).Scan(&exists); err != nil {
				return fmt.Errorf("read consumer group: %w", err)
			}
			if !exists {
				return job.ErrNotFound
			}
			if _, err := tx.Exec(ctx, sqlLockFlowShared, []string{p.Queue}, lockClass); err != nil {
				return fmt.Errorf("lock queue: %w", err)
			}
			if err := clearLane(ctx, tx, lane); err != nil {
				return err
			}
			var err error
			n, err = cg.copyStart(ctx, tx, p)
			return err
		})
	})
	if err != nil {
		return 0, wrap(fmt.Sprintf("seek consumer group %s of %s", p.Name, p.Queue), err)
	}
	return n, nil
}

// ConsumerGroupDelete deletes a group and its lane's jobs, under the
// queue's flow lock (see the top of this file); see store.ConsumerGroups.
// The other nodes hear of it once it commits
// (Hooks.OnConsumerGroupsDeleted). The lane's queue row stays, without
// jobs.
func (cg *consumerGroups) ConsumerGroupDelete(ctx context.Context, queue, name string) error {
	lane := job.LaneName(queue, name)
	err := cg.withGroupLock(ctx, lane, func(conn *pgxpool.Conn) error {
		return cg.txOn(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, sqlLockFlow, []string{queue}, lockClass); err != nil {
				return fmt.Errorf("lock queue: %w", err)
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
	if err != nil {
		return wrap(fmt.Sprintf("delete consumer group %s of %s", name, queue), err)
	}
	return nil
}

// ConsumerGroupList lists a queue's groups with their lanes' counts; see
// store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	out, err := cg.readGroups(ctx, sqlGroupList, queue)
	return out, wrap(fmt.Sprintf("list consumer groups of %s", queue), err)
}

// ConsumerGroupListAll lists a page of the groups of every queue with
// their lanes' counts, in one statement; see store.ConsumerGroups.
func (cg *consumerGroups) ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	out, err := cg.readGroups(ctx, sqlGroupListAll, p.AfterQueue, p.AfterName, p.PageSize())
	return out, wrap("list consumer groups", err)
}

// readGroups runs query, which reads groups with their lag (groupLag)
// in order, one row a state, and gathers each group's rows.
func (cg *consumerGroups) readGroups(ctx context.Context, query string, args ...any) ([]job.ConsumerGroup, error) {
	if err := cg.check(); err != nil {
		return nil, err
	}
	rows, err := cg.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out := []job.ConsumerGroup{}
	var (
		queue, name string
		created     time.Time
		oldest      pgtype.Timestamptz
		state       *string
		n           *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&queue, &name, &created, &oldest, &state, &n}, func() error {
		if len(out) == 0 || out[len(out)-1].Queue != queue || out[len(out)-1].Name != name {
			counts := make(map[job.State]int64, len(job.States))
			for _, st := range job.States {
				counts[st] = 0
			}
			g := job.ConsumerGroup{Queue: queue, Name: name, CreatedAt: created.UTC(), Counts: counts}
			if oldest.Valid {
				g.OldestPending = oldest.Time.UTC()
			}
			out = append(out, g)
		}
		if state != nil && n != nil {
			out[len(out)-1].Counts[job.State(*state)] += *n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
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

// copyStart gives group p.Name the jobs of p.Queue that p.Start names, in
// tx, which holds the queue's flow lock shared, and returns how many;
// see sqlStartLane.
func (cg *consumerGroups) copyStart(ctx context.Context, tx pgx.Tx, p *store.ConsumerGroupParams) (int, error) {
	from, none, err := p.Since()
	if none || err != nil {
		return 0, err
	}
	var n, available int64
	if err := tx.QueryRow(ctx, sqlStartLane, p.Queue, p.Name, tstz(from), micro(p.Now)).Scan(&n, &available); err != nil {
		return 0, fmt.Errorf("copy the start: %w", err)
	}
	if available > 0 {
		cg.announceOnCommit(tx, []string{job.LaneName(p.Queue, p.Name)})
	}
	return int(n), nil
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
