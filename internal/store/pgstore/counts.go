package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/adminkit"
)

// queueReader reads the queues with their configuration and counts, and
// folds the count deltas into the counts.
type queueReader struct {
	*db
	*beliefs
}

const (
	// sqlQueues reads every queue with its configuration and its counts:
	// the folded counts plus the deltas not folded yet, one row a state. $1
	// names one queue, or '' for all. With $2 it also reads each queue's
	// oldest available run time (sqlOldest), once per queue.
	sqlQueues = `WITH q AS MATERIALIZED (
	SELECT q.*, CASE WHEN $2 THEN (` + sqlOldest + `) END AS oldest FROM spool_queues q
	WHERE $1 = '' OR q.name = $1
)
SELECT q.name, ` + queueConfig + `, q.oldest, c.state, c.n FROM q
LEFT JOIN (
	SELECT queue, state, sum(n)::int8 AS n FROM (
		SELECT queue, state, n FROM spool_counts
		UNION ALL SELECT queue, state, n FROM spool_count_deltas) x
	GROUP BY queue, state
) c ON c.queue = q.name
ORDER BY q.name`
	// queueConfig are the columns of the configuration of queue q, in
	// configDest's order.
	queueConfig = `q.paused, q.durability, q.rate_limit, q.rate_period_ns, q.max_active, q.group_rate_limit,
	q.group_rate_period_ns, q.group_max_active, q.ordered, COALESCE(q.dead_letter_queue, ''), q.max_wait_ns,
	q.default_lease_ns, q.default_max_attempts, q.default_delay_ns`
	// sqlOldest is the earliest run time of the available jobs of queue
	// q.name, by a loose scan of the claim index: one seek finds each
	// priority its available jobs use, one more that priority's first job,
	// which is its oldest; it never reads the jobs in between.
	sqlOldest = `WITH RECURSIVE p(priority) AS (
		(SELECT j.priority FROM spool_jobs j WHERE j.queue = q.name AND j.state = 'available'
		ORDER BY j.priority DESC LIMIT 1)
		UNION ALL
		SELECT (SELECT j.priority FROM spool_jobs j WHERE j.queue = q.name AND j.state = 'available' AND j.priority < p.priority
			ORDER BY j.priority DESC LIMIT 1)
		FROM p WHERE p.priority IS NOT NULL
	)
	SELECT min((SELECT j.run_at FROM spool_jobs j WHERE j.queue = q.name AND j.state = 'available' AND j.priority = p.priority
		ORDER BY j.priority DESC, j.run_at LIMIT 1))
	FROM p WHERE p.priority IS NOT NULL`
	// sqlQueueDefaults reads the configuration of one queue.
	sqlQueueDefaults = `SELECT ` + queueConfig + ` FROM spool_queues q WHERE name = $1`
	// sqlRollup folds the count deltas into the counts, one node at a
	// time (sqlRollupLock), in key order so that it never deadlocks.
	sqlRollupLock = `SELECT pg_try_advisory_xact_lock($1, $2)`
	sqlRollup     = `WITH d AS (
	DELETE FROM spool_count_deltas RETURNING queue, state, n
)
INSERT INTO spool_counts (queue, state, n)
SELECT queue, state, sum(n) FROM d GROUP BY queue, state ORDER BY queue, state
ON CONFLICT (queue, state) DO UPDATE SET n = spool_counts.n + excluded.n`
)

// configDest are the scan destinations of queueConfig's columns in q.
func configDest(q *adminkit.Queue) []any {
	l, s := &q.Limits, &q.Settings
	return []any{&q.Paused, &q.Durability, &l.Rate.Limit, &l.Rate.Period, &l.MaxActive, &l.GroupRate.Limit,
		&l.GroupRate.Period, &l.GroupMaxActive, &l.Ordered, &s.DeadLetterQueue, &s.MaxWait,
		&s.DefaultLease, &s.DefaultMaxAttempts, &s.DefaultDelay}
}

