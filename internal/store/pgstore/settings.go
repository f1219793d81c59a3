package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
)

// sqlSetSettings stores the settings of a queue, creating it if unknown,
// and returns the maximum wait it had before (0 for a new queue).
const sqlSetSettings = `WITH old AS (SELECT max_wait_ns FROM spool_queues WHERE name = $1)
INSERT INTO spool_queues (name, dead_letter_queue, max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns)
VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET dead_letter_queue = excluded.dead_letter_queue, max_wait_ns = excluded.max_wait_ns,
	default_lease_ns = excluded.default_lease_ns, default_max_attempts = excluded.default_max_attempts,
	default_delay_ns = excluded.default_delay_ns
RETURNING COALESCE((SELECT max_wait_ns FROM old), 0)`

// QueueSetSettings replaces a queue's settings, creating the queue if
// unknown; see store.Admin. A new maximum wait rewrites the wait
// deadlines of the queue's pending jobs, under the queue's flow lock
// (see deadline.go).
func (a *admin) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{name}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		var before int64
		if err := tx.QueryRow(ctx, sqlSetSettings, name, st.DeadLetterQueue, int64(st.MaxWait),
			int64(st.DefaultLease), int32(st.DefaultMaxAttempts), int64(st.DefaultDelay)).Scan(&before); err != nil {
			return err
		}
		if time.Duration(before) != st.MaxWait {
			if err := setQueueWaits(ctx, tx, name, st.MaxWait); err != nil {
				return err
			}
		}
		return a.notify(ctx, tx, settingsTag, []string{name})
	})
	a.defaults.forget([]string{name})
	a.forgetWaits()
	if err != nil {
		return wrap("set queue settings", err)
	}
	return nil
}
