package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Bounds of one flow claim.
const (
	// maxGroupVisits bounds how many groups one claim looks at for
	// groups with room: with groups at their caps or rates by the
	// thousand, a claim hands out what the first ones let out, and the
	// next claim goes on from there.
	maxGroupVisits = 4096
	// groupSlack is how many groups a claim reads beyond those it needs,
	// in case some of them have no room.
	groupSlack = 8
)

const (
	// sqlLockFlowQueue locks a queue's row, which serialises the claims of
	// the queue across nodes, and reads its flow control.
	sqlLockFlowQueue = `SELECT paused, flow, rate_limit, rate_period_ns, max_active, group_rate_limit,
	group_rate_period_ns, group_max_active, ordered, last_group, rate_starts, max_wait_ns
FROM spool_queues WHERE name = $1 FOR NO KEY UPDATE`
	// sqlCountActive counts the active jobs of queue $1 from the held
	// index, up to its cap (none without one). Sent in one go with
	// sqlLockFlowQueue, it runs after the lock with a snapshot of its own,
	// so it sees every claim of the queue that committed before.
	sqlCountActive = `SELECT count(*) FROM (
	SELECT 1 FROM spool_jobs WHERE queue = $1 AND state = 'active' AND grp IS NOT NULL
	LIMIT COALESCE((SELECT max_active FROM spool_queues WHERE name = $1), 0)) a`
	// sqlGroupWalk finds up to $4 groups of queue $1 with available jobs,
	// in byte order from $2 (past it when $3), as found(grp). It skips from
	// group to group down the group claim index (a loose index scan), so a
	// claim reads one index entry per group, not every available job. The
	// groups found go back to the default collation, the one of the held
	// index and of spool_group_starts: compared in "C", a group could not
	// be looked up in them, and each count would scan the queue's active
	// jobs.
	sqlGroupWalk = `WITH RECURSIVE g(grp) AS (
	(SELECT grp COLLATE "C" FROM spool_jobs
	WHERE queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL AND grp >= $2 COLLATE "C"
	ORDER BY grp COLLATE "C" LIMIT 1)
	UNION ALL
	SELECT (SELECT j.grp COLLATE "C" FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp COLLATE "C" > g.grp
		ORDER BY j.grp COLLATE "C" LIMIT 1)
	FROM g WHERE g.grp IS NOT NULL
), found AS (
	SELECT grp COLLATE "default" AS grp FROM g WHERE grp IS NOT NULL AND NOT ($3 AND grp = $2) LIMIT $4
)
`
	// sqlGroupOne is sqlGroupWalk for group $2 alone, read with one seek
	// into the group claim index: found holds it when it has available
	// jobs. It takes the walk's parameters, so that the same statements
	// follow it: it finds nothing past $2 ($3) or when asked for none
	// ($4 = 0).
	sqlGroupOne = `WITH found AS (
	SELECT $2::text AS grp WHERE NOT $3::bool AND $4::int4 > 0 AND EXISTS (SELECT 1 FROM spool_jobs
		WHERE queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL AND grp = $2 COLLATE "C")
)
`
	// sqlGroupsFrom lists the groups of sqlGroupWalk, each with its active
	// jobs counted up to $5 and, when $6, its start log.
	sqlGroupsFrom = sqlGroupWalk + groupsTail
	// sqlGroupFrom is sqlGroupsFrom for the one group of sqlGroupOne.
	sqlGroupFrom = sqlGroupOne + groupsTail
	// groupsTail reads, for each group found, what sqlGroupsFrom lists.
	groupsTail = `SELECT f.grp,
	(SELECT count(*) FROM (SELECT 1 FROM spool_jobs a
		WHERE a.queue = $1 AND a.state = 'active' AND a.grp IS NOT NULL AND a.grp = f.grp LIMIT $5) x),
	s.starts
FROM found f LEFT JOIN spool_group_starts s ON $6 AND s.queue = $1 AND s.grp = f.grp
ORDER BY f.grp COLLATE "C"`
	// sqlHeldSeek, completed by a state, reads the jobs of group f.grp of
	// queue $1 in that state that were handed out, with a seek into the
	// held index. Each waiting state has a seek of its own: with the
	// states in one list, the planner may scan the whole queue in the
	// index for the group instead.
	sqlHeldSeek = `SELECT j.seq, j.state FROM spool_jobs j
		WHERE j.queue = $1 AND j.grp IS NOT NULL AND j.grp = f.grp AND j.attempt > 0 AND j.state = `
	// sqlOrderedGroupsFrom lists the groups of sqlGroupWalk in an ordered
	// queue as sqlGroupsFrom does, each with, when it has no active job,
	// the seq and state of its holder (its first job in seq order that was
	// handed out: job.HoldsGroup; an active holder is counted already),
	// and, when it has no active job and no holder that waits, the seqs of
	// its first two available jobs in claim order (the second tells
	// whether the group has jobs beyond the one it may hand out). A group
	// with an active job costs one seek, as in sqlGroupsFrom; a free one
	// three more into the held index and one into the group claim index.
	sqlOrderedGroupsFrom = sqlGroupWalk + orderedGroupsTail
	// sqlOrderedGroupFrom is sqlOrderedGroupsFrom for the one group of
	// sqlGroupOne.
	sqlOrderedGroupFrom = sqlGroupOne + orderedGroupsTail
	// orderedGroupsTail reads, for each group found, what
	// sqlOrderedGroupsFrom lists.
	orderedGroupsTail = `SELECT f.grp, a.n, s.starts, h.seq, h.state,
	CASE WHEN a.n = 0 AND (h.seq IS NULL OR h.state = 'available') THEN ARRAY(
		SELECT j.seq FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp = f.grp COLLATE "C"
		ORDER BY j.priority DESC, j.run_at, j.seq LIMIT 2) END
FROM found f
CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM spool_jobs a
	WHERE a.queue = $1 AND a.state = 'active' AND a.grp IS NOT NULL AND a.grp = f.grp LIMIT $5) x) a
LEFT JOIN LATERAL (SELECT w.seq, w.state FROM (
	(` + sqlHeldSeek + `'available' ORDER BY j.seq LIMIT 1)
	UNION ALL (` + sqlHeldSeek + `'retrying' ORDER BY j.seq LIMIT 1)
	UNION ALL (` + sqlHeldSeek + `'scheduled' ORDER BY j.seq LIMIT 1)) w
	WHERE a.n = 0 ORDER BY w.seq LIMIT 1) h ON true
LEFT JOIN spool_group_starts s ON $6 AND s.queue = $1 AND s.grp = f.grp
ORDER BY f.grp COLLATE "C"`
	// sqlGroupHeads reads, for each group of $2, the seqs of up to $3 of
	// its available jobs in claim order after the first $4, from the
	// group claim index, each with its attempt count and run time, which
	// job.PastMaxWait needs.
	sqlGroupHeads = `SELECT g.ord, h.seq, h.attempt, h.run_at FROM unnest($2::text[], $3::int4[], $4::int4[]) WITH ORDINALITY AS g(grp, n, skip, ord)
CROSS JOIN LATERAL (
	SELECT j.seq, j.priority, j.run_at, j.attempt FROM spool_jobs j
	WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp = g.grp COLLATE "C"
	ORDER BY j.priority DESC, j.run_at, j.seq LIMIT g.n OFFSET g.skip) h
ORDER BY g.ord, h.priority DESC, h.run_at, h.seq`
	// sqlClaimSeqs leases the jobs of the seqs $1 that are still
	// available and not past their wait, that is started or due after $4
	// (NULL: no maximum wait), for worker $5; see claimTail. It finds
	// them by seq alone, then looks at the state of the rows it locked: a
	// state in the search would let the planner scan the claim index.
	sqlClaimSeqs = `WITH locked AS (
	SELECT ctid, state, attempt, run_at FROM spool_jobs WHERE seq = ANY($1::int8[]) FOR UPDATE
), picked AS (
	SELECT ctid FROM locked
	WHERE state = 'available' AND (attempt > 0 OR run_at > COALESCE($4::timestamptz, '-infinity'))
)` + claimTail
	// sqlFlowCursor stores the last group served and the rate start log.
	sqlFlowCursor = `UPDATE spool_queues SET last_group = $2, rate_starts = $3 WHERE name = $1`
	// sqlGroupStarts stores the start logs of groups, with their newest
	// start.
	sqlGroupStarts = `INSERT INTO spool_group_starts (queue, grp, starts, last_start)
SELECT $1, g, s, $4 FROM unnest($2::text[], $3::bytea[]) AS u(g, s) ORDER BY g
ON CONFLICT (queue, grp) DO UPDATE SET starts = excluded.starts, last_start = excluded.last_start`
	// sqlAnyAvailable reports whether queue $1 has available jobs.
	sqlAnyAvailable = `SELECT EXISTS (SELECT 1 FROM spool_jobs WHERE queue = $1 AND state = 'available' AND grp IS NOT NULL)`
	// sqlGroupAvailable reports whether group $2 of queue $1 has
	// available jobs.
	sqlGroupAvailable = `SELECT EXISTS (SELECT 1 FROM spool_jobs
	WHERE queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL AND grp = $2 COLLATE "C")`
)

