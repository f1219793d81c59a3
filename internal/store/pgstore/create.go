package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/store"
)

// sqlCreateQueues creates the queues of the arrays $1-$14 that do not
// exist, in name order, and returns the names of those it created.
const sqlCreateQueues = `INSERT INTO spool_queues (name, rate_limit, rate_period_ns, max_active, group_rate_limit,
	group_rate_period_ns, group_max_active, ordered, dead_letter_queue, max_wait_ns, default_lease_ns,
	default_max_attempts, default_delay_ns, flow)
SELECT name, rate_limit, rate_period_ns, max_active, group_rate_limit, group_rate_period_ns, group_max_active, ordered,
	NULLIF(dead_letter_queue, ''), max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns, flow
FROM unnest($1::text[], $2::int4[], $3::int8[], $4::int4[], $5::int4[], $6::int8[], $7::int4[], $8::bool[],
	$9::text[], $10::int8[], $11::int8[], $12::int4[], $13::int8[], $14::bool[])
	AS u(name, rate_limit, rate_period_ns, max_active, group_rate_limit, group_rate_period_ns, group_max_active, ordered,
	dead_letter_queue, max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns, flow)
ORDER BY name
ON CONFLICT (name) DO NOTHING
RETURNING name`

// createQueues creates in tx, by one statement, the queues of cfgs that
// do not exist (store.QueueConfig), and tells the other nodes, and this
// node's beliefs, of them once tx commits. It first takes the exclusive
// flow lock of those with limits or a maximum wait (see flow.go), so
// that no job of them is left without a group or a deadline: an insert
// holding the lock shared has ended and the creation leaves its row
// alone, and a later insert reads the created row.
func (ins *inserter) createQueues(ctx context.Context, tx pgx.Tx, cfgs []store.QueueConfig) error {
	if len(cfgs) == 0 {
		return nil
	}
	n := len(cfgs)
	var (
		names, dlqs                                        = make([]string, n), make([]string, n)
		rateLimits, maxActives, groupRateLimits, groupMaxs = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		ratePeriods, groupRatePeriods                      = make([]int64, n), make([]int64, n)
		ordered, flows                                     = make([]bool, n), make([]bool, n)
		maxWaits, leases, delays                           = make([]int64, n), make([]int64, n), make([]int64, n)
		attempts                                           = make([]int32, n)
		locked                                             []string
	)
	for i := range cfgs {
		c := &cfgs[i]
		l, st := c.Limits.Normalized(), c.Settings
		names[i], dlqs[i] = c.Name, st.DeadLetterQueue
		rateLimits[i], ratePeriods[i], maxActives[i] = int32(l.Rate.Limit), int64(l.Rate.Period), int32(l.MaxActive)
		groupRateLimits[i], groupRatePeriods[i], groupMaxs[i] = int32(l.GroupRate.Limit), int64(l.GroupRate.Period), int32(l.GroupMaxActive)
		ordered[i] = l.Ordered
		maxWaits[i], leases[i], attempts[i], delays[i] = int64(st.MaxWait), int64(st.DefaultLease), int32(st.DefaultMaxAttempts), int64(st.DefaultDelay)
		if flows[i] = !l.IsZero(); flows[i] || st.MaxWait > 0 {
			locked = append(locked, c.Name)
		}
	}
	if len(locked) > 0 {
		if _, err := tx.Exec(ctx, sqlLockFlow, locked, lockClass); err != nil {
			return fmt.Errorf("lock queues: %w", err)
		}
	}
	created, err := collect[string](ctx, tx, sqlCreateQueues, names, rateLimits, ratePeriods, maxActives, groupRateLimits,
		groupRatePeriods, groupMaxs, ordered, dlqs, maxWaits, leases, attempts, delays, flows)
	if err != nil {
		return fmt.Errorf("create queues: %w", err)
	}
	if len(created) == 0 {
		return nil
	}
	flowOf := make(map[string]bool, len(created))
	for i := range cfgs {
		if c := &cfgs[i]; slices.Contains(created, c.Name) {
			flowOf[c.Name] = !c.Limits.IsZero()
		}
	}
	ins.afterCommit(tx, func() {
		ins.rememberFlow(flowOf)
		ins.defaults.forget(created)
		ins.forgetWaits()
	})
	if err := ins.notify(ctx, tx, settingsTag, created); err != nil {
		return fmt.Errorf("announce the new queues: %w", err)
	}
	return nil
}
