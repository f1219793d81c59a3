package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/claim"
	"github.com/spoolq/spool/internal/job"
)

// The candidates of a flow claim on PostgreSQL: the groups of the queue
// with available jobs, walked down the group claim index from the
// round-robin's cursor, and their first jobs in claim order. What they
// mean is the planner's (internal/claim); these statements only find
// them.
const (
	// sqlGroupWalk finds up to $4 groups of queue $1 with available jobs,
	// in byte order from $2 (past it when $3) and then, when $7, from the
	// first group on up to $2 (wrapped round, part 1), as found(grp, part).
	// It skips from group to group down the group claim index (a loose
	// index scan), so a claim reads one index entry per group, not every
	// available job, and goes round the whole cycle in one round trip.
	// The groups found go back to the default collation, the one of the
	// held index and of spool_group_starts: compared in "C", a group could
	// not be looked up in them, and each count would scan the queue's
	// active jobs.
	sqlGroupWalk = `WITH RECURSIVE g(grp) AS (
	(SELECT grp COLLATE "C" FROM spool_jobs
	WHERE queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL AND grp >= $2 COLLATE "C"
	ORDER BY grp COLLATE "C" LIMIT 1)
	UNION ALL
	SELECT (SELECT j.grp COLLATE "C" FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp COLLATE "C" > g.grp
		ORDER BY j.grp COLLATE "C" LIMIT 1)
	FROM g WHERE g.grp IS NOT NULL
), w(grp) AS (
	(SELECT grp COLLATE "C" FROM spool_jobs
	WHERE $7 AND queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL
	ORDER BY grp COLLATE "C" LIMIT 1)
	UNION ALL
	SELECT (SELECT j.grp COLLATE "C" FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp COLLATE "C" > w.grp
		ORDER BY j.grp COLLATE "C" LIMIT 1)
	FROM w WHERE w.grp IS NOT NULL AND w.grp < $2 COLLATE "C"
), found AS (
	SELECT grp COLLATE "default" AS grp, part FROM (
		SELECT grp, 0 AS part FROM g WHERE grp IS NOT NULL AND NOT ($3 AND grp = $2)
		UNION ALL
		SELECT grp, 1 FROM w WHERE grp IS NOT NULL AND grp <= $2 COLLATE "C") u
	LIMIT $4
)
`
	// sqlGroupOne is sqlGroupWalk for group $2 alone, read with one seek
	// into the group claim index: found holds it when it has available
	// jobs. It takes the walk's parameters, so that the same statements
	// follow it: it finds nothing past $2 ($3) or when asked for none
	// ($4 = 0), and never wraps round ($7).
	sqlGroupOne = `WITH found AS (
	SELECT $2::text AS grp, 0 AS part WHERE NOT $3::bool AND $4::int4 > 0 AND $7::bool IS NOT NULL AND EXISTS (SELECT 1 FROM spool_jobs
		WHERE queue = $1 COLLATE "C" AND state = 'available' AND grp IS NOT NULL AND grp = $2 COLLATE "C")
)
`
	// groupsTail reads, for each group found, its active jobs counted up
	// to $5 and, when $6, its start log.
	groupsTail = `SELECT f.grp,
	(SELECT count(*) FROM (SELECT 1 FROM spool_jobs a
		WHERE a.queue = $1 AND a.state = 'active' AND a.grp IS NOT NULL AND a.grp = f.grp LIMIT $5) x),
	s.starts, f.part
FROM found f LEFT JOIN spool_group_starts s ON $6 AND s.queue = $1 AND s.grp = f.grp
ORDER BY f.part, f.grp COLLATE "C"`
	// sqlHeldSeek, completed by a state, reads the first job of group
	// f.grp of queue $1 in that state that was handed out, with a seek
	// into the held index. Each waiting state has a seek of its own: with
	// the states in one list, the planner may scan the whole queue in the
	// index for the group instead.
	sqlHeldSeek = `SELECT j.seq, j.state, j.attempt FROM spool_jobs j
		WHERE j.queue = $1 AND j.grp IS NOT NULL AND j.grp = f.grp AND j.attempt > 0 AND j.state = `
	// orderedGroupsTail reads, for each group found in an ordered queue,
	// what groupsTail does and, when it has no active job, the first of
	// its jobs that were handed out and wait (the candidate holder, which
	// job.HoldsGroup judges; an active one is counted already), and, when
	// that one is none or available, its first two available jobs in
	// claim order with what job.PastMaxWait needs. A group with an active
	// job costs one seek; a free one three more into the held index and
	// one into the group claim index.
	orderedGroupsTail = `SELECT f.grp, a.n, s.starts, f.part, h.seq, h.state, h.attempt, h.holders, d.seqs, d.attempts, d.run_ats
` + orderedFound + `LEFT JOIN LATERAL (SELECT array_agg(j.seq ORDER BY j.priority DESC, j.run_at, j.seq) AS seqs,
		array_agg(j.attempt ORDER BY j.priority DESC, j.run_at, j.seq) AS attempts,
		array_agg(j.run_at ORDER BY j.priority DESC, j.run_at, j.seq) AS run_ats
	FROM (SELECT j.seq, j.priority, j.attempt, j.run_at FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp = f.grp COLLATE "C"
		ORDER BY j.priority DESC, j.run_at, j.seq LIMIT 2) j
	WHERE ` + headsWanted + `) d ON true
` + orderedEnd
	// orderedGroupsTailNoWait is orderedGroupsTail for a queue without a
	// maximum wait, whose heads need no attempts nor run times: it reads
	// the first two available jobs' seqs alone, with one seek and no
	// sorting, and leaves the other two arrays NULL.
	orderedGroupsTailNoWait = `SELECT f.grp, a.n, s.starts, f.part, h.seq, h.state, h.attempt, h.holders,
	CASE WHEN ` + headsWanted + ` THEN ARRAY(
		SELECT j.seq FROM spool_jobs j
		WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp = f.grp COLLATE "C"
		ORDER BY j.priority DESC, j.run_at, j.seq LIMIT 2) END,
	NULL::int4[], NULL::timestamptz[]
` + orderedFound + orderedEnd
	// orderedFound joins each group found to its active jobs counted up
	// to $5 (a) and, when it has none, its candidate holder (h) with how
	// many candidates it has, counted up to 2 a state.
	orderedFound = `FROM found f
CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM spool_jobs a
	WHERE a.queue = $1 AND a.state = 'active' AND a.grp IS NOT NULL AND a.grp = f.grp LIMIT $5) x) a
LEFT JOIN LATERAL (SELECT w.seq, w.state, w.attempt, count(*) OVER () AS holders FROM (
	(` + sqlHeldSeek + `'available' ORDER BY j.seq LIMIT 2)
	UNION ALL (` + sqlHeldSeek + `'retrying' ORDER BY j.seq LIMIT 2)
	UNION ALL (` + sqlHeldSeek + `'scheduled' ORDER BY j.seq LIMIT 2)) w
	WHERE a.n = 0 ORDER BY w.seq LIMIT 1) h ON true
`
	// headsWanted holds for a group whose first available jobs the plan
	// may hand out: none active, and no holder that waits.
	headsWanted = `a.n = 0 AND (h.seq IS NULL OR h.state = 'available')`
	// orderedEnd adds each group's start log, when $6, and orders the
	// groups as the walk found them.
	orderedEnd = `LEFT JOIN spool_group_starts s ON $6 AND s.queue = $1 AND s.grp = f.grp
ORDER BY f.part, f.grp COLLATE "C"`
	// sqlGroupHeads reads, for each group of $2, up to $3 of its
	// available jobs in claim order after the first $4, from the group
	// claim index, each with what job.PastMaxWait needs.
	sqlGroupHeads = `SELECT g.ord, h.seq, h.attempt, h.run_at FROM unnest($2::text[], $3::int4[], $4::int4[]) WITH ORDINALITY AS g(grp, n, skip, ord)
CROSS JOIN LATERAL (
	SELECT j.seq, j.priority, j.run_at, j.attempt FROM spool_jobs j
	WHERE j.queue = $1 COLLATE "C" AND j.state = 'available' AND j.grp IS NOT NULL AND j.grp = g.grp COLLATE "C"
	ORDER BY j.priority DESC, j.run_at, j.seq LIMIT g.n OFFSET g.skip) h
ORDER BY g.ord, h.priority DESC, h.run_at, h.seq`
)