// claimFlow claims up to p.Max-len(res.Jobs) jobs of queue q, which this
// node believes to have flow control, into res, and adds to res what held
// q's other available jobs back. A queue without flow control after all
// is forgotten and claimed the plain way. The jobs past their wait that a
// claim meets take places it could have filled: when it met some and
// came out short, it claims again, up to maxClaimRounds times.
func (s *Store) claimFlow(ctx context.Context, q string, p *store.JobClaimParams, res *store.ClaimResult) error {
	for round := 0; round < maxClaimRounds && len(res.Jobs) < p.Max; round++ {
		met, err := s.claimFlowOnce(ctx, q, p, res)
		if err != nil || met == 0 {
			return err
		}
	}
	return nil
}

// claimFlowOnce is one claim of claimFlow, in one transaction; it
// returns how many jobs past their wait it met (and killed).
func (s *Store) claimFlowOnce(ctx context.Context, q string, p *store.JobClaimParams, res *store.ClaimResult) (int, error) {
	want := p.Max - len(res.Jobs)
	var c *flowClaim
	plain := false
	err := s.retryTx(ctx, func(tx pgx.Tx) error {
		c = &flowClaim{tx: tx, queue: q, group: p.Group, now: micro(p.Now), want: want, lease: p.LeaseDuration, worker: p.Worker}
		found, err := c.lock(ctx)
		if err != nil {
			return err
		}
		plain = !found || !c.q.flow
		if plain || c.q.paused {
			return nil
		}
		if err := c.run(ctx); err != nil {
			return err
		}
		_, c.letters, err = s.expire(ctx, tx, c.expired, c.now)
		return err
	})
	if err != nil {
		return 0, wrap(fmt.Sprintf("claim jobs of queue %s", q), err)
	}
	if plain {
		s.flowQueues.Delete(q)
		s.plainSeen.Store(q, time.Now())
		jobs, err := s.claimPlain(ctx, []string{q}, p, want, res)
		res.Jobs = append(res.Jobs, jobs...)
		return 0, err
	}
	res.Jobs = append(res.Jobs, c.jobs...)
	for _, dlq := range c.letters {
		res.Available = appendOnce(res.Available, dlq)
	}
	if len(c.jobs) < want {
		res.RetryAt = earliest(res.RetryAt, c.retryAt)
		if c.capped && !slices.Contains(res.Capped, q) {
			res.Capped = append(res.Capped, q)
		}
	}
	return len(c.expired), nil
}

