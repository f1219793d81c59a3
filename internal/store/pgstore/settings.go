package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
)

const (
	// sqlSetSettings stores the settings of a queue, creating it if
	// unknown, and returns the maximum wait it had before (0 for a new
	// queue).
	sqlSetSettings = `WITH old AS (SELECT max_wait_ns FROM spool_queues WHERE name = $1)
INSERT INTO spool_queues (name, dead_letter_queue, max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns)
VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET dead_letter_queue = excluded.dead_letter_queue, max_wait_ns = excluded.max_wait_ns,
	default_lease_ns = excluded.default_lease_ns, default_max_attempts = excluded.default_max_attempts,
	default_delay_ns = excluded.default_delay_ns
RETURNING COALESCE((SELECT max_wait_ns FROM old), 0)`
	// sqlSettingsForUpdate reads the settings of queue $1 and locks its
	// row until the transaction ends.
	sqlSettingsForUpdate = `SELECT COALESCE(dead_letter_queue, ''), max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns
FROM spool_queues WHERE name = $1 FOR UPDATE`
)

// QueueSetSettings replaces a queue's settings, creating the queue if
// unknown; see store.Admin. A new maximum wait rewrites the wait
// deadlines of the queue's pending jobs, under the queue's flow lock
// (see deadline.go).
func (a *admin) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{name}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		return a.writeSettings(ctx, tx, name, st)
	})
	a.defaults.forget([]string{name})
	a.forgetWaits()
	if err != nil {
		return wrap("set queue settings", err)
	}
	return nil
}

// QueuePatchSettings changes some of a queue's settings, creating the
// queue if unknown; see store.Admin. Under the queue's flow lock, it
// reads the queue's row FOR UPDATE, merges the patch and writes the
// result in the same transaction, so the patches of every node follow
// one another.
func (a *admin) QueuePatchSettings(ctx context.Context, name string, p job.SettingsPatch) (job.QueueSettings, error) {
	var out job.QueueSettings
	err := a.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{name}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlEnsureQueue, name); err != nil {
			return fmt.Errorf("create queue: %w", err)
		}
		var cur job.QueueSettings
		var maxWait, lease, delay int64
		var attempts int32
		if err := tx.QueryRow(ctx, sqlSettingsForUpdate, name).Scan(&cur.DeadLetterQueue, &maxWait, &lease, &attempts, &delay); err != nil {
			return fmt.Errorf("read settings: %w", err)
		}
		cur.MaxWait, cur.DefaultLease, cur.DefaultMaxAttempts, cur.DefaultDelay =
			time.Duration(maxWait), time.Duration(lease), int(attempts), time.Duration(delay)
		st, err := p.Merge(name, cur)
		if err != nil {
			return err
		}
		out = st
		return a.writeSettings(ctx, tx, name, st)
	})
	a.defaults.forget([]string{name})
	a.forgetWaits()
	if err != nil {
		return job.QueueSettings{}, wrap("patch queue settings", err)
	}
	return out, nil
}

// writeSettings stores settings st of queue name in tx, which holds the
// queue's flow lock, rewriting the wait deadlines of its pending jobs
// when the maximum wait changes, and tells every node.
func (a *admin) writeSettings(ctx context.Context, tx pgx.Tx, name string, st job.QueueSettings) error {
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
}
