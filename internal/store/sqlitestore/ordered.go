package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/spoolq/spool/internal/job"
)

// Ordered queues (job.Limits.Ordered) in the embedded store: the writer
// keeps the job that holds each group with a job in flight
// (job.HoldsGroup), read from the database when a claim first needs them;
// docs/architecture.md tells how a claim uses them.

// sqlHolds lists the pending jobs of an ordered queue that were handed
// out, which may hold their groups (job.HoldsGroup judges), lowest seq
// first, from the index of those (jobs_held); the active ones are the
// leases in memory.
const sqlHolds = `SELECT grp, seq, state, attempt, priority, run_at FROM jobs INDEXED BY jobs_held
WHERE queue = ? AND attempt > 0 AND grp IS NOT NULL AND ` + condHeld + `
ORDER BY seq`

// hold is the job that holds a group of an ordered queue.
type hold struct {
	seq int64
	// avail is set while the job is available; e is then its entry.
	avail bool
	e     entry
	// more is set when other jobs of the group were handed out too (a
	// run, or its rest): the next of them holds the group once this one
	// lets it go.
	more bool
}

// holds are the holds of an ordered queue's groups, by group; nil until a
// claim reads them.
type holds map[string]*hold

// loadHolds reads the holds of the ordered queue from the database, as
// the running transaction on conn sees it; leases are the active jobs.
func loadHolds(conn *sql.Conn, queue string, leases *leaseTable) (holds, error) {
	type row struct {
		g       string
		h       hold
		state   job.State
		attempt int
	}
	rows, err := conn.QueryContext(context.Background(), sqlHolds, queue)
	found, err := scanAll(rows, err, func(r *sql.Rows, v *row) error {
		return r.Scan(&v.g, &v.h.seq, &v.state, &v.attempt, &v.h.e.priority, &v.h.e.runAt)
	})
	if err != nil {
		return nil, fmt.Errorf("read the holds of ordered queue %s: %w", queue, err)
	}
	out := holds{}
	for _, v := range found {
		if !job.HoldsGroup(v.state, v.attempt) {
			continue
		}
		if h := out[v.g]; h != nil {
			h.more = true // a lower seq holds the group
			continue
		}
		h := v.h
		h.e.seq = h.seq
		h.avail = v.state == job.StateAvailable && !leases.leased(h.seq)
		out[v.g] = &h
	}
	// A job out on its first attempt holds its group too, though its row
	// says attempt 0 until the attempt ends: its lease lives in memory.
	for _, l := range leases.ofQueue(queue) {
		switch h := out[l.group]; {
		case h == nil:
			out[l.group] = &hold{seq: l.seq}
		case l.seq < h.seq:
			out[l.group] = &hold{seq: l.seq, more: true}
		default:
			h.more = true
		}
	}
	return out, nil
}

// available records that job e of group g became available: if it holds
// its group, it goes out next.
func (hs holds) available(g string, e entry) {
	if h := hs[g]; h != nil && h.seq == e.seq {
		h.avail, h.e = true, e
	}
}

// taken records that a claim took job seq of group g: when it holds the
// group, it is out again.
func (hs holds) taken(g string, seq int64) {
	if h := hs[g]; h != nil && h.seq == seq {
		h.avail = false
	}
}

// leased records that a claim leased job seq of group g, which holds the
// group unless another job does.
func (hs holds) leased(g string, seq int64) {
	if h := hs[g]; h != nil {
		h.more = h.more || h.seq != seq
		return
	}
	hs[g] = &hold{seq: seq}
}

// release records that job seq of group g finished or was deleted: the
// group is free again if it held it. It reports whether the holds must be
// read again: the group's other jobs handed out (the rest of a run, or
// jobs still active when the queue was made ordered, active says how
// many) hold it in turn.
func (hs holds) release(g string, seq int64, active int) (reread bool) {
	if h := hs[g]; h != nil && h.seq == seq {
		delete(hs, g)
		return active > 0 || h.more
	}
	return false
}
