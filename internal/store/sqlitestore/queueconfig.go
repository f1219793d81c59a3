package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/adminkit"
)

// A queue's configuration: its pause, durability, flow control and
// settings, each written to its own column of its row (queuerow.go) and
// to the writer's view, and handed to the counts with the commit. The
// lanes of a queue's consumer groups take its limits and pause.

const (
	// sqlSetColumn sets column %s of queue ?1's row to ?2 and nothing
	// else, creating the row if needed.
	sqlSetColumn = `INSERT INTO queues (name, %[1]s) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET %[1]s = ?2`
	// sqlQueueColumn reads column %s of queue ?1's row.
	sqlQueueColumn  = `SELECT %s FROM queues WHERE name = ?1`
	sqlMarkGrouped  = `UPDATE queues SET grouped = 1 WHERE name = ?`
	sqlGroupPending = `UPDATE jobs SET grp = '', gready = CASE WHEN state = 'available' THEN 1 END
WHERE queue = ? AND grp IS NULL AND state IN ('scheduled', 'available', 'retrying', 'active')`
	// sqlQueueWaiting reads up to ?4 jobs of queue ?1 in state ?2 after
	// seq ?3, in seq order, with what job.WaitDeadline needs and their
	// deadlines.
	sqlQueueWaiting = `SELECT seq, attempt, run_at, wait_until FROM jobs INDEXED BY jobs_queue_state
WHERE queue = ?1 AND state = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4`
)

// stSetWait sets the wait deadline of one row (see expire.go).
var stSetWait = prepared(sqlFixWait)

// QueueSetPaused pauses or resumes a queue, creating it if unknown; see
// store.Admin.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) error {
	return wrap("set queue paused", s.do(ctx, 1, func(w *writer) error {
		return w.withLanes(name, func(queue string) error { return w.setPaused(queue, paused) })
	}))
}

// QueueSetDurability sets the durability of jobs later enqueued into a
// queue without their own, creating the queue if unknown; see store.Admin.
func (s *Store) QueueSetDurability(ctx context.Context, name string, d job.Durability) error {
	return wrap("set queue durability", s.do(ctx, 1, func(w *writer) error { return w.setDurability(name, d) }))
}

// QueueSetLimits sets a queue's flow control; see store.Admin.
func (s *Store) QueueSetLimits(ctx context.Context, name string, l job.Limits) error {
	return wrap("set queue limits", s.do(ctx, 1, func(w *writer) error {
		return w.withLanes(name, func(queue string) error { return w.setLimits(queue, l) })
	}))
}

// QueueSetSettings replaces a queue's settings, creating the queue if
// unknown; see store.Admin.
func (s *Store) QueueSetSettings(ctx context.Context, name string, st job.QueueSettings) error {
	return wrap("set queue settings", s.do(ctx, 1, func(w *writer) error { return w.setSettings(name, st) }))
}

// QueuePatchSettings changes some of a queue's settings in one write
// transaction; see store.Admin.
func (s *Store) QueuePatchSettings(ctx context.Context, name string, p job.SettingsPatch) (job.QueueSettings, error) {
	return call(ctx, s, "patch queue settings", func(w *writer) (job.QueueSettings, error) {
		var cur job.QueueSettings
		if err := w.readConfig(name, "settings", &cur); err != nil {
			return cur, err
		}
		st, err := p.Merge(name, cur)
		if err != nil {
			return cur, err
		}
		return st, w.setSettings(name, st)
	})
}

// QueuePatchLimits changes some of a queue's limits, its lanes' with
// them, in one write transaction; see store.Admin.
func (s *Store) QueuePatchLimits(ctx context.Context, name string, p job.LimitsPatch) (job.Limits, error) {
	return call(ctx, s, "patch queue limits", func(w *writer) (job.Limits, error) {
		var cur job.Limits
		if err := w.readConfig(name, "limits", &cur); err != nil {
			return cur, err
		}
		l, err := p.Merge(cur)
		if err != nil {
			return cur, err
		}
		return l, w.withLanes(name, func(queue string) error { return w.setLimits(queue, l) })
	})
}

// readConfig reads column (limits or settings) of queue name's row into
// v, in the writer's transaction; an unknown queue leaves v zero.
func (w *writer) readConfig(name, column string, v any) error {
	var stored []byte
	err := w.conn.QueryRowContext(context.Background(), fmt.Sprintf(sqlQueueColumn, column), name).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s of queue %s: %w", column, name, err)
	}
	return decodeJSON(stored, v)
}

// withLanes runs set on queue name and on the lane of each of its
// consumer groups.
func (w *writer) withLanes(name string, set func(queue string) error) error {
	if err := set(name); err != nil {
		return err
	}
	for _, lane := range w.lanes.lanesOf(name) {
		if err := set(lane); err != nil {
			return err
		}
	}
	return nil
}

