package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// wqueue is the writer's working view of one known queue: what claims
// read in memory.
type wqueue struct {
	name   string
	paused bool
	// win is the queue's ready window; a grouped queue keeps one per
	// group instead (flow).
	win *window
	// limits are the queue's flow control; grouped is set once its jobs
	// have groups, when claims go by group and win is not kept.
	limits  job.Limits
	grouped bool
	flow    flowState
	// holds are, in an ordered queue, the groups' jobs in flight (see
	// ordered.go); nil until a claim reads them.
	holds    holds
	settings job.QueueSettings
}

// newQueue is the view of queue name with an empty ready window of size
// readyWindow: complete when the queue is known to have no available job,
// else filled by the first claim.
func newQueue(name string, readyWindow int, complete bool, cache *bodyCache) *wqueue {
	return &wqueue{name: name, win: newWindow(readyWindow, complete, cache), flow: flowState{cache: cache}}
}

// flowControlled reports whether claims of q go through its limits and
// groups (the planner, see flowclaim.go) rather than straight from its
// window.
func (q *wqueue) flowControlled() bool { return q.grouped || !q.limits.IsZero() }

// pastWait reports whether j, an available job of q, may no longer start
// at now.
func (q *wqueue) pastWait(j *job.Job, now time.Time) bool {
	return q.settings.MaxWait > 0 && job.PastMaxWait(j.Attempt, j.RunAt, q.settings.MaxWait, now)
}

// rowGroup is the grp value of a new row of q for a job of group g: the
// group, "" for a job without one in a queue claimed by group, else NULL
// (set false). q may be nil, a queue not known yet.
func (q *wqueue) rowGroup(g string) (_ string, set bool) {
	if g != "" {
		return g, true
	}
	return "", q != nil && q.grouped
}

// windowOf returns the window that holds group g's available jobs.
func (q *wqueue) windowOf(g string) *window {
	if !q.grouped {
		return q.win
	}
	return q.flow.groups[g].win
}

// available records that job e of group g became available.
func (q *wqueue) available(g string, e entry) {
	if !q.grouped {
		q.win.add(e)
		return
	}
	q.flow.available(g, e, q.limits.GroupRate)
	q.holds.available(g, e)
}

// unavailable records that job e of group g, available, left that state
// without a claim.
func (q *wqueue) unavailable(g string, e entry) {
	if !q.grouped {
		q.win.remove(e)
		return
	}
	q.flow.remove(g, e)
}

// reset forgets every window and hold of q; the next claim reads them
// again.
func (q *wqueue) reset() {
	q.win.reset()
	q.flow.forget()
	q.holds = nil
}

// unhold records that job seq of group g finished or was deleted, with
// active jobs of the group still active: the group is free again if the
// job held it (see holds.release).
func (q *wqueue) unhold(g string, seq int64, active int) {
	if q.holds != nil && q.holds.release(g, seq, active) {
		q.holds = nil
	}
}

// The rate logs of flow control are written at close, a row per queue
// (grp NULL) and per group with starts that still count, and read back at
// open.
const (
	sqlSaveRateLog = `INSERT INTO rate_logs (queue, grp, starts) VALUES (?, ?, ?)`
	sqlRateLogs    = `SELECT queue, grp, starts FROM rate_logs`
)

// saveRateLogs writes every rate log of queues that still counts, in
// place of the ones written before, so that a restart holds the rates.
func saveRateLogs(conn *sql.Conn, queues map[string]*wqueue) error {
	ctx := context.Background()
	if _, err := conn.ExecContext(ctx, `DELETE FROM rate_logs`); err != nil {
		return fmt.Errorf("write rate logs: %w", err)
	}
	save := func(queue string, grp any, log job.StartLog) error {
		if _, err := conn.ExecContext(ctx, sqlSaveRateLog, queue, grp, encodeStarts(log)); err != nil {
			return fmt.Errorf("write rate log of %s: %w", queue, err)
		}
		return nil
	}
	for _, q := range queues {
		f := &q.flow
		if !f.rate.Idle(q.limits.Rate, f.now) {
			if err := save(q.name, nil, f.rate); err != nil {
				return err
			}
		}
		for g, gs := range f.groups {
			if !gs.rate.Idle(q.limits.GroupRate, f.now) {
				if err := save(q.name, g, gs.rate); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// loadRateLogs reads the rate logs written at the last close into queues.
func loadRateLogs(conn *sql.Conn, queues map[string]*wqueue) error {
	type row struct {
		queue  string
		grp    sql.NullString
		starts []byte
	}
	rows, err := conn.QueryContext(context.Background(), sqlRateLogs)
	logs, err := scanAll(rows, err, func(r *sql.Rows, v *row) error { return r.Scan(&v.queue, &v.grp, &v.starts) })
	if err != nil {
		return fmt.Errorf("read rate logs: %w", err)
	}
	for _, v := range logs {
		q := queues[v.queue]
		if q == nil {
			continue
		}
		log := decodeStarts(v.starts)
		if n := len(log); n > 0 && log[n-1] > q.flow.now.UnixNano() {
			q.flow.now = fromNanos(log[n-1])
		}
		if !v.grp.Valid {
			q.flow.rate = log
		} else if gs := q.flow.state(v.grp.String, q.limits.GroupRate); gs != nil {
			gs.rate = log
		}
	}
	return nil
}
