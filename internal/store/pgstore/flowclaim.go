package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/claim"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
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
	// sqlClaimSeqs leases the jobs of the seqs $1 that are still
	// available, up to $4, for worker $5; see claimTail. It finds them
	// by seq alone, then looks at the state of the rows it locked: a
	// state in the search would let the planner scan the claim index.
	sqlClaimSeqs = `WITH locked AS (
	SELECT ctid, state FROM spool_jobs WHERE seq = ANY($1::int8[]) FOR UPDATE
), picked AS (
	SELECT ctid FROM locked WHERE state = 'available' LIMIT $4::int4
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

// JobClaim leases up to p.Max available jobs; see store.Claimer. It
// claims the queues without flow control first, the plain way, in one
// statement (claimPlain), which passes over any that have flow control;
// when that comes out short, it looks which of them have flow control
// after all (lookForFlow), then claims the queues with flow control one
// after the other in the order named (claimFlow). A node remembers the
// queues it found with flow control and leaves them out of the plain
// claim from then on. A claim of one group (p.Group) takes the same
// steps with statements that read that group's jobs alone.
func (cl *claimer) JobClaim(ctx context.Context, p *store.JobClaimParams) (*store.ClaimResult, error) {
	if err := cl.check(); err != nil {
		return nil, wrap("claim jobs", err)
	}
	res := &store.ClaimResult{}
	if p.Max <= 0 || len(p.Queues) == 0 {
		return res, nil
	}
	queues := make([]string, 0, len(p.Queues))
	var plain []string
	for _, q := range p.Queues {
		if !slices.Contains(queues, q) {
			queues = append(queues, q)
			if !cl.isFlow(q) {
				plain = append(plain, q)
			}
		}
	}
	if len(plain) > 0 {
		jobs, err := cl.claimPlain(ctx, plain, p, p.Max, res)
		if err != nil {
			return nil, err
		}
		res.Jobs = jobs
		if len(jobs) < p.Max {
			if err := cl.lookForFlow(ctx, plain); err != nil {
				return nil, wrap("claim jobs", err)
			}
		}
	}
	for _, q := range queues {
		if len(res.Jobs) >= p.Max {
			break
		}
		if !cl.isFlow(q) {
			continue
		}
		if err := cl.claimFlow(ctx, q, p, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// claimFlow claims up to p.Max-len(res.Jobs) jobs of queue q, which this
// node believes to have flow control, into res, as the planner decides
// (internal/claim), and adds to res what held q's other available jobs
// back. A queue without flow control after all is forgotten and claimed
// the plain way.
func (cl *claimer) claimFlow(ctx context.Context, q string, p *store.JobClaimParams, res *store.ClaimResult) error {
	want := p.Max - len(res.Jobs)
	var c *flowClaim
	plain := false
	err := cl.tx(ctx, func(tx pgx.Tx) error {
		c = &flowClaim{tx: tx, queue: q, group: p.Group, runs: p.Runs, maxGroups: p.MaxGroups, now: micro(p.Now), want: want,
			lease: p.LeaseDuration, worker: p.Worker}
		found, err := c.lock(ctx)
		if err != nil {
			return err
		}
		plain = !found || !c.q.flow
		if plain || c.q.paused {
			return nil
		}
		return c.run(ctx, cl.expirer)
	})
	if err != nil {
		return wrap(fmt.Sprintf("claim jobs of queue %s", q), err)
	}
	if plain {
		cl.flowQueues.Delete(q)
		cl.plainSeen.Store(q, time.Now())
		jobs, err := cl.claimPlain(ctx, []string{q}, p, want, res)
		res.Jobs = append(res.Jobs, jobs...)
		return err
	}
	res.Jobs = append(res.Jobs, c.jobs...)
	for _, dlq := range c.letters {
		res.Available = appendOnce(res.Available, dlq)
	}
	res.RetryAt = earliest(res.RetryAt, c.out.RetryAt)
	if c.out.Capped && !slices.Contains(res.Capped, q) {
		res.Capped = append(res.Capped, q)
	}
	return nil
}

// flowClaim is one claim of a queue with flow control, in the transaction
// that holds the queue's row.
type flowClaim struct {
	tx    pgx.Tx
	queue string
	// group, when set, is the one group the claim takes jobs of.
	group string
	// runs and maxGroups are claim.Request's.
	runs      bool
	maxGroups int
	now       time.Time
	want      int
	lease     time.Duration
	worker    string // the claiming worker's name ("" for none)

	q      flowQueue
	active int        // the queue's active jobs, counted up to its cap
	jobs   []*job.Job // handed out, in the order they were served
	out    claim.Outcome
	// letters are the dead-letter queues that got copies of the jobs
	// the claim killed for their wait.
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

// run asks the planner what the claim does, writes it — the kills, the
// leases — and records what the planner settles: the cursor and the start
// logs.
func (c *flowClaim) run(ctx context.Context, x *expirer) error {
	src := newGroupSource(ctx, c.tx, c.queue, c.q.limits, c.q.maxWait, c.q.lastGroup, c.group)
	d, err := claim.Plan(claim.Queue{Limits: c.q.limits, MaxWait: c.q.maxWait, Active: c.active, Starts: c.q.starts},
		claim.Request{Now: c.now, Want: c.want, Group: c.group, Runs: c.runs, MaxGroups: c.maxGroups}, src)
	if err != nil {
		return err
	}
	if len(d.Kill) > 0 {
		seqs := make([]int64, len(d.Kill))
		for i, k := range d.Kill {
			seqs[i] = k.Seq
		}
		if _, c.letters, err = x.expire(ctx, c.tx, seqs, c.now); err != nil {
			return err
		}
	}
	leased, err := c.claim(ctx, d.Take)
	if err != nil {
		return err
	}
	c.out, err = d.Settle(leased, func() (bool, error) { return c.anyLeft(ctx) })
	if err != nil {
		return err
	}
	return c.record(ctx)
}

// anyLeft reports whether the queue (the group, for a claim of one group)
// has available jobs.
func (c *flowClaim) anyLeft(ctx context.Context) (bool, error) {
	query, args := sqlAnyAvailable, []any{c.queue}
	if c.group != "" {
		query, args = sqlGroupAvailable, []any{c.queue, c.group}
	}
	var left bool
	err := c.tx.QueryRow(ctx, query, args...).Scan(&left)
	return left, err
}

// claim leases the jobs of picks that are still available, keeps them in
// c.jobs in the order served and returns their seqs.
func (c *flowClaim) claim(ctx context.Context, picks []claim.Pick) ([]int64, error) {
	if len(picks) == 0 {
		return nil, nil
	}
	seqs := make([]int64, len(picks))
	at := make(map[int64]int, len(picks))
	for i, p := range picks {
		seqs[i], at[p.Seq] = p.Seq, i
	}
	rows, err := c.tx.Query(ctx, sqlClaimSeqs, seqs, c.now, int64(c.lease), len(seqs), c.worker)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	jobs, leased, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("lease jobs: %w", err)
	}
	order := make([]int, len(jobs))
	for i := range jobs {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return at[leased[a]] - at[leased[b]] })
	c.jobs = make([]*job.Job, len(jobs))
	for i, k := range order {
		c.jobs[i] = jobs[k]
	}
	return leased, nil
}

// record writes what the claim settled: the round-robin's cursor, the
// queue's start log and those of the groups that started jobs. A claim
// that changed none of them writes nothing.
func (c *flowClaim) record(ctx context.Context) error {
	o := c.out
	if !o.CursorMoved && !o.StartsChanged && len(o.GroupStarts) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if o.CursorMoved || o.StartsChanged {
		cursor := c.q.lastGroup
		if o.CursorMoved {
			cursor = &o.Cursor
		}
		batch.Queue(sqlFlowCursor, c.queue, cursor, encodeStarts(o.Starts))
	}
	if len(o.GroupStarts) > 0 {
		names, logs := make([]string, len(o.GroupStarts)), make([][]byte, len(o.GroupStarts))
		for i, g := range o.GroupStarts {
			names[i], logs[i] = g.Group, encodeStarts(g.Starts)
		}
		batch.Queue(sqlGroupStarts, c.queue, names, logs, c.now.UnixNano())
	}
	if err := c.tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("record starts: %w", err)
	}
	return nil
}