// groupSource offers the planner the candidates of one flow claim, in the
// transaction that holds the queue's row: the groups in byte order from
// the one after the cursor, going round once, and their jobs.
type groupSource struct {
	ctx    context.Context
	tx     pgx.Tx
	queue  string
	limits job.Limits
	// The walk: from group from (past it when past), wrapped once it
	// went back to the first group; done once it came round.
	from          string
	past, wrapped bool
	done          bool
	query         string
	seen          map[string]bool
	// names are the groups walked, by their claim.Group.Ref, and read how
	// many available jobs of each were read.
	names []string
	read  []int
}

// newGroupSource starts the walk after the cursor last (nil: from the
// first group); a claim of one group walks that group alone.
func newGroupSource(ctx context.Context, tx pgx.Tx, queue string, l job.Limits, maxWait time.Duration, last *string, group string) *groupSource {
	s := &groupSource{ctx: ctx, tx: tx, queue: queue, limits: l, seen: map[string]bool{}}
	s.wrapped = last == nil
	if last != nil {
		s.from, s.past = *last, true
	}
	ordered := orderedGroupsTail
	if job.WaitDeadline(0, time.Time{}, maxWait).IsZero() {
		// No job of the queue waits against a deadline (job.WaitDeadline):
		// the plan needs no head's attempts nor run time.
		ordered = orderedGroupsTailNoWait
	}
	s.query = sqlGroupWalk + groupsTail
	switch {
	case group != "" && l.Ordered:
		s.query = sqlGroupOne + ordered
	case group != "":
		s.query = sqlGroupOne + groupsTail
	case l.Ordered:
		s.query = sqlGroupWalk + ordered
	}
	if group != "" {
		s.from, s.past, s.wrapped = group, false, true
	}
	return s
}

