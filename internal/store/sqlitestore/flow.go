package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Flow control in the embedded store. The writer owns the state: active
// counts come from the lease table (per queue and per group), rate logs
// (job.StartLog) live in memory. A queue whose jobs have groups keeps, in
// place of one ready window, a small window per group with available
// jobs and a ring of those groups; a claim goes round the ring, one job of
// each group a turn, skipping the groups its limits hold. Groups the
// memory does not hold (after a start, or past maxGroupStates) are found
// by walking the jobs_group_claim index. A job without a group is stored
// with the empty group ("") in such a queue, so that it takes its turn
// like any group.

const (
	sqlMarkGrouped  = `UPDATE queues SET grouped = 1 WHERE name = ?`
	sqlGroupPending = `UPDATE jobs SET grp = '', gready = CASE WHEN state = 'available' THEN 1 END
WHERE queue = ? AND grp IS NULL AND state IN ('scheduled', 'available', 'retrying', 'active')`
	sqlSetLimits = `INSERT INTO queues (name, limits) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET limits = ?2`
	// groupWalk lists, from group ?2 on (or after it, see
	// sqlGroupsAfter), up to ?3 groups of queue ?1 with an available job,
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
	groupClaimSelect = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_group_claim
WHERE queue = ?1 AND gready = 1 AND grp IS NOT NULL AND state = 'available' AND grp = ?2`
	groupClaimOrder = ` ORDER BY priority DESC, run_at, seq`
	// A group's window is refilled from the group's first job, or after
	// the window's bound: the rest of its priority (one range of the
	// index, from the bound's run time on), then the lower priorities.
	sqlGroupFirst        = groupClaimSelect + groupClaimOrder + ` LIMIT ?3`
	sqlGroupSamePriority = groupClaimSelect + ` AND priority = ?3 AND run_at >= ?4 AND (run_at > ?4 OR seq > ?5)` + groupClaimOrder + ` LIMIT ?6`
	sqlGroupBelow        = groupClaimSelect + ` AND priority < ?3` + groupClaimOrder + ` LIMIT ?4`
)

var (
	sqlGroupsFrom  = fmt.Sprintf(groupWalk, ">=")
	sqlGroupsAfter = fmt.Sprintf(groupWalk, ">")
)

// Bounds of the groups a queue keeps in memory.
const (
	// groupWindow is the size of a group's window: a refill reads this
	// many of its jobs at once. A group that needs refills again and
	// again gets a window twice as large at each, up to maxGroupWindow,
	// while its queue has no more than growGroupsUpTo groups in the ring.
	groupWindow    = 32
	maxGroupWindow = 512
	growGroupsUpTo = 4096
	// maxGroupStates bounds the groups a queue keeps state for; the
	// groups past it wait in the database until the ring has room.
	maxGroupStates = 65536
	// discoverBatch is how many groups one walk of the index reads.
	discoverBatch = 1000
)

// flowState is the flow-control state of one queue.
type flowState struct {
	// rate holds the starts under the queue's rate.
	rate job.StartLog
	// groups are the groups with a window in the ring or a rate log.
	groups map[string]*groupState
	// ring holds the groups whose windows may hold available jobs, in
	// turn order; next is the next turn. Groups that ran out leave it
	// when their turn comes.
	ring []string
	next int
	// known is set while every group with available jobs is in the ring:
	// a new group's window then starts complete. Until then (after a
	// start, a bulk change, or past maxGroupStates) claims walk the index
	// for groups the ring lacks, from the name after walkedTo.
	known    bool
	walkedTo string
	walking  bool
	// now is the time of the latest claim, by which idle rate logs are
	// told; sweepAt is the number of group states at which the next sweep
	// drops the idle ones.
	now     time.Time
	sweepAt int
	// holds are, in an ordered queue, the groups' jobs in flight (see
	// ordered.go); nil until a claim reads them.
	holds map[string]*hold
}

// groupState is what the writer keeps of one group.
type groupState struct {
	// win is the group's next available jobs in claim order, nil while
	// the group is out of the ring.
	win  *window
	rate job.StartLog
}

// forget drops every window: after a bulk change the database tells
// again which groups have jobs.
func (f *flowState) forget() {
	for g, gs := range f.groups {
		if gs.win != nil {
			gs.win.dropAll()
			gs.win = nil
		}
		if len(gs.rate) == 0 {
			delete(f.groups, g)
		}
	}
	f.ring, f.next = f.ring[:0], 0
	f.known, f.walking = false, false
}

// keepRates takes the rate logs of old, the state of the same queue
// before a resync; r is the queue's group rate.
func (f *flowState) keepRates(old *flowState, r job.Rate) {
	f.rate, f.now = old.rate, old.now
	for g, gs := range old.groups {
		if len(gs.rate) > 0 {
			if kept := f.state(g, r); kept != nil {
				kept.rate = gs.rate
			}
		}
	}
}

// sweep drops the states of the groups out of the ring whose rate logs no
// longer count under r.
func (f *flowState) sweep(r job.Rate) {
	for g, gs := range f.groups {
		if gs.win == nil && gs.rate.Idle(r, f.now) {
			delete(f.groups, g)
		}
	}
	f.sweepAt = 2*len(f.groups) + 1024
}

// state returns the state of group g, making it; nil when the queue holds
// as many group states as it may, even after dropping the idle ones
// (under the group rate r).
func (f *flowState) state(g string, r job.Rate) *groupState {
	gs := f.groups[g]
	if gs == nil {
		if len(f.groups) >= f.sweepAt {
			f.sweep(r)
		}
		if len(f.groups) >= maxGroupStates {
			return nil
		}
		if f.groups == nil {
			f.groups = make(map[string]*groupState)
		}
		gs = &groupState{}
		f.groups[g] = gs
	}
	return gs
}

// join puts group g in the ring with a window, complete when complete:
// the group has no available job outside it.
func (w *writer) join(q *wqueue, g string, complete bool) *groupState {
	gs := q.flow.state(g, q.limits.GroupRate)
	if gs == nil {
		q.flow.known = false
		return nil
	}
	if gs.win == nil {
		gs.win = newWindow(groupWindow, complete, w.cache)
		q.flow.ring = append(q.flow.ring, g)
	}
	return gs
}

// groupAvailable records that job e of group g of the grouped queue q
// became available.
func (w *writer) groupAvailable(q *wqueue, g string, e entry) {
	gs := q.flow.groups[g]
	if gs == nil || gs.win == nil {
		if gs = w.join(q, g, q.flow.known); gs == nil {
			return // the database holds it; a walk will find the group
		}
	}
	gs.win.add(e)
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

// QueueSetLimits sets a queue's flow control; see store.Admin.
func (s *Store) QueueSetLimits(ctx context.Context, name string, l job.Limits) error {
	err := s.do(ctx, 1, func(w *writer) error {
		if err := w.setLimits(name, l); err != nil {
			return err
		}
		for _, g := range w.lanes[name] {
			if err := w.setLimits(job.LaneName(name, g.name), l); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return wrap("set queue limits", err)
	}
	return nil
}

// setLimits sets the limits of queue name in the running transaction.
func (w *writer) setLimits(name string, l job.Limits) error {
	stored, err := encodeLimits(l)
	if err != nil {
		return err
	}
	if _, err := w.conn.ExecContext(context.Background(), sqlSetLimits, name, stored); err != nil {
		return fmt.Errorf("set limits of queue %s: %w", name, err)
	}
	q, err := w.ensureQueue(name)
	if err != nil {
		return err
	}
	q.limits = l
	q.flow.holds = nil
	if l.Grouped() {
		if err := w.markGrouped(name); err != nil {
			return err
		}
	}
	w.fx.limits[name] = l
	w.touched = true
	return nil
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

// groupColumn is the grp value of a new row: the job's group, "" for a job
// without one in a queue claimed by group, else NULL (set false).
func (w *writer) groupColumn(jp *store.JobInsertParams) (group string, set bool) {
	if jp.Group != "" {
		return jp.Group, true
	}
	if q := w.queues[jp.Queue]; q != nil && q.grouped {
		return "", true
	}
	return "", false
}

// availableIn is how many jobs of queue are available and not leased, as
// the running batch leaves them.
func (w *writer) availableIn(queue string) int64 {
	i := stateIndex(job.StateAvailable)
	n := int64(0)
	if info, ok := w.cat.info(queue); ok {
		n = info.Counts[job.StateAvailable]
	}
	for _, d := range []*delta{w.batch, w.fx} {
		if cs := d.counts[queue]; cs != nil {
			n += cs[i]
		}
	}
	return n
}

// groupOf returns the state of group g of the grouped queue q with its
// window, or nil when the group has no available job for sure: it is not
// in the ring, which is known to hold every group with some. A group the
// ring may lack joins it with a window that the claim fills from the
// database. When the queue holds as many group states as it may, it drops
// the window of another group that no rate holds, which a walk of the
// index finds again; full reports that every state is held by a rate, and
// the state is nil then too.
func (w *writer) groupOf(q *wqueue, g string) (gs *groupState, full bool) {
	f := &q.flow
	if gs := f.groups[g]; gs != nil && gs.win != nil {
		return gs, false
	}
	if f.known {
		return nil, false
	}
	if gs := w.join(q, g, false); gs != nil {
		return gs, false
	}
	if !f.evict(q.limits.GroupRate) {
		return nil, true
	}
	if gs := w.join(q, g, false); gs != nil {
		return gs, false
	}
	return nil, true
}

// evict drops from the ring, and forgets, one group whose state no rate
// log that counts under r holds, to make room for another; its jobs stay
// in the database, where a walk finds the group again. It reports whether
// it found one.
func (f *flowState) evict(r job.Rate) bool {
	for i, g := range f.ring {
		gs := f.groups[g]
		if !gs.rate.Idle(r, f.now) {
			continue
		}
		gs.win.dropAll()
		gs.win = nil
		delete(f.groups, g)
		f.ring = slices.Delete(f.ring, i, i+1)
		if i < f.next {
			f.next--
		}
		f.known = false
		return true
	}
	return false
}

// compact drops from the ring the groups whose windows ran out of jobs
// for good, and their states unless a rate log that counts under r holds
// them.
func (f *flowState) compact(r job.Rate) {
	kept := f.ring[:0]
	for _, g := range f.ring {
		gs := f.groups[g]
		if gs.win.len() > 0 || !gs.win.complete {
			kept = append(kept, g)
			continue
		}
		gs.win = nil
		if gs.rate.Idle(r, f.now) {
			delete(f.groups, g)
		}
	}
	clear(f.ring[len(kept):])
	f.ring = kept
}

// discover walks the index for groups with available jobs that the ring
// lacks, from where the last walk stopped, and puts up to discoverBatch of
// them in the ring. It returns how many it added; after a walk that
// reached the last group with every group found in the ring, new groups
// join the ring as they get jobs (known).
func (w *writer) discover(q *wqueue) (int, error) {
	f := &q.flow
	if f.known {
		return 0, nil
	}
	stmt, from := w.st.groupsAfter, f.walkedTo
	if !f.walking {
		stmt, from = w.st.groupsFrom, ""
	}
	rows, err := stmt.Query(q.name, from, discoverBatch)
	if err != nil {
		return 0, fmt.Errorf("walk the groups of %s: %w", q.name, err)
	}
	var names []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return 0, fmt.Errorf("walk the groups of %s: %w", q.name, err)
		}
		names = append(names, g)
	}
	if err := closeRows(rows); err != nil {
		return 0, fmt.Errorf("walk the groups of %s: %w", q.name, err)
	}
	added, full := 0, false
	for _, g := range names {
		if gs := f.groups[g]; gs != nil && gs.win != nil {
			continue
		}
		if w.join(q, g, false) == nil {
			full = true
			break
		}
		added++
	}
	switch {
	case len(names) == discoverBatch && !full:
		f.walkedTo, f.walking = names[len(names)-1], true
	case full:
		f.walking = false // start over once the ring has room
	default:
		f.walking, f.known = false, true
	}
	return added, nil
}

// refillGroup reads the next available jobs of group g that are not
// leased into its window, from the group's first job or after the
// window's bound, until it holds need of them or all the group's.
func (w *writer) refillGroup(q *wqueue, g string, gs *groupState, need int) error {
	w.touched = true
	if gs.win.bounded && gs.win.capacity < maxGroupWindow && len(q.flow.ring) <= growGroupsUpTo {
		gs.win.capacity *= 2
	}
	limit := max(gs.win.capacity, need-gs.win.len()) + w.leases.inGroup(q.name, g)
	var out []entry
	read := func(stmt *sql.Stmt, args ...any) error {
		rows, err := stmt.Query(args...)
		if err != nil {
			return err
		}
		out, err = appendEntries(out, rows)
		return err
	}
	if !gs.win.bounded {
		if err := read(w.st.groupFirst, q.name, g, limit); err != nil {
			return fmt.Errorf("refill group %s of %s: %w", g, q.name, err)
		}
	} else {
		a := gs.win.after
		for _, step := range []struct {
			stmt *sql.Stmt
			args []any
		}{
			{w.st.groupSamePriority, []any{q.name, g, a.priority, a.runAt, a.seq}},
			{w.st.groupBelow, []any{q.name, g, a.priority}},
		} {
			if len(out) >= limit {
				break
			}
			if err := read(step.stmt, append(step.args, limit-len(out))...); err != nil {
				return fmt.Errorf("refill group %s of %s: %w", g, q.name, err)
			}
		}
	}
	var last entry
	if len(out) > 0 {
		last = out[len(out)-1]
	}
	complete := len(out) < limit
	kept := out[:0]
	for _, e := range out {
		if !w.leases.leased(e.seq) {
			kept = append(kept, e)
		}
	}
	gs.win.extend(kept, complete, last)
	return nil
}

// Rows of grouped queues that leave the available state stay in the
// claim index by group (jobs_group_claim, over the rows marked gready)
// until a sweep unmarks them, many at once: an ack then writes only its
// row, not a page of the index in each group it touches, which is what a
// partial index on the state would cost, a group's jobs being apart in
// it. Claims skip the rows a sweep has not reached yet; a trigger marks
// every row that becomes available again.
const (
	// staleSweep is how many such rows wait for a sweep, which runs in
	// the commit that reaches it and at close. A row left unswept by a
	// crash stays until it is pruned. Small sweeps keep the index that a
	// steady flow reads small (a lifecycle run with 1,000 groups: 4,096
	// gives 47k jobs/s, 32,768 gives 40k); a deep backlog prefers large
	// ones, but gains under 5 % from them.
	staleSweep    = 4096
	sqlSweepStale = `UPDATE jobs NOT INDEXED SET gready = NULL
WHERE seq IN (SELECT value FROM json_each(?)) AND gready = 1 AND state != 'available'`
)

// leftAvailable records that the row seq of queue left the available
// state, or was inserted in another.
func (w *writer) leftAvailable(queue string, seq int64) {
	if q := w.queues[queue]; q != nil && q.grouped {
		w.stale = append(w.stale, seq)
	}
}

// sweepStale unmarks the rows of stale once at least atLeast of them
// wait.
func (w *writer) sweepStale(atLeast int) error {
	if len(w.stale) == 0 || len(w.stale) < atLeast {
		return nil
	}
	if _, err := w.st.sweepStale.Exec(seqList(w.stale)); err != nil {
		return fmt.Errorf("sweep the claim index of groups: %w", err)
	}
	w.stale = w.stale[:0]
	return nil
}

// sqlSaveRateLog and sqlRateLogs write and read the rate logs of flow
// control: a row per queue (grp NULL) and per group with starts that
// still count.
const (
	sqlSaveRateLog = `INSERT INTO rate_logs (queue, grp, starts) VALUES (?, ?, ?)`
	sqlRateLogs    = `SELECT queue, grp, starts FROM rate_logs`
)

// saveRateLogs writes every rate log that still counts, in place of the
// ones written before, so that a restart holds the rates.
func (w *writer) saveRateLogs() error {
	ctx := context.Background()
	if _, err := w.conn.ExecContext(ctx, `DELETE FROM rate_logs`); err != nil {
		return fmt.Errorf("write rate logs: %w", err)
	}
	save := func(queue string, grp any, log job.StartLog) error {
		if _, err := w.conn.ExecContext(ctx, sqlSaveRateLog, queue, grp, encodeStarts(log)); err != nil {
			return fmt.Errorf("write rate log of %s: %w", queue, err)
		}
		return nil
	}
	for _, q := range w.queues {
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
	w.touched = true
	return nil
}

// loadRateLogs reads the rate logs written at the last close.
func (w *writer) loadRateLogs() error {
	rows, err := w.conn.QueryContext(context.Background(), sqlRateLogs)
	if err != nil {
		return fmt.Errorf("read rate logs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var queue string
		var grp sql.NullString
		var starts []byte
		if err := rows.Scan(&queue, &grp, &starts); err != nil {
			return fmt.Errorf("read rate logs: %w", err)
		}
		q := w.queues[queue]
		if q == nil {
			continue
		}
		log := decodeStarts(starts)
		if n := len(log); n > 0 && log[n-1] > q.flow.now.UnixNano() {
			q.flow.now = time.Unix(0, log[n-1]).UTC()
		}
		if !grp.Valid {
			q.flow.rate = log
		} else if gs := q.flow.state(grp.String, q.limits.GroupRate); gs != nil {
			gs.rate = log
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rate logs: %w", err)
	}
	return nil
}

// encodeStarts is the stored form of a rate log: 8 bytes a start, little
// endian.
func encodeStarts(log job.StartLog) []byte {
	b := make([]byte, 0, 8*len(log))
	for _, t := range log {
		b = binary.LittleEndian.AppendUint64(b, uint64(t))
	}
	return b
}

// decodeStarts reads the stored form of a rate log.
func decodeStarts(b []byte) job.StartLog {
	log := make(job.StartLog, 0, len(b)/8)
	for ; len(b) >= 8; b = b[8:] {
		log = append(log, int64(binary.LittleEndian.Uint64(b)))
	}
	return log
}
