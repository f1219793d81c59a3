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

// held notes in res what held available jobs of q back.
type held struct {
	capped  bool
	retryAt time.Time
}

func (h *held) rate(next time.Time) {
	if !next.IsZero() && (h.retryAt.IsZero() || next.Before(h.retryAt)) {
		h.retryAt = next
	}
}

// report adds h to res for queue q.
func (h *held) report(q *wqueue, res *store.ClaimResult) {
	if h.capped {
		res.Capped = append(res.Capped, q.name)
	}
	if !h.retryAt.IsZero() && (res.RetryAt.IsZero() || h.retryAt.Before(res.RetryAt)) {
		res.RetryAt = h.retryAt
	}
}

// claimFlow hands out up to want jobs of q under its limits and reports
// in res what held others back.
func (w *writer) claimFlow(q *wqueue, want int, p *store.JobClaimParams, res *store.ClaimResult) ([]*job.Job, error) {
	now := p.Now.UTC()
	if now.After(q.flow.now) {
		q.flow.now = now
	}
	var h held
	room := want
	if m := q.limits.MaxActive; m > 0 {
		if free := m - w.leases.inQueue(q.name); free < room {
			room, h.capped = max(free, 0), true
		}
	}
	if r := q.limits.Rate; !r.IsZero() {
		if n, next := q.flow.rate.Room(r, now); n < room {
			room = n
			h.rate(next)
		}
	}
	var jobs []*job.Job
	var err error
	if room > 0 {
		switch {
		case q.grouped && p.Group != "":
			jobs, err = w.claimGroup(q, p.Group, room, p, &h, res)
		case q.grouped:
			jobs, err = w.claimGroups(q, room, p, &h, res)
		default:
			jobs, err = w.claimPlain([]*wqueue{q}, room, p, res)
		}
		if err != nil {
			return nil, err
		}
	}
	if r := q.limits.Rate; !r.IsZero() && len(jobs) > 0 {
		q.flow.rate = q.flow.rate.Add(r, now, len(jobs))
		if n, next := q.flow.rate.Room(r, now); n == 0 {
			h.rate(next)
		}
	}
	if len(jobs) < want && w.availableIn(q.name) > 0 {
		h.report(q, res)
	}
	return jobs, nil
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

// claimGroups hands out up to room jobs of q, whose jobs have groups: it
// goes round the ring of groups from the turn after the last, taking the
// first job of each group its limits let start, until it has room jobs or
// a whole round gave nothing. The jobs past their maximum wait among
// those it picks are killed instead of leased (see take): they take no
// room and count as no start, and the claim picks again for their places.
func (w *writer) claimGroups(q *wqueue, room int, p *store.JobClaimParams, h *held, res *store.ClaimResult) ([]*job.Job, error) {
	var out []*job.Job
	for len(out) < room {
		jobs, picked, err := w.claimGroupsOnce(q, room-len(out), p, h, res)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
		if len(jobs) == picked {
			break // nothing was killed: the limits or the jobs ran out
		}
	}
	return out, nil
}

// claimGroupsOnce is one pass of claimGroups: it picks up to room jobs
// and leases those take lets through. It returns them and how many it
// picked.
func (w *writer) claimGroupsOnce(q *wqueue, room int, p *store.JobClaimParams, h *held, res *store.ClaimResult) ([]*job.Job, int, error) {
	now := p.Now.UTC()
	l := q.limits
	f := &q.flow
	var picks []pick
	taking := map[string]int{}
	// picked tells the jobs this claim picked but has not leased yet, so
	// that a group that left the ring and came back does not read them
	// again.
	var chosen map[int64]bool
	picked := func(seq int64) bool {
		if chosen == nil {
			chosen = make(map[int64]bool, len(picks))
			for _, pk := range picks {
				chosen[pk.e.seq] = true
			}
		}
		return chosen[seq]
	}
	if l.Ordered && f.holds == nil {
		if err := w.loadHolds(q); err != nil {
			return nil, 0, err
		}
	}
	idle := 0 // turns since the last pick
	for len(picks) < room {
		if idle >= len(f.ring) {
			// A whole round without a job: look for the groups the ring
			// lacks, if any, and go round once more.
			added, err := w.discover(q)
			if err != nil {
				return nil, 0, err
			}
			if added == 0 {
				break
			}
			idle = 0
		}
		if f.next >= len(f.ring) {
			f.next = 0
			f.compact(l.GroupRate)
		}
		if len(f.ring) == 0 {
			continue
		}
		g := f.ring[f.next]
		f.next++
		idle++
		gs := f.groups[g]
		if l.GroupMaxActive > 0 && w.leases.inGroup(q.name, g)+taking[g] >= l.GroupMaxActive {
			h.capped = true
			continue
		}
		if r := l.GroupRate; !r.IsZero() {
			if n, _ := gs.rate.Room(r, now); n-taking[g] <= 0 {
				_, next := append(job.StartLog(nil), gs.rate...).Add(r, now, taking[g]).Room(r, now)
				h.rate(next)
				continue
			}
		}
		if l.Ordered {
			e, ok, out := q.claimHeld(g)
			if out {
				h.capped = true
				continue
			}
			if ok {
				gs.win.remove(e)
				picks = append(picks, pick{q: q, e: e, group: g})
				if chosen != nil {
					chosen[e.seq] = true
				}
				taking[g]++
				idle = 0
				continue
			}
		}
		if gs.win.len() == 0 && !gs.win.complete {
			if err := w.refillGroup(q, g, gs, picked); err != nil {
				return nil, 0, err
			}
		}
		e, ok := gs.win.peek()
		if !ok {
			continue // out of jobs: it leaves the ring at the next compaction
		}
		gs.win.pop()
		picks = append(picks, pick{q: q, e: e, group: g})
		if chosen != nil {
			chosen[e.seq] = true
		}
		taking[g]++
		idle = 0
	}
	if len(picks) == 0 {
		return nil, 0, nil
	}
	jobs, err := w.take(picks, p, now, res)
	if err != nil {
		return nil, 0, err
	}
	if l.Ordered {
		w.held(q, jobs)
	}
	if r := l.GroupRate; !r.IsZero() {
		// Only the jobs leased started: a job killed for its wait did not.
		started := make(map[string]int, len(taking))
		for _, j := range jobs {
			started[j.Group]++
		}
		for g, n := range started {
			gs := f.groups[g]
			gs.rate = gs.rate.Add(r, now, n)
			if left, next := gs.rate.Room(r, now); left == 0 {
				h.rate(next)
			}
		}
	}
	return jobs, len(picks), nil
}

// claimGroup hands out up to room jobs of group g of q, whose jobs have
// groups, in the group's claim order and under its limits: straight from
// the group's window, which it puts in the ring if it is not there,
// without taking a turn of the round-robin. The jobs past their maximum
// wait among those it picks are killed instead of leased (see take), and
// it picks again for their places.
func (w *writer) claimGroup(q *wqueue, g string, room int, p *store.JobClaimParams, h *held, res *store.ClaimResult) ([]*job.Job, error) {
	var out []*job.Job
	for len(out) < room {
		jobs, picked, err := w.claimGroupOnce(q, g, room-len(out), p, h, res)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
		if len(jobs) == picked {
			break // nothing was killed: the limits or the jobs ran out
		}
	}
	return out, nil
}

// claimGroupOnce is one pass of claimGroup: it picks up to room jobs of
// group g that its cap, its rate and, in an ordered queue, its holder let
// out, and leases those take lets through. It returns them and how many
// it picked.
func (w *writer) claimGroupOnce(q *wqueue, g string, room int, p *store.JobClaimParams, h *held, res *store.ClaimResult) ([]*job.Job, int, error) {
	now := p.Now.UTC()
	l := q.limits
	if l.GroupMaxActive > 0 {
		if free := l.GroupMaxActive - w.leases.inGroup(q.name, g); free < room {
			room, h.capped = max(free, 0), true
		}
	}
	if room <= 0 {
		return nil, 0, nil
	}
	gs, full := w.groupOf(q, g)
	if gs == nil {
		// Every group state is taken by a rate that still counts: look
		// again once some have gone idle.
		h.capped = h.capped || full
		return nil, 0, nil
	}
	if r := l.GroupRate; !r.IsZero() {
		if n, next := gs.rate.Room(r, now); n < room {
			room = n
			h.rate(next)
		}
	}
	if room <= 0 {
		return nil, 0, nil
	}
	if l.Ordered && q.flow.holds == nil {
		if err := w.loadHolds(q); err != nil {
			return nil, 0, err
		}
	}
	var picks []pick
	chosen := make(map[int64]bool)
	if l.Ordered {
		e, ok, out := q.claimHeld(g)
		if out {
			h.capped = true
			return nil, 0, nil
		}
		if ok {
			gs.win.remove(e)
			picks = append(picks, pick{q: q, e: e, group: g})
			chosen[e.seq] = true
		}
	}
	for len(picks) < room {
		if gs.win.len() == 0 && !gs.win.complete {
			if err := w.refillGroup(q, g, gs, func(seq int64) bool { return chosen[seq] }); err != nil {
				return nil, 0, err
			}
		}
		e, ok := gs.win.peek()
		if !ok {
			break // out of jobs: it leaves the ring at the next compaction
		}
		gs.win.pop()
		picks = append(picks, pick{q: q, e: e, group: g})
		chosen[e.seq] = true
	}
	if len(picks) == 0 {
		return nil, 0, nil
	}
	jobs, err := w.take(picks, p, now, res)
	if err != nil {
		return nil, 0, err
	}
	if l.Ordered {
		w.held(q, jobs)
	}
	if r := l.GroupRate; !r.IsZero() && len(jobs) > 0 {
		// Only the jobs leased started: a job killed for its wait did not.
		gs.rate = gs.rate.Add(r, now, len(jobs))
		if left, next := gs.rate.Room(r, now); left == 0 {
			h.rate(next)
		}
	}
	return jobs, len(picks), nil
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

// refillGroup reads the next available jobs of group g that are neither
// leased nor picked into its window, from the group's first job or after
// the window's bound.
func (w *writer) refillGroup(q *wqueue, g string, gs *groupState, picked func(seq int64) bool) error {
	w.touched = true
	if gs.win.bounded && gs.win.capacity < maxGroupWindow && len(q.flow.ring) <= growGroupsUpTo {
		gs.win.capacity *= 2
	}
	limit := gs.win.capacity + w.leases.inGroup(q.name, g)
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
		if !w.leases.leased(e.seq) && !picked(e.seq) {
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