// setQueue writes arg to column of queue name's row, creating the queue
// if unknown, then lets change update the writer's view of it (nil:
// nothing to change) and hands rec, the same change of its record, to
// the counts with the commit.
func (w *writer) setQueue(name, column string, arg any, change func(*wqueue) error, rec func(*adminkit.Record)) error {
	if _, err := w.conn.ExecContext(context.Background(), fmt.Sprintf(sqlSetColumn, column), name, arg); err != nil {
		return fmt.Errorf("configure queue %s: %w", name, err)
	}
	q, err := w.ensureQueue(name)
	if err != nil {
		return err
	}
	if change != nil {
		if err := change(q); err != nil {
			return err
		}
	}
	w.fx.set(name, rec)
	w.touched = true
	return nil
}

// setPaused pauses or resumes queue name.
func (w *writer) setPaused(name string, paused bool) error {
	return w.setQueue(name, "paused", paused, func(q *wqueue) error {
		q.paused = paused
		return nil
	}, func(r *adminkit.Record) { r.Paused = paused })
}

// setDurability sets the durability of the jobs later enqueued into queue
// name without their own.
func (w *writer) setDurability(name string, d job.Durability) error {
	if err := adminkit.CheckDurability(d, true, ""); err != nil {
		return err
	}
	return w.setQueue(name, "durability", string(d), nil, func(r *adminkit.Record) { r.Durability = d })
}

// setLimits sets the limits of queue name.
func (w *writer) setLimits(name string, l job.Limits) error {
	stored, err := encodeJSON(l, l.IsZero())
	if err != nil {
		return err
	}
	return w.setQueue(name, "limits", stored, func(q *wqueue) error {
		q.limits, q.holds = l, nil
		if l.Grouped() {
			return w.markGrouped(name)
		}
		return nil
	}, func(r *adminkit.Record) { r.Limits = l })
}

// grouped reports whether queue name is claimed by group.
func (w *writer) grouped(name string) bool {
	q := w.queues[name]
	return q != nil && q.grouped
}

// markGrouped makes the queue claim by group from now on: its pending
// jobs without a group join the empty group ("").
func (w *writer) markGrouped(name string) error {
	q, err := w.ensureQueue(name)
	if err != nil || q.grouped {
		return err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlMarkGrouped, name); err != nil {
		return fmt.Errorf("group queue %s: %w", name, err)
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlGroupPending, name); err != nil {
		return fmt.Errorf("group queue %s: %w", name, err)
	}
	q.grouped = true
	q.win.reset()
	w.touched = true
	return nil
}

// setSettings replaces the settings of queue name, creating it if
// unknown. A new maximum wait sets the wait deadlines of the queue's
// pending jobs.
func (w *writer) setSettings(name string, st job.QueueSettings) error {
	stored, err := encodeJSON(st, st.IsZero())
	if err != nil {
		return err
	}
	return w.setQueue(name, "settings", stored, func(q *wqueue) error {
		if st.MaxWait != q.settings.MaxWait {
			if err := w.setQueueWaits(name, st.MaxWait); err != nil {
				return fmt.Errorf("set wait deadlines of queue %s: %w", name, err)
			}
		}
		q.settings = st
		return nil
	}, func(r *adminkit.Record) { r.Settings = st })
}

// setQueueWaits gives the pending jobs of queue name the deadlines of the
// maximum wait maxWait (job.RewriteWaits), state by state, each read by
// the (queue, state, seq) index.
func (w *writer) setQueueWaits(name string, maxWait time.Duration) error {
	write := func(changed []job.WaitRow) error {
		for _, r := range changed {
			if _, err := w.st.get(stSetWait).Exec(timeOrNull(r.Deadline), r.Seq); err != nil {
				return err
			}
		}
		return nil
	}
	for _, state := range job.States {
		if !state.Pending() {
			continue
		}
		read := func(after int64, n int) ([]job.WaitRow, error) {
			rows, err := w.conn.QueryContext(context.Background(), sqlQueueWaiting, name, string(state), after, n)
			return scanAll(rows, err, func(r *sql.Rows, v *job.WaitRow) error {
				var runAt int64
				var deadline sql.NullInt64
				err := r.Scan(&v.Seq, &v.Attempt, &runAt, &deadline)
				v.RunAt, v.Deadline = fromNanos(runAt), nullTime(deadline)
				return err
			})
		}
		if err := job.RewriteWaits(maxWait, read, write); err != nil {
			return err
		}
	}
	return nil
}

// createQueues creates each queue of cfgs that the writer does not know,
// with its limits and settings; a queue it knows is left as it is (see
// store.QueueConfig).
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

// waitDeadline is the stored form of job.WaitDeadline: Unix nanoseconds,
// NULL for none.
func waitDeadline(attempt int, runAt time.Time, maxWait time.Duration) any {
	return timeOrNull(job.WaitDeadline(attempt, runAt, maxWait))
}