// flowClaim is one claim of a queue with flow control, in the transaction
// that holds the queue's row.
type flowClaim struct {
	tx    pgx.Tx
	queue string
	// group, when set, is the one group the claim takes jobs of; it
	// leaves the round-robin's cursor where it was.
	group string
	now   time.Time
	want  int
	lease time.Duration
	// worker is the name of the claiming worker ("" for none).
	worker string

	q      flowQueue
	active int          // the queue's active jobs, counted up to its cap
	groups []*flowGroup // the groups with room, in the order they are served
	jobs   []*job.Job   // handed out, in the order they were served

	// What held available jobs back: a cap (capped), a rate (the first
	// moment one lets a job start again).
	capped  bool
	retryAt time.Time

	// expired are the jobs past their wait that the claim met, which it
	// kills instead of handing out; letters the dead-letter queues that
	// got their copies.
	expired []int64
	letters []string
}

// flowQueue is the flow control of a queue as its row holds it.
type flowQueue struct {
	paused, flow bool
	limits       job.Limits
	lastGroup    *string
	starts       job.StartLog
	maxWait      time.Duration
}

// waitCutoff is the run time at and before which a job not started yet
// is past the queue's maximum wait at the claim's moment, nil when the
// queue has none: the parameter of sqlGroupHeads and sqlClaimSeqs.
func (c *flowClaim) waitCutoff() *time.Time {
	if c.q.maxWait <= 0 {
		return nil
	}
	t := c.now.Add(-c.q.maxWait)
	return &t
}

