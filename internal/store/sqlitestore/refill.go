package sqlitestore

import (
	"database/sql"
	"fmt"
	"math"
)

// Windows are refilled from the claim indexes: jobs_claim for the queues
// claimed straight from one window (the rows of a queue without groups),
// jobs_group_claim, by group, for the grouped queues. A refill follows the
// window's bound (priority p, run time r, seq q) in claim order with plain
// range seeks: the rest of run time r (in a group, of priority p from run
// time r on), the rest of priority p, then the lower priorities. (One
// query with an OR or a row value would scan from the start of priority
// p, through every job handed out since, whose rows still say available.)
const (
	refillSelect = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority `
	claimOrder = ` ORDER BY priority DESC, run_at, seq`
	// groupWalk lists, from group ?2 on (or after it, see
	// stGroupsAfter), up to ?3 groups of queue ?1 with an available job,
	// in name order: one index seek for each.
	groupWalk = `WITH RECURSIVE walk(grp) AS (
	SELECT (SELECT grp FROM jobs INDEXED BY jobs_group_claim
		WHERE queue = ?1 AND gready = 1 AND grp IS NOT NULL AND state = 'available' AND grp %s ?2 ORDER BY grp LIMIT 1)
	UNION ALL
	SELECT (SELECT j.grp FROM jobs j INDEXED BY jobs_group_claim
		WHERE j.queue = ?1 AND j.gready = 1 AND j.grp IS NOT NULL AND j.state = 'available' AND j.grp > walk.grp ORDER BY j.grp LIMIT 1)
	FROM walk WHERE walk.grp IS NOT NULL
	LIMIT ?3
)
SELECT grp FROM walk WHERE grp IS NOT NULL`
	groupSelect = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_group_claim
WHERE queue = ?1 AND gready = 1 AND grp IS NOT NULL AND state = 'available' AND grp = ?2`
)

var (
	stRefillSameRunAt    = prepared(refillSelect + `= ?2 AND run_at = ?3 AND seq > ?4` + claimOrder + ` LIMIT ?5`)
	stRefillSamePriority = prepared(refillSelect + `= ?2 AND run_at > ?3` + claimOrder + ` LIMIT ?4`)
	stRefillBelow        = prepared(refillSelect + `< ?2` + claimOrder + ` LIMIT ?3`)
	stGroupsFrom         = prepared(fmt.Sprintf(groupWalk, ">="))
	stGroupsAfter        = prepared(fmt.Sprintf(groupWalk, ">"))
	stGroupFirst         = prepared(groupSelect + claimOrder + ` LIMIT ?3`)
	stGroupSamePriority  = prepared(groupSelect + ` AND priority = ?3 AND run_at >= ?4 AND (run_at > ?4 OR seq > ?5)` + claimOrder + ` LIMIT ?6`)
	stGroupBelow         = prepared(groupSelect + ` AND priority < ?3` + claimOrder + ` LIMIT ?4`)
)

// seek is one range read of a refill: a statement and its arguments but
// the last, the most rows it may return.
type seek struct {
	stmt stmtID
	args []any
}

// refill reads the next available jobs of q, a queue without groups,
// after its window's bound, leaving out leased ones, until the window
// holds at least need jobs (up to its capacity, or need when that is
// more) or the queue has no more.
func (w *writer) refill(q *wqueue, need int) error {
	w.touched = true
	for q.win.len() < need && !q.win.complete {
		seeks := []seek{{stRefillBelow, []any{q.name, int64(math.MaxInt64)}}}
		if a := q.win.after; q.win.bounded {
			seeks = []seek{
				{stRefillSameRunAt, []any{q.name, a.priority, a.runAt, a.seq}},
				{stRefillSamePriority, []any{q.name, a.priority, a.runAt}},
				{stRefillBelow, []any{q.name, a.priority}},
			}
		}
		if err := w.extend(q.win, max(q.win.capacity, need)-q.win.len(), seeks); err != nil {
			return fmt.Errorf("refill window of %s: %w", q.name, err)
		}
	}
	return nil
}

// refillGroup reads the next available jobs of group g of the grouped
// queue q that are not leased into its window, from the group's first job
// or after the window's bound, until it holds need of them or all the
// group's. A window that needs refills again and again grows.
func (w *writer) refillGroup(q *wqueue, g string, need int) error {
	w.touched = true
	win := q.flow.groups[g].win
	if win.bounded && win.capacity < maxGroupWindow && len(q.flow.ring) <= growGroupsUpTo {
		win.capacity *= 2
	}
	seeks := []seek{{stGroupFirst, []any{q.name, g}}}
	if a := win.after; win.bounded {
		seeks = []seek{
			{stGroupSamePriority, []any{q.name, g, a.priority, a.runAt, a.seq}},
			{stGroupBelow, []any{q.name, g, a.priority}},
		}
	}
	// The rows of leased jobs still say available: read that many more.
	limit := max(win.capacity, need-win.len()) + w.leases.inGroup(q.name, g)
	if err := w.extend(win, limit, seeks); err != nil {
		return fmt.Errorf("refill group %s of %s: %w", g, q.name, err)
	}
	return nil
}

// extend reads, through seeks in turn, up to limit jobs in claim order
// after win's bound, and extends win with those not leased: complete when
// the seeks found fewer.
func (w *writer) extend(win *window, limit int, seeks []seek) error {
	var out []entry
	for _, s := range seeks {
		if len(out) >= limit {
			break
		}
		rows, err := w.st.get(s.stmt).Query(append(s.args, limit-len(out))...)
		out, err = appendEntries(out, rows, err)
		if err != nil {
			return err
		}
	}
	var last entry
	if len(out) > 0 {
		last = out[len(out)-1]
	}
	kept := out[:0]
	for _, e := range out {
		if !w.leases.leased(e.seq) {
			kept = append(kept, e)
		}
	}
	win.extend(kept, len(out) < limit, last)
	return nil
}

// appendEntries appends the keys of rows (seq, priority, run_at), the
// outcome of a query that failed with err unless nil, to out and closes
// rows.
func appendEntries(out []entry, rows *sql.Rows, err error) ([]entry, error) {
	es, err := scanAll(rows, err, func(r *sql.Rows, e *entry) error { return r.Scan(&e.seq, &e.priority, &e.runAt) })
	return append(out, es...), err
}

// discover walks the index for groups with available jobs that the ring
// of the grouped queue q lacks, from where the last walk stopped, and puts
// up to discoverBatch of them in the ring. It returns how many it added.
func (w *writer) discover(q *wqueue) (int, error) {
	f := &q.flow
	if f.known {
		return 0, nil
	}
	stmt, from := stGroupsAfter, f.walkedTo
	if !f.walking {
		stmt, from = stGroupsFrom, ""
	}
	rows, err := w.st.get(stmt).Query(q.name, from, discoverBatch)
	names, err := scanAll(rows, err, func(r *sql.Rows, g *string) error { return r.Scan(g) })
	if err != nil {
		return 0, fmt.Errorf("walk the groups of %s: %w", q.name, err)
	}
	return f.found(names, q.limits.GroupRate), nil
}
