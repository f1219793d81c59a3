package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Flow control in the embedded store. The writer owns the state: active
// counts come from the lease table (per queue and per group), rate logs
// (job.StartLog) live in memory, and a queue whose jobs have groups is
// claimed by walking its groups in name order from where the last claim
// stopped, one job of each group a turn (round-robin), over the
// jobs_group_claim index. Such a queue keeps no ready window: a job
// without a group is stored with group '' there, so that it takes its
// turn like any group.

const (
	sqlMarkGrouped   = `UPDATE queues SET grouped = 1 WHERE name = ?`
	sqlGroupPending  = `UPDATE jobs SET grp = '' WHERE queue = ? AND grp IS NULL AND state IN ('scheduled', 'available', 'retrying', 'active')`
	sqlSetLimits     = `INSERT INTO queues (name, limits) VALUES (?1, ?2) ON CONFLICT (name) DO UPDATE SET limits = ?2`
	sqlFirstGroup    = `SELECT grp FROM jobs INDEXED BY jobs_group_claim WHERE queue = ?1 AND state = 'available' AND grp IS NOT NULL ORDER BY grp LIMIT 1`
	sqlNextGroup     = `SELECT grp FROM jobs INDEXED BY jobs_group_claim WHERE queue = ?1 AND state = 'available' AND grp IS NOT NULL AND grp > ?2 ORDER BY grp LIMIT 1`
	groupClaimSelect = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_group_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NOT NULL AND grp = ?2`
	groupClaimOrder = ` ORDER BY priority DESC, run_at, seq`
	// The reads of a group's next jobs after a bound follow the window's
	// refill (claim.go): the rest of the bound's run time, of its
	// priority, then the lower priorities.
	sqlGroupHead         = groupClaimSelect + groupClaimOrder + ` LIMIT ?3`
	sqlGroupSameRunAt    = groupClaimSelect + ` AND priority = ?3 AND run_at = ?4 AND seq > ?5` + groupClaimOrder + ` LIMIT ?6`
	sqlGroupSamePriority = groupClaimSelect + ` AND priority = ?3 AND run_at > ?4` + groupClaimOrder + ` LIMIT ?5`
	sqlGroupBelow        = groupClaimSelect + ` AND priority < ?3` + groupClaimOrder + ` LIMIT ?4`
)

// flowState is the flow-control state of one queue.
type flowState struct {
	// rate holds the starts under the queue's rate.
	rate job.StartLog
	// groups are the groups with a rate log or a claim bound.
	groups map[string]*groupState
	// cursor is the last group a claim took a job from; walked set means
	// one did.
	cursor string
	walked bool
	// maxBound is the latest claim bound of any group: a job made
	// available before it may lie before its group's bound, which then
	// no longer holds.
	maxBound  entry
	hasBounds bool
}

// groupState is what the writer keeps of one group.
type groupState struct {
	rate job.StartLog
	// after, when bounded, is the claim-order key of the group's last job
	// handed out: its available jobs not leased all come after it.
	after   entry
	bounded bool
}

// maxGroupStates bounds the groups a queue keeps state for; past it, the
// states that hold nothing a limit needs are dropped.
const maxGroupStates = 4096

// group returns the state of group g, making it.
func (f *flowState) group(g string) *groupState {
	if f.groups == nil {
		f.groups = make(map[string]*groupState)
	}
	s := f.groups[g]
	if s == nil {
		s = &groupState{}
		f.groups[g] = s
	}
	return s
}

// trim drops group states that hold no start within rate's window, once
// there are too many.
func (f *flowState) trim(rate job.Rate, now time.Time) {
	if len(f.groups) <= maxGroupStates {
		return
	}
	for g, s := range f.groups {
		if room, _ := s.rate.Room(rate, now); room == rate.Limit || rate.IsZero() {
			delete(f.groups, g)
		}
	}
	f.forgetBounds()
}

// forgetBounds drops every group's claim bound: the next claim of each
// group reads from its first job.
func (f *flowState) forgetBounds() {
	if !f.hasBounds {
		return
	}
	for _, s := range f.groups {
		s.bounded = false
	}
	f.hasBounds = false
}

// madeAvailable notes a job of the queue that became available: one that
// ranks at or before a claim bound may be at or before its group's.
func (f *flowState) madeAvailable(e entry) {
	if f.hasBounds && !f.maxBound.before(e) {
		f.forgetBounds()
	}
}

// bound records that group s's claims stopped at e.
func (f *flowState) bound(s *groupState, e entry) {
	s.after, s.bounded = e, true
	if !f.hasBounds || f.maxBound.before(e) {
		f.maxBound = e
	}
	f.hasBounds = true
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
		if l.Grouped() {
			if err := w.markGrouped(name); err != nil {
				return err
			}
		}
		w.fx.limits[name] = l
		w.touched = true
		return nil
	})
	if err != nil {
		return wrap("set queue limits", err)
	}
	return nil
}

// markGrouped makes the queue claim by group from now on: its pending
// jobs without a group join group ''.
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

// groupColumn is the grp value of a new row: the job's group, '' for a job
// without one in a queue claimed by group, else NULL.
func (w *writer) groupColumn(jp *store.JobInsertParams) any {
	if jp.Group != "" {
		return jp.Group
	}
	if q := w.queues[jp.Queue]; q != nil && q.grouped {
		return ""
	}
	return nil
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
		if q.grouped {
			jobs, err = w.claimGroups(q, room, p, &h)
		} else {
			jobs, err = w.claimPlain([]*wqueue{q}, room, p)
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
// walks the groups with available jobs in name order from the one after
// the last served, wrapping around, and takes one job from each group
// its limits let start, until it has room jobs or a whole turn gave
// nothing.
func (w *writer) claimGroups(q *wqueue, room int, p *store.JobClaimParams, h *held) ([]*job.Job, error) {
	now := p.Now.UTC()
	l := q.limits
	var picks []pick
	taking := map[string]int{} // jobs picked from each group in this claim
	var sinceTake []string     // groups visited since the last pick, to end a fruitless turn
	cursor, walked := q.flow.cursor, q.flow.walked
	for len(picks) < room {
		g, ok, err := w.nextGroup(q.name, cursor, walked)
		if err != nil {
			return nil, err
		}
		if !ok {
			if !walked {
				break // no group has an available job
			}
			walked = false // wrap around
			continue
		}
		cursor, walked = g, true
		if len(sinceTake) > 0 && sinceTake[0] == g {
			break // a whole turn without a job
		}
		sinceTake = append(sinceTake, g)
		active := w.leases.inGroup(q.name, g) + taking[g]
		if l.GroupMaxActive > 0 && active >= l.GroupMaxActive {
			h.capped = true
			continue
		}
		gs := q.flow.group(g)
		if r := l.GroupRate; !r.IsZero() {
			if n, _ := gs.rate.Room(r, now); n-taking[g] <= 0 {
				_, next := append(job.StartLog(nil), gs.rate...).Add(r, now, taking[g]).Room(r, now)
				h.rate(next)
				continue
			}
		}
		e, ok, err := w.groupHead(q, g, gs, active)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // its available rows are all leased
		}
		q.flow.bound(gs, e)
		picks = append(picks, pick{q: q, e: e})
		taking[g]++
		sinceTake = sinceTake[:0]
		q.flow.cursor, q.flow.walked = g, true
	}
	if len(picks) == 0 {
		return nil, nil
	}
	jobs, err := w.take(picks, p.LeaseDuration, now)
	if err != nil {
		return nil, err
	}
	if r := l.GroupRate; !r.IsZero() {
		for g, n := range taking {
			gs := q.flow.group(g)
			gs.rate = gs.rate.Add(r, now, n)
			if left, next := gs.rate.Room(r, now); left == 0 {
				h.rate(next)
			}
		}
		q.flow.trim(r, now)
	} else {
		q.flow.trim(job.Rate{}, now)
	}
	return jobs, nil
}

// nextGroup returns the first group of queue after cursor (from the first
// when walked is not set) that has an available row, leased or not.
func (w *writer) nextGroup(queue, cursor string, walked bool) (string, bool, error) {
	var row interface{ Scan(...any) error }
	if walked {
		row = w.conn.QueryRowContext(context.Background(), sqlNextGroup, queue, cursor)
	} else {
		row = w.conn.QueryRowContext(context.Background(), sqlFirstGroup, queue)
	}
	var g string
	err := row.Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("find the next group of %s: %w", queue, err)
	}
	return g, true, nil
}

// groupHead returns the next available job of group g of q that is not
// leased, in claim order: after the group's bound when it has one, else
// from its first job, looking past the active jobs of the group.
func (w *writer) groupHead(q *wqueue, g string, gs *groupState, active int) (entry, bool, error) {
	read := func(query string, args ...any) (entry, bool, error) {
		rows, err := w.conn.QueryContext(context.Background(), query, args...)
		if err != nil {
			return entry{}, false, fmt.Errorf("read group %s of %s: %w", g, q.name, err)
		}
		defer rows.Close()
		for rows.Next() {
			var e entry
			var prio int64
			if err := rows.Scan(&e.seq, &prio, &e.runAt); err != nil {
				return entry{}, false, fmt.Errorf("read group %s of %s: %w", g, q.name, err)
			}
			e.priority = int(prio)
			if !w.leases.leased(e.seq) {
				return e, true, nil
			}
		}
		if err := rows.Err(); err != nil {
			return entry{}, false, fmt.Errorf("read group %s of %s: %w", g, q.name, err)
		}
		return entry{}, false, nil
	}
	if !gs.bounded {
		return read(sqlGroupHead, q.name, g, active+1)
	}
	a := gs.after
	for _, step := range []struct {
		query string
		args  []any
	}{
		{sqlGroupSameRunAt, []any{q.name, g, a.priority, a.runAt, a.seq, active + 1}},
		{sqlGroupSamePriority, []any{q.name, g, a.priority, a.runAt, active + 1}},
		{sqlGroupBelow, []any{q.name, g, a.priority, active + 1}},
	} {
		e, ok, err := read(step.query, step.args...)
		if err != nil || ok {
			return e, ok, err
		}
	}
	return entry{}, false, nil
}