// flowGroup is one group of a claim.
type flowGroup struct {
	name    string
	active  int
	log     job.StartLog
	room    int     // how many of its jobs may start; -1: no group limit
	seqs    []int64 // its available jobs read so far that may start, in claim order
	read    int     // how many of its available jobs were read, past their wait or not
	past    int     // how many of those were past their wait
	taken   int     // how many of seqs the claim hands out
	dry     bool    // it has no available jobs beyond seqs
	started int     // how many of its jobs started

	// In an ordered queue: the state of the group's holder ("" for
	// none; see job.HoldsGroup), which alone may go out when it is
	// available, and, unless a holder waits, its first available jobs in
	// claim order (up to two), when it has no active job.
	holder    job.State
	holderSeq int64
	heads     []int64
}

// lock locks the queue's row and reads its flow control and its active
// jobs (up to its cap), in one round trip; found is false for an unknown
// queue.
func (c *flowClaim) lock(ctx context.Context) (found bool, err error) {
	var (
		rate, maxActive, groupRate, groupMaxActive int32
		ratePeriod, groupRatePeriod, maxWait       int64
		ordered                                    bool
		starts                                     []byte
	)
	batch := &pgx.Batch{}
	batch.Queue(sqlLockFlowQueue, c.queue).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&c.q.paused, &c.q.flow, &rate, &ratePeriod, &maxActive,
			&groupRate, &groupRatePeriod, &groupMaxActive, &ordered, &c.q.lastGroup, &starts, &maxWait)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	batch.Queue(sqlCountActive, c.queue).QueryRow(func(row pgx.Row) error { return row.Scan(&c.active) })
	if err := c.tx.SendBatch(ctx, batch).Close(); err != nil {
		return false, fmt.Errorf("lock queue: %w", err)
	}
	if !found {
		return false, nil
	}
	c.q.limits = job.Limits{
		Rate: job.Rate{Limit: int(rate), Period: time.Duration(ratePeriod)}, MaxActive: int(maxActive),
		GroupRate: job.Rate{Limit: int(groupRate), Period: time.Duration(groupRatePeriod)}, GroupMaxActive: int(groupMaxActive),
		Ordered: ordered,
	}.Normalized()
	c.q.maxWait = time.Duration(maxWait)
	if c.q.starts, err = decodeStarts(starts, c.q.limits.Rate.Limit); err != nil {
		return false, fmt.Errorf("read the rate start log: %w", err)
	}
	return true, nil
}

