package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// claimer hands jobs out: the queues without flow control with one
// statement, the others as the planner decides (flowclaim.go).
type claimer struct {
	*db
	*beliefs
	expirer *expirer
}

// claimTail leases the rows of picked, found by ctid (locked rows cannot
// move; the array form is a TID scan whatever the planner thinks of the
// size of picked, never a scan of the table): it moves them to active,
// counts the attempt, gives each a token from the one sequence of every
// hand-out, records the claiming worker, starts a lease row for each, and
// returns them in claim order. A job handed out has no wait deadline
// (see waits.go). $2 is now, $3 the lease override in nanoseconds (zero:
// each job's own) and $5 the worker's name (empty for none, kept as
// NULL).
const claimTail = `, leased AS (
	UPDATE spool_jobs j SET state = 'active', attempt = j.attempt + 1, lease_token = nextval('spool_lease_tokens'),
		started_at = $2::timestamptz, progress = NULL, worker = NULLIF($5::text, ''), wait_until = NULL
	WHERE j.ctid = ANY(ARRAY(SELECT ctid FROM picked))
	RETURNING ` + hotColumns + `,
		$2::timestamptz + ((CASE WHEN $3::int8 > 0 THEN $3::int8 ELSE j.lease_ns END) / 1000) * interval '1 microsecond' AS expires_at
), lease AS (
	INSERT INTO spool_leases (seq, expires_at) SELECT seq, expires_at FROM leased
)
SELECT ` + leasedColumns + `, leased.expires_at FROM leased
ORDER BY leased.priority DESC, leased.run_at, leased.seq`

var (
	// sqlClaimOne claims from one queue: the claim index hands out rows in
	// claim order and SKIP LOCKED passes over rows other claimers hold. A
	// paused queue, or one with flow control (claimFlow's), gives nothing;
	// jobs whose wait deadline has come are passed over (waitOK).
	sqlClaimOne = claimOne(`queue = $1`)
	// sqlClaimOneGroup is sqlClaimOne for the jobs of group $6 alone, read
	// from the group claim index. A queue without flow control holds jobs
	// with a group only when they were imported so (import.go).
	sqlClaimOneGroup = claimOne(`queue = $1 COLLATE "C" AND grp IS NOT NULL AND grp = $6 COLLATE "C"`)
	// sqlClaimMany claims across queues: it takes the head of each
	// unpaused queue without flow control from the claim index, passing
	// over the jobs whose wait deadline has come, merges them in claim
	// order, and locks the first $4 that no other claimer holds, looking
	// at the deadline again for each row it locks.
	sqlClaimMany = claimMany(`queue = q.name`)
	// sqlClaimManyGroup is sqlClaimMany for the jobs of group $6 alone.
	sqlClaimManyGroup = claimMany(`queue = q.name COLLATE "C" AND grp IS NOT NULL AND grp = $6 COLLATE "C"`)
)

// claimOne is the claim from one queue of the jobs that jobs selects.
func claimOne(jobs string) string {
	return `WITH picked AS (
	SELECT ctid FROM spool_jobs j
	WHERE state = 'available' AND ` + jobs + `
		AND NOT EXISTS (SELECT 1 FROM spool_queues WHERE name = $1 AND (paused OR flow)) AND ` + waitOK + `
	ORDER BY priority DESC, run_at, seq
	LIMIT $4::int4
	FOR UPDATE SKIP LOCKED
)` + claimTail
}

// claimMany is the claim across queues q.name of the jobs that jobs
// selects.
func claimMany(jobs string) string {
	return `WITH cand AS (
	SELECT h.seq FROM unnest($1::text[]) AS q(name)
	LEFT JOIN spool_queues p ON p.name = q.name
	CROSS JOIN LATERAL (
		SELECT seq, priority, run_at FROM spool_jobs j
		WHERE state = 'available' AND ` + jobs + ` AND ` + waitOK + `
		ORDER BY priority DESC, run_at, seq LIMIT $4::int4) h
	WHERE NOT COALESCE(p.paused OR p.flow, false)
	ORDER BY h.priority DESC, h.run_at, h.seq LIMIT $4::int4
), picked AS (
	SELECT ctid FROM spool_jobs j
	WHERE seq IN (SELECT seq FROM cand) AND state = 'available' AND ` + waitOK + `
	ORDER BY priority DESC, run_at, seq
	FOR UPDATE SKIP LOCKED
)` + claimTail
}

// maxClaimRounds bounds how often one claim tries again for jobs that
// other claimers held when it looked.
const maxClaimRounds = 3

// waitOK is true for a job of alias j whose wait deadline (waits.go) has
// not come at $2.
const waitOK = `(j.wait_until IS NULL OR j.wait_until > $2::timestamptz)`

// claimPlain claims up to max jobs from queues, in claim order across
// them, passing over the queues with flow control and the jobs whose wait
// deadline has come. When the queues it knows to have a maximum wait hold
// jobs past their deadline, it kills them once it has claimed (killMet),
// adding the dead-letter queues that got copies to res.
//
// With p.Group it claims the jobs of that group alone.
func (cl *claimer) claimPlain(ctx context.Context, queues []string, p *store.JobClaimParams, max int, res *store.ClaimResult) ([]*job.Job, error) {
	now := micro(p.Now)
	// The claim's arguments; args[3] is how many jobs it asks for.
	query, args := sqlClaimOne, []any{queues[0], now, int64(p.LeaseDuration), max, p.Worker}
	if len(queues) > 1 {
		query, args[0] = sqlClaimMany, queues
	}
	if p.Group != "" {
		query = sqlClaimOneGroup
		if len(queues) > 1 {
			query = sqlClaimManyGroup
		}
		args = append(args, p.Group)
	}
	waits, err := cl.waiting(ctx, cl.pool)
	if err != nil {
		return nil, wrap("claim jobs", err)
	}
	var waiting []string
	for _, q := range queues {
		if waits[q] > 0 {
			waiting = append(waiting, q)
		}
	}
	var out []*job.Job
	var met []int64
	for round := 0; round < maxClaimRounds && len(out) < max; round++ {
		args[3] = max - len(out)
		batch := &pgx.Batch{}
		if round == 0 && len(waiting) > 0 {
			batch.Queue(sqlPastWaitOf, now, maxKilledByClaim, waiting).Query(func(rows pgx.Rows) (err error) {
				met, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
		}
		var jobs []*job.Job
		batch.Queue(query, args...).Query(func(rows pgx.Rows) (err error) {
			jobs, _, err = scanJobs(rows)
			return err
		})
		if err := cl.pool.SendBatch(ctx, batch).Close(); err != nil {
			return out, wrap("claim jobs", err)
		}
		out = append(out, jobs...)
		// A multi-queue claim looked at a fixed set of candidates; when
		// others held some of them, look again. One queue's claim skips
		// held rows as it scans, so a short answer means it ran dry.
		if len(jobs) == 0 || len(queues) == 1 {
			break
		}
	}
	if len(met) > 0 {
		// The claimed jobs are leased already: a failure here leaves the
		// jobs it met to the sweep rather than losing those.
		if err := cl.expirer.killMet(ctx, met, now, res); err != nil {
			cl.logger.Warn("pgstore: jobs past their wait left to the sweep", "err", err)
		}
	}
	return out, nil
}
