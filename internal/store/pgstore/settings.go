package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
)

// A queue's settings (job.QueueSettings) live in columns of its row in
// spool_queues, where the statements that apply them read them. The job
// defaults (default_lease_ns, default_max_attempts, default_delay_ns) are
// applied by the engine before an insert, which reads them with the
// queue (QueueGet).

// sqlSetSettings stores the settings of a queue, creating it if unknown.
const sqlSetSettings = `INSERT INTO spool_queues (name, dead_letter_queue, max_wait_ns, default_lease_ns, default_max_attempts, default_delay_ns)
VALUES ($1, NULLIF($2, ''), $3, $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET dead_letter_queue = excluded.dead_letter_queue, max_wait_ns = excluded.max_wait_ns,
	default_lease_ns = excluded.default_lease_ns, default_max_attempts = excluded.default_max_attempts,
	default_delay_ns = excluded.default_delay_ns`

// QueueSetSettings replaces a queue's settings, creating the queue if
// unknown; see store.Admin.
func (s *Store) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	if err := s.check(); err != nil {
		return wrap("set queue settings", err)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlSetSettings, name, st.DeadLetterQueue, int64(st.MaxWait),
			int64(st.DefaultLease), int32(st.DefaultMaxAttempts), int64(st.DefaultDelay)); err != nil {
			return err
		}
		return s.announceSettings(ctx, tx, name)
	})
	s.defaults.forget([]string{name})
	if err != nil {
		return wrap("set queue settings", err)
	}
	s.forgetWaits()
	return nil
}