// run hands out what the queue's limits let start: as many jobs as the
// queue's own cap and rate leave room for, round-robin over the groups
// with room, then records the starts.
func (c *flowClaim) run(ctx context.Context) error {
	l := c.q.limits
	room, capRoom := c.want, -1
	if l.MaxActive > 0 {
		capRoom = max(0, l.MaxActive-c.active)
		room = min(room, capRoom)
	}
	if rateRoom, _ := c.q.starts.Room(l.Rate, c.now); rateRoom >= 0 {
		room = min(room, rateRoom)
	}
	var picks []int64
	if room > 0 {
		if err := c.findGroups(ctx, room); err != nil {
			return err
		}
		var err error
		if picks, err = c.share(ctx, room); err != nil {
			return err
		}
	}
	if err := c.claim(ctx, picks); err != nil {
		return err
	}
	if err := c.record(ctx); err != nil {
		return err
	}
	if len(c.jobs) >= c.want {
		return nil
	}
	// The queue's own cap or rate held jobs back if it is used up and
	// jobs are left.
	capped := capRoom >= 0 && capRoom <= len(c.jobs)
	rateRoom, next := c.q.starts.Room(l.Rate, c.now)
	if !capped && rateRoom != 0 {
		return nil
	}
	var left bool
	query, args := sqlAnyAvailable, []any{c.queue}
	if c.group != "" {
		query, args = sqlGroupAvailable, []any{c.queue, c.group}
	}
	if err := c.tx.QueryRow(ctx, query, args...).Scan(&left); err != nil {
		return fmt.Errorf("look for available jobs: %w", err)
	}
	if left {
		c.capped = c.capped || capped
		if rateRoom == 0 {
			c.retryAt = earliest(c.retryAt, next)
		}
	}
	return nil
}

// findGroups finds up to room groups with available jobs and room under
// the group limits, in round-robin order: from the group after the last
// one served, wrapping around once. Groups without room are passed over
// and counted in what held jobs back. A claim of one group finds that
// group alone, if it has available jobs and room.
func (c *flowClaim) findGroups(ctx context.Context, room int) error {
	l := c.q.limits
	seen := make(map[string]bool)
	from, past, wrapped := "", false, c.q.lastGroup == nil
	if !wrapped {
		from, past = *c.q.lastGroup, true
	}
	query := sqlGroupsFrom
	switch {
	case c.group != "" && l.Ordered:
		query = sqlOrderedGroupFrom
	case c.group != "":
		query = sqlGroupFrom
	case l.Ordered:
		query = sqlOrderedGroupsFrom
	}
	if c.group != "" {
		// One group: found at once, or not at all.
		from, past, wrapped, room = c.group, false, true, 1
	}
	var (
		name        string
		active      int64
		starts      []byte
		holderSeq   *int64
		holderState *string
		heads       []int64
	)
	scan := []any{&name, &active, &starts}
	if l.Ordered {
		scan = append(scan, &holderSeq, &holderState, &heads)
	}
	for visited := 0; len(c.groups) < room && visited < maxGroupVisits; {
		chunk := min(room-len(c.groups)+groupSlack, maxGroupVisits-visited)
		rows, err := c.tx.Query(ctx, query, c.queue, from, past, chunk, l.GroupMaxActive, !l.GroupRate.IsZero())
		if err != nil {
			return fmt.Errorf("find groups: %w", err)
		}
		var found []*flowGroup
		_, err = pgx.ForEachRow(rows, scan, func() error {
			log, err := decodeStarts(starts, l.GroupRate.Limit)
			if err != nil {
				return fmt.Errorf("read the start log of group %q: %w", name, err)
			}
			g := &flowGroup{name: name, active: int(active), log: log}
			if holderSeq != nil && holderState != nil {
				g.holder, g.holderSeq = job.State(*holderState), *holderSeq
			}
			g.heads = slices.Clone(heads)
			found = append(found, g)
			return nil
		})
		if err != nil {
			return fmt.Errorf("find groups: %w", err)
		}
		for _, g := range found {
			if seen[g.name] {
				return nil // round the whole cycle
			}
			seen[g.name] = true
			visited++
			if c.admit(g) {
				if c.groups = append(c.groups, g); len(c.groups) == room {
					return nil
				}
			}
		}
		switch {
		case len(found) == chunk:
			from, past = found[len(found)-1].name, true
		case wrapped:
			return nil
		default:
			from, past, wrapped = "", false, true
		}
	}
	return nil
}