// Groups returns the next groups in walk order, reading on only while
// it has fewer than need; see claim.Source.
func (s *groupSource) Groups(need, more int) ([]claim.Group, error) {
	n := need + more
	var out []claim.Group
	for len(out) < need && !s.done {
		chunk := n - len(out)
		found, wrapped, err := s.walk(chunk)
		if err != nil {
			return nil, err
		}
		for _, g := range found {
			if s.seen[g.Name] {
				s.done = true // round the whole cycle
				break
			}
			s.seen[g.Name] = true
			out = append(out, g)
		}
		switch {
		case s.done:
		case len(found) == chunk:
			s.from, s.past, s.wrapped = found[len(found)-1].Name, true, s.wrapped || wrapped
		default:
			// Fewer than asked for: the walk reached the end and, unless
			// it had wrapped round before, went on from the first group.
			s.done = true
		}
	}
	return out, nil
}

// walk reads the next n groups of the walk, with what the planner needs
// of each, going on from the first group once past the last unless the
// walk wrapped round before; wrapped reports whether the last group read
// is one of those.
func (s *groupSource) walk(n int) (found []claim.Group, wrapped bool, err error) {
	l := s.limits
	rows, err := s.tx.Query(s.ctx, s.query, s.queue, s.from, s.past, n, l.GroupMaxActive, !l.GroupRate.IsZero(), !s.wrapped)
	if err != nil {
		return nil, false, fmt.Errorf("find groups: %w", err)
	}
	var (
		name          string
		active        int64
		starts        []byte
		holderSeq     *int64
		holderState   *string
		holderAttempt *int32
		holders       *int64
		seqs          []int64
		attempts      []int32
		runAts        []time.Time
		part          int32
	)
	scan := []any{&name, &active, &starts, &part}
	if l.Ordered {
		scan = append(scan, &holderSeq, &holderState, &holderAttempt, &holders, &seqs, &attempts, &runAts)
	}
	_, err = pgx.ForEachRow(rows, scan, func() error {
		log, err := decodeStarts(starts, l.GroupRate.Limit)
		if err != nil {
			return fmt.Errorf("read the start log of group %q: %w", name, err)
		}
		g := claim.Group{Name: name, Ref: len(s.names), Active: int(active), Starts: log}
		read := 0
		if holderSeq != nil && job.HoldsGroup(job.State(*holderState), int(*holderAttempt)) {
			g.Holder = job.State(*holderState)
			g.Held = claim.Head{Seq: *holderSeq, Attempt: int(*holderAttempt)}
			g.OneHolder = holders != nil && *holders == 1
		}
		if l.Ordered && active == 0 && (g.Holder == "" || g.Holder == job.StateAvailable) {
			for i := range seqs {
				h := claim.Head{Seq: seqs[i]}
				if i < len(attempts) && i < len(runAts) {
					h.Attempt, h.RunAt = int(attempts[i]), runAts[i].UTC()
				}
				g.Heads = append(g.Heads, h)
			}
			g.Dry = len(seqs) < 2
			read = len(seqs)
		}
		s.names, s.read = append(s.names, name), append(s.read, read)
		found = append(found, g)
		wrapped = part == 1
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("find groups: %w", err)
	}
	return found, wrapped, nil
}

// Heads reads the next jobs of groups in claim order; see claim.Source.
func (s *groupSource) Heads(refs []int, n []int) ([][]claim.Head, error) {
	names := make([]string, len(refs))
	asks, skips := make([]int32, len(refs)), make([]int32, len(refs))
	for i, ref := range refs {
		names[i], asks[i], skips[i] = s.names[ref], int32(n[i]), int32(s.read[ref])
	}
	rows, err := s.tx.Query(s.ctx, sqlGroupHeads, s.queue, names, asks, skips)
	if err != nil {
		return nil, fmt.Errorf("read the jobs of groups: %w", err)
	}
	out := make([][]claim.Head, len(names))
	var (
		ord, seq int64
		attempt  int32
		runAt    time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &seq, &attempt, &runAt}, func() error {
		out[ord-1] = append(out[ord-1], claim.Head{Seq: seq, Attempt: int(attempt), RunAt: runAt.UTC()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the jobs of groups: %w", err)
	}
	for i, ref := range refs {
		s.read[ref] += len(out[i])
	}
	return out, nil
}
