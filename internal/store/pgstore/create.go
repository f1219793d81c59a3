package pgstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/store"
)

// Queues created with their configuration together with the jobs of an
// insert or a transaction (store.QueueConfig): one statement creates all
// of them, whatever their number, and reports the ones it created; a
// queue whose row exists is left as it is.
//
// A queue created with limits gets flow control, one created with a
// maximum wait gives its jobs wait deadlines. So that no job of it is
// ever left without a group or a deadline, the transaction first takes
// the exclusive flow lock of such queues (see flow.go): an insert into
// one of them that holds the lock shared, and so may have read it as
// plain, has ended and created its row, which the creation then leaves
// alone; an insert that comes later reads the queue's row in a snapshot
// taken after the creation committed.

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

// createQueues creates in tx the queues of cfgs that do not exist, with
// their configuration, and tells the other nodes, and this node's
// beliefs, of them once tx commits.
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