// admit sets how many jobs of g may start and reports whether any may;
// a group without room counts in what held jobs back. In an ordered
// queue a group whose holder waits (retrying, scheduled) has no room and
// counts as capped: its holder's promotion announces the queue, and its
// end frees the group as an active job's would.
func (c *flowClaim) admit(g *flowGroup) bool {
	l := c.q.limits
	g.room = -1
	if l.GroupMaxActive > 0 {
		g.room = max(0, l.GroupMaxActive-g.active)
		if l.Ordered && g.room > 0 && g.holder != "" && g.holder != job.StateAvailable {
			g.room = 0
		}
		c.capped = c.capped || g.room == 0
	}
	if r, next := g.log.Room(l.GroupRate, c.now); r >= 0 {
		if r == 0 {
			c.retryAt = earliest(c.retryAt, next)
		}
		if g.room < 0 || r < g.room {
			g.room = r
		}
	}
	return g.room != 0
}

// share picks up to room jobs of c.groups, one group a turn in order, a
// group's own jobs in claim order, and returns their seqs in the order
// served. It reads the groups' jobs a turn's worth at a time: enough for
// every group to fill the room, then more for the groups that had
// enough when others ran dry. The jobs past their wait that it reads go
// to c.expired, not to the groups: they take no room.
func (c *flowClaim) share(ctx context.Context, room int) ([]int64, error) {
	if c.q.limits.Ordered {
		return c.shareOrdered(ctx, room)
	}
	var picks []int64
	live := c.groups
	for room > 0 && len(live) > 0 && len(c.expired) < maxKilledByClaim {
		turns := (room + len(live) - 1) / len(live)
		err := c.readGroups(ctx, live, func(g *flowGroup) int {
			n := turns
			if g.room >= 0 && g.room-g.taken <= turns {
				n = g.room - g.taken + 1 // one more tells whether its room holds jobs back
			}
			return n
		})
		if err != nil {
			return nil, err
		}
		for t := 0; t < turns && room > 0; t++ {
			for _, g := range live {
				if room > 0 && g.taken < len(g.seqs) && (g.room < 0 || g.taken < g.room) {
					picks = append(picks, g.seqs[g.taken])
					g.taken++
					room--
				}
			}
		}
		next := live[:0:0]
		for _, g := range live {
			if !g.dry && (g.room < 0 || g.taken < g.room) {
				next = append(next, g)
			}
		}
		live = next
	}
	return picks, nil
}

