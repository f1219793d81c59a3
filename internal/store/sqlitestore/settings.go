package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// A queue's settings (job.QueueSettings) are kept whole in the settings
// column of its row, as JSON with a name for each field, so that a
// setting added later needs no new column and rows written before it
// read as unset.

const sqlSetSettings = `INSERT INTO queues (name, settings) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET settings = ?2`

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

// QueueSetSettings replaces a queue's settings, creating the queue if
// unknown; see store.Admin.
func (s *Store) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	err := s.do(ctx, 1, func(w *writer) error { return w.setSettings(name, st) })
	if err != nil {
		return wrap("set queue settings", err)
	}
	return nil
}

// setSettings replaces the settings of queue name, creating it if
// unknown, in the running transaction.
func (w *writer) setSettings(name string, st job.QueueSettings) error {
	stored, err := encodeSettings(st)
	if err != nil {
		return err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlSetSettings, name, stored); err != nil {
		return fmt.Errorf("set settings of queue %s: %w", name, err)
	}
	q, err := w.ensureQueue(name)
	if err != nil {
		return err
	}
	if st.MaxWait != q.settings.MaxWait {
		if err := w.setQueueWaits(name, st.MaxWait); err != nil {
			return err
		}
	}
	q.settings = st
	w.fx.settings[name] = st
	w.touched = true
	return nil
}

// createQueues creates, in the running transaction, each queue of cfgs
// that the writer does not know, with its limits and settings; a queue it
// knows is left as it is (see store.QueueConfig).
func (w *writer) createQueues(cfgs []store.QueueConfig) error {
	for i := range cfgs {
		c := &cfgs[i]
		if w.queues[c.Name] != nil {
			continue
		}
		if _, err := w.ensureQueue(c.Name); err != nil {
			return err
		}
		if !c.Limits.IsZero() {
			if err := w.setLimits(c.Name, c.Limits.Normalized()); err != nil {
				return err
			}
		}
		if !c.Settings.IsZero() {
			if err := w.setSettings(c.Name, c.Settings); err != nil {
				return err
			}
		}
	}
	return nil
}
