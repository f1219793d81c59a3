package sqlitestore

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/internal/job"
)

// Ordered queues (job.Limits.Ordered) in the embedded store. The writer
// keeps, for each group of an ordered queue with a job in flight, the job
// that holds it (job.HoldsGroup): set when a claim hands a job of the
// group out, marked available when that job is available again (after a
// backoff, an expired lease or a release), dropped when it finishes. A
// claim skips a group whose holder is out and hands out the holder itself
// when it is available, whatever its place in the group's window. The
// holds are read from the database when a claim first needs them (after
// a start, a resync or a bulk change), so they cost nothing for groups
// without a job in flight.

// sqlHolds lists the jobs of an ordered queue that may hold their groups
// (job.HoldsGroup judges), lowest seq first: the pending ones that were
// handed out, found by the state index.
const sqlHolds = `SELECT grp, seq, state, attempt, priority, run_at FROM jobs
WHERE queue = ? AND grp IS NOT NULL AND attempt > 0 AND state IN ('scheduled', 'available', 'active', 'retrying')
ORDER BY seq`

// hold is the job that holds a group of an ordered queue.
type hold struct {
	seq int64
	// avail is set while the job is available; e is then its entry.
	avail bool
	e     entry
}

// loadHolds reads the holds of the ordered queue q from the database, as
// the running transaction sees it.
func (w *writer) loadHolds(q *wqueue) error {
	rows, err := w.conn.QueryContext(context.Background(), sqlHolds, q.name)
	if err != nil {
		return fmt.Errorf("read the holds of ordered queue %s: %w", q.name, err)
	}
	holds := map[string]*hold{}
	for rows.Next() {
		var (
			g       string
			h       hold
			state   job.State
			attempt int
		)
		if err := rows.Scan(&g, &h.seq, &state, &attempt, &h.e.priority, &h.e.runAt); err != nil {
			rows.Close()
			return fmt.Errorf("read the holds of ordered queue %s: %w", q.name, err)
		}
		if holds[g] != nil || !job.HoldsGroup(state, attempt) {
			continue // a lower seq holds the group
		}
		h.e.seq = h.seq
		h.avail = state == job.StateAvailable && !w.leases.leased(h.seq)
		holds[g] = &h
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("read the holds of ordered queue %s: %w", q.name, err)
	}
	q.flow.holds = holds
	return nil
}

// holdAvailable records that job e of group g of q became available: if
// it holds its group, it goes out next.
func (q *wqueue) holdAvailable(g string, e entry) {
	if h := q.flow.holds[g]; h != nil && h.seq == e.seq {
		h.avail, h.e = true, e
	}
}

// unhold records that the job seq of group g of queue finished or was
// deleted: the group is free again if it held it. Jobs of the group still
// active (the queue was made ordered while several ran) hold it in turn,
// which the next claim reads again.
func (w *writer) unhold(queue, g string, seq int64) {
	q := w.queues[queue]
	if q == nil || q.flow.holds == nil {
		return
	}
	if h := q.flow.holds[g]; h != nil && h.seq == seq {
		delete(q.flow.holds, g)
		if w.leases.inGroup(queue, g) > 0 {
			q.flow.holds = nil
		}
	}
}

// takeHold records that a claim took job seq of group g of the ordered
// queue q: when it holds the group, it is out again.
func (q *wqueue) takeHold(g string, seq int64) {
	if h := q.flow.holds[g]; h != nil && h.seq == seq {
		h.avail = false
	}
}

// held records that a claim leased jobs of the ordered queue q: each
// holds its group. (A job the claim killed for its wait instead holds
// nothing.)
func (w *writer) held(q *wqueue, jobs []*job.Job) {
	for _, j := range jobs {
		if l := w.leases.get(j.ID); l != nil && q.flow.holds[j.Group] == nil {
			q.flow.holds[j.Group] = &hold{seq: l.seq}
		}
	}
}