// QueueList returns every known queue by name; see store.Admin.
func (r *queueReader) QueueList(ctx context.Context) ([]job.QueueInfo, error) {
	qs, err := r.read(ctx, r.pool, "", true)
	if err != nil {
		return nil, wrap("list queues", err)
	}
	return qs, nil
}

// QueueGet returns one queue or job.ErrNotFound; see store.Admin.
func (r *queueReader) QueueGet(ctx context.Context, name string) (*job.QueueInfo, error) {
	if name == "" {
		return nil, fmt.Errorf("get queue: %w", job.ErrNotFound)
	}
	qs, err := r.read(ctx, r.pool, name, false)
	if err != nil {
		return nil, wrap("get queue", err)
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("get queue %s: %w", name, job.ErrNotFound)
	}
	return &qs[0], nil
}

// QueueDefaults returns what a queue gives its new jobs, by one lookup of
// its row or, while this node listens, from what it read of a queue that
// exists in the last defaultsTTL (see defaultsCache); see store.Admin.
func (r *queueReader) QueueDefaults(ctx context.Context, name string) (store.QueueDefaults, error) {
	if err := r.check(); err != nil {
		return store.QueueDefaults{}, wrap("get queue defaults", err)
	}
	now := time.Now()
	if e, ok := r.defaults.get(name, now); ok {
		return e.d, nil
	}
	gen := r.defaults.gen.Load()
	var q adminkit.Queue
	err := r.pool.QueryRow(ctx, sqlQueueDefaults, name).Scan(configDest(&q)...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Not kept: an insert on any node may create the queue at any
		// moment, and whether it exists decides what a call that creates
		// queues (engine.NewQueues) asks for.
		return store.QueueDefaults{}, fmt.Errorf("get queue defaults of %s: %w", name, job.ErrNotFound)
	case err != nil:
		return store.QueueDefaults{}, wrap("get queue defaults", err)
	}
	d := q.Defaults()
	r.defaults.put(name, gen, cachedDefaults{d: d, expires: now.Add(defaultsTTL)})
	return d, nil
}

// read reads queue name, or every queue for "", through q; with oldest
// it also reads their oldest available run times.
func (r *queueReader) read(ctx context.Context, q querier, name string, oldest bool) ([]job.QueueInfo, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, sqlQueues, name, oldest)
	if err != nil {
		return nil, err
	}
	var (
		qs       []adminkit.Record
		oldests  []time.Time
		row      adminkit.Record
		oldestAt *time.Time
		state    *string
		n        *int64
	)
	dest := append(append([]any{&row.Name}, configDest(&row.Queue)...), &oldestAt, &state, &n)
	_, err = pgx.ForEachRow(rows, dest, func() error {
		if len(qs) == 0 || qs[len(qs)-1].Name != row.Name {
			qs, oldests = append(qs, row), append(oldests, utc(oldestAt))
		}
		if state != nil && n != nil {
			qs[len(qs)-1].Counts[adminkit.Index(job.State(*state))] += *n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]job.QueueInfo, len(qs))
	for i := range qs {
		out[i] = qs[i].Info(oldests[i])
	}
	return out, nil
}

// rollupInterval is how often a node folds count deltas into the counts
// table.
const rollupInterval = time.Second

// rollupLoop folds count deltas every rollupInterval until ctx ends.
func (r *queueReader) rollupLoop(ctx context.Context) {
	t := time.NewTicker(rollupInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.rollup(ctx); err != nil && ctx.Err() == nil {
			if failures++; failures == 1 || failures%60 == 0 {
				r.logger.Warn("pgstore: fold queue counts", "err", err, "failures", failures)
			}
			continue
		}
		failures = 0
	}
}

// rollup folds the count deltas into the counts once, unless another node
// is doing it.
func (r *queueReader) rollup(ctx context.Context) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, sqlRollupLock, lockClass, r.lockKey("rollup")).Scan(&got); err != nil || !got {
			return err
		}
		_, err := tx.Exec(ctx, sqlRollup)
		return err
	})
}
