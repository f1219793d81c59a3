package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// A queue's row in the queues table: its pause, durability, flow control
// (limits, JSON; grouped, set once its jobs have groups, see queues.go)
// and settings. The settings (job.QueueSettings) are kept whole as JSON
// with a name for each field, so that a setting added later needs no new
// column and rows written before it read as unset.

// queueRow is a queue as its row stores it.
type queueRow struct {
	name       string
	paused     bool
	durability job.Durability
	limits     job.Limits
	grouped    bool
	settings   job.QueueSettings
}

// readQueues reads every row of the queues table.
func readQueues(ctx context.Context, conn *sql.Conn) ([]queueRow, error) {
	rows, err := conn.QueryContext(ctx, `SELECT name, paused, durability, limits, grouped, settings FROM queues`)
	qs, err := scanAll(rows, err, func(r *sql.Rows, q *queueRow) error {
		var limits, settings []byte
		err := r.Scan(&q.name, &q.paused, &q.durability, &limits, &q.grouped, &settings)
		if err == nil {
			q.limits, err = decodeLimits(limits)
		}
		if err == nil {
			q.settings, err = decodeSettings(settings)
		}
		if err != nil {
			return fmt.Errorf("queue %s: %w", q.name, err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read queues: %w", err)
	}
	return qs, nil
}

// encodeLimits is the stored form of l: NULL for none.
func encodeLimits(l job.Limits) (any, error) {
	if l.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("encode limits: %w", err)
	}
	return b, nil
}

// decodeLimits reads the stored form of limits.
func decodeLimits(b []byte) (job.Limits, error) {
	var l job.Limits
	if len(b) == 0 {
		return l, nil
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("decode limits: %w", err)
	}
	return l, nil
}

// storedSettings is the stored form of job.QueueSettings.
type storedSettings struct {
	DeadLetterQueue    string `json:"dead_letter_queue,omitempty"`
	MaxWaitNS          int64  `json:"max_wait_ns,omitempty"`
	DefaultLeaseNS     int64  `json:"default_lease_ns,omitempty"`
	DefaultMaxAttempts int    `json:"default_max_attempts,omitempty"`
	DefaultDelayNS     int64  `json:"default_delay_ns,omitempty"`
}

// encodeSettings is the stored form of s: NULL for none.
func encodeSettings(s job.QueueSettings) (any, error) {
	if s.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(storedSettings{
		DeadLetterQueue: s.DeadLetterQueue, MaxWaitNS: int64(s.MaxWait),
		DefaultLeaseNS: int64(s.DefaultLease), DefaultMaxAttempts: s.DefaultMaxAttempts, DefaultDelayNS: int64(s.DefaultDelay),
	})
	if err != nil {
		return nil, fmt.Errorf("encode settings: %w", err)
	}
	return b, nil
}

// decodeSettings reads the stored form of settings.
func decodeSettings(b []byte) (job.QueueSettings, error) {
	if len(b) == 0 {
		return job.QueueSettings{}, nil
	}
	var st storedSettings
	if err := json.Unmarshal(b, &st); err != nil {
		return job.QueueSettings{}, fmt.Errorf("decode settings: %w", err)
	}
	return job.QueueSettings{
		DeadLetterQueue: st.DeadLetterQueue, MaxWait: time.Duration(st.MaxWaitNS),
		DefaultLease: time.Duration(st.DefaultLeaseNS), DefaultMaxAttempts: st.DefaultMaxAttempts, DefaultDelay: time.Duration(st.DefaultDelayNS),
	}, nil
}
