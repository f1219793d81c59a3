package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// queueReader reads the queues with their counts, limits, settings and
// job defaults, and folds the count deltas into the counts.
type queueReader struct {
	*db
	*beliefs
}

const (
	// sqlQueues reads every queue with its paused flag, its default
	// durability, its limits (the ordered flag among them), its settings
	// and its counts: the folded counts plus the deltas not folded yet. $1
	// names one queue, or '' for all. With $2 it also reads each queue's
	// oldest available run time (sqlOldest), once per queue.
	sqlQueues = `WITH q AS MATERIALIZED (
	SELECT q.*, CASE WHEN $2 THEN (` + sqlOldest + `) END AS oldest FROM spool_queues q
	WHERE $1 = '' OR q.name = $1
)
SELECT q.name, q.paused, q.durability, q.rate_limit, q.rate_period_ns, q.max_active,
	q.group_rate_limit, q.group_rate_period_ns, q.group_max_active, q.ordered, COALESCE(q.dead_letter_queue, ''), q.max_wait_ns,
	q.default_lease_ns, q.default_max_attempts, q.default_delay_ns, q.oldest,
	c.state, c.n FROM q
LEFT JOIN (
	SELECT queue, state, sum(n)::int8 AS n FROM (
		SELECT queue, state, n FROM spool_counts
		UNION ALL SELECT queue, state, n FROM spool_count_deltas) x
	GROUP BY queue, state
) c ON c.queue = q.name
ORDER BY q.name`
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
	// sqlRollup folds the count deltas into the counts, one node at a
	// time, in key order so that it never deadlocks with itself.
	sqlRollupLock = `SELECT pg_try_advisory_xact_lock($1, $2)`
	sqlRollup     = `WITH d AS (
	DELETE FROM spool_count_deltas RETURNING queue, state, n
)
INSERT INTO spool_counts (queue, state, n)
SELECT queue, state, sum(n) FROM d GROUP BY queue, state ORDER BY queue, state
ON CONFLICT (queue, state) DO UPDATE SET n = spool_counts.n + excluded.n`
)

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

// sqlQueueDefaults reads what a queue gives its new jobs.
const sqlQueueDefaults = `SELECT durability, COALESCE(dead_letter_queue, ''), max_wait_ns, default_lease_ns,
	default_max_attempts, default_delay_ns
FROM spool_queues WHERE name = $1`

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
	var (
		durability, dlq       string
		maxWait, lease, delay int64
		defaultMaxAttempts    int32
	)
	err := r.pool.QueryRow(ctx, sqlQueueDefaults, name).Scan(&durability, &dlq, &maxWait, &lease, &defaultMaxAttempts, &delay)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Not kept: an insert on any node may create the queue at any
		// moment, and whether it exists decides what a call that creates
		// queues (engine.NewQueues) asks for.
		return store.QueueDefaults{}, fmt.Errorf("get queue defaults of %s: %w", name, job.ErrNotFound)
	case err != nil:
		return store.QueueDefaults{}, wrap("get queue defaults", err)
	}
	d := store.QueueDefaults{
		Durability: cmp.Or(job.Durability(durability), job.DurabilityFull),
		Settings: job.QueueSettings{DeadLetterQueue: dlq, MaxWait: time.Duration(maxWait),
			DefaultLease: time.Duration(lease), DefaultMaxAttempts: int(defaultMaxAttempts), DefaultDelay: time.Duration(delay)},
	}
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
	out := []job.QueueInfo{}
	var (
		qname, durability, dlq      string
		paused, ordered             bool
		rate, maxActive             int32
		groupRate, groupMaxActive   int32
		ratePeriod, groupRatePeriod int64
		maxWait                     int64
		defaultLease, defaultDelay  int64
		defaultMaxAttempts          int32
		oldestAt                    *time.Time
		state                       *string
		n                           *int64
	)
	_, err = pgx.ForEachRow(rows, []any{&qname, &paused, &durability, &rate, &ratePeriod, &maxActive,
		&groupRate, &groupRatePeriod, &groupMaxActive, &ordered, &dlq, &maxWait,
		&defaultLease, &defaultMaxAttempts, &defaultDelay, &oldestAt, &state, &n}, func() error {
		if len(out) == 0 || out[len(out)-1].Name != qname {
			counts := make(map[job.State]int64, len(job.States))
			for _, st := range job.States {
				counts[st] = 0
			}
			out = append(out, job.QueueInfo{Name: qname, Paused: paused, Durability: job.Durability(durability), Counts: counts,
				Limits: job.Limits{
					Rate:      job.Rate{Limit: int(rate), Period: time.Duration(ratePeriod)},
					MaxActive: int(maxActive), GroupMaxActive: int(groupMaxActive),
					GroupRate: job.Rate{Limit: int(groupRate), Period: time.Duration(groupRatePeriod)},
					Ordered:   ordered,
				},
				Settings: job.QueueSettings{
					DeadLetterQueue: dlq, MaxWait: time.Duration(maxWait),
					DefaultLease: time.Duration(defaultLease), DefaultMaxAttempts: int(defaultMaxAttempts),
					DefaultDelay: time.Duration(defaultDelay),
				},
				OldestAvailable: utc(oldestAt)})
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