// readGroups reads the next jobs of each group of live in claim order,
// ask(g) of them after those read before, and keeps those that may still
// start in g.seqs and sends those past their wait (job.PastMaxWait) to
// c.expired; they take no room. A group that had fewer than it asked for
// is dry. The more of its jobs turned out past their wait, the more it
// asks for next.
func (c *flowClaim) readGroups(ctx context.Context, live []*flowGroup, ask func(g *flowGroup) int) error {
	names, asks, skips := make([]string, len(live)), make([]int32, len(live)), make([]int32, len(live))
	for i, g := range live {
		names[i], asks[i], skips[i] = g.name, int32(ask(g)+g.past), int32(g.read)
	}
	rows, err := c.tx.Query(ctx, sqlGroupHeads, c.queue, names, asks, skips)
	if err != nil {
		return fmt.Errorf("read the jobs of groups: %w", err)
	}
	var ord, seq int64
	var attempt int32
	var runAt time.Time
	_, err = pgx.ForEachRow(rows, []any{&ord, &seq, &attempt, &runAt}, func() error {
		g := live[ord-1]
		g.read++
		if job.PastMaxWait(int(attempt), runAt.UTC(), c.q.maxWait, c.now) {
			g.past++
			c.expired = append(c.expired, seq)
		} else {
			g.seqs = append(g.seqs, seq)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the jobs of groups: %w", err)
	}
	for i, g := range live {
		g.dry = g.read-int(skips[i]) < int(asks[i])
	}
	return nil
}

// shareOrdered picks one job of each group of c.groups in an ordered
// queue, up to room, from what the group walk read: its holder when it
// has one (admit let only an available one through), else its first
// available job in claim order. In a queue with a maximum wait, a group
// without a holder reads its first jobs again, with what the rule needs,
// and its first one that may still start goes out, those before it to
// c.expired.
func (c *flowClaim) shareOrdered(ctx context.Context, room int) ([]int64, error) {
	var unsure []*flowGroup
	for _, g := range c.groups {
		g.seqs, g.dry = g.heads, len(g.heads) < 2
		switch {
		case g.holder == job.StateAvailable:
			g.seqs = []int64{g.holderSeq}
		case c.q.maxWait > 0 && len(g.heads) > 0:
			g.seqs = nil
			unsure = append(unsure, g)
		}
	}
	for len(unsure) > 0 && len(c.expired) < maxKilledByClaim {
		if err := c.readGroups(ctx, unsure, func(*flowGroup) int { return 2 }); err != nil {
			return nil, err
		}
		next := unsure[:0:0]
		for _, g := range unsure {
			if len(g.seqs) == 0 && !g.dry {
				next = append(next, g)
			}
		}
		unsure = next
	}
	var picks []int64
	for _, g := range c.groups {
		if len(picks) == room {
			break
		}
		if len(g.seqs) == 0 {
			continue
		}
		picks = append(picks, g.seqs[0])
		g.taken = 1
		g.dry = g.dry && len(g.seqs) < 2
	}
	return picks, nil
}

// claim leases the jobs of picks that are still available and keeps
// them in c.jobs in the order served.
func (c *flowClaim) claim(ctx context.Context, picks []int64) error {
	if len(picks) == 0 {
		return nil
	}
	rows, err := c.tx.Query(ctx, sqlClaimSeqs, picks, c.now, int64(c.lease), c.waitCutoff(), c.worker)
	if err != nil {
		return fmt.Errorf("lease jobs: %w", err)
	}
	jobs, seqs, err := scanJobs(rows)
	if err != nil {
		return fmt.Errorf("lease jobs: %w", err)
	}
	at := make(map[int64]int, len(picks))
	for i, seq := range picks {
		at[seq] = i
	}
	order := make([]int, len(jobs))
	for i := range jobs {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return at[seqs[a]] - at[seqs[b]] })
	c.jobs = make([]*job.Job, len(jobs))
	for i, k := range order {
		c.jobs[i] = jobs[k]
	}
	return nil
}

// record keeps the claim's starts: the last group served as the cursor of
// the round-robin, the queue's start log and those of the groups that
// started jobs. A claim that started nothing writes nothing.
func (c *flowClaim) record(ctx context.Context) error {
	if len(c.jobs) == 0 {
		return nil
	}
	l := c.q.limits
	byName := make(map[string]*flowGroup, len(c.groups))
	for _, g := range c.groups {
		byName[g.name] = g
	}
	for _, j := range c.jobs {
		if g := byName[j.Group]; g != nil {
			g.started++
		}
	}
	batch := &pgx.Batch{}
	var starts []byte
	if !l.Rate.IsZero() {
		c.q.starts = c.q.starts.Add(l.Rate, c.now, len(c.jobs))
		starts = encodeStarts(c.q.starts)
	}
	cursor := c.q.lastGroup
	if c.group == "" {
		cursor = &c.jobs[len(c.jobs)-1].Group
	}
	batch.Queue(sqlFlowCursor, c.queue, cursor, starts)
	if !l.GroupRate.IsZero() {
		var names []string
		var logs [][]byte
		for _, g := range c.groups {
			if g.started > 0 {
				g.log = g.log.Add(l.GroupRate, c.now, g.started)
				names, logs = append(names, g.name), append(logs, encodeStarts(g.log))
			}
		}
		batch.Queue(sqlGroupStarts, c.queue, names, logs, c.now.UnixNano())
	}
	if err := c.tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("record starts: %w", err)
	}
	c.heldByGroups()
	return nil
}

// heldByGroups counts in what held jobs back the groups that have jobs
// beyond the room their limits left them.
func (c *flowClaim) heldByGroups() {
	l := c.q.limits
	for _, g := range c.groups {
		if g.dry || g.room < 0 || g.taken < g.room {
			continue
		}
		if l.GroupMaxActive > 0 && g.active+g.started >= l.GroupMaxActive {
			c.capped = true
		}
		if r, next := g.log.Room(l.GroupRate, c.now); r == 0 {
			c.retryAt = earliest(c.retryAt, next)
		}
	}
}
