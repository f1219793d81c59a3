package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/claim"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// expirer kills the jobs past their maximum wait: those a claim met and,
// in the leader's sweep (JobExpireWaiting), those no claim meets.
type expirer struct {
	*db
	fin *finisher
}

const (
	// sqlPastWait finds up to $2 available jobs with deadlines up to $1,
	// in deadline order.
	sqlPastWait = `SELECT seq FROM spool_jobs WHERE wait_until <= $1::timestamptz AND state = 'available'
ORDER BY wait_until, seq LIMIT $2`
	// sqlPastWaitOf is sqlPastWait among the jobs of the queues $3.
	sqlPastWaitOf = `SELECT seq FROM spool_jobs WHERE wait_until <= $1::timestamptz AND state = 'available'
	AND queue = ANY($3::text[])
ORDER BY wait_until, seq LIMIT $2`
	// sqlNextWait is the earliest deadline after $1 of an available job.
	sqlNextWait = `SELECT min(wait_until) FROM spool_jobs WHERE wait_until > $1::timestamptz AND state = 'available'`
	// sqlLockPastWait locks the available jobs of the seqs $1 that no
	// other transaction holds, with what the rules and writes need.
	sqlLockPastWait = `SELECT j.seq, j.attempt, j.run_at, COALESCE(q.max_wait_ns, 0), COALESCE(q.dead_letter_queue, ''),
	j.dead_letter_of_id IS NOT NULL, j.errors
FROM spool_jobs j LEFT JOIN spool_queues q ON q.name = j.queue
WHERE j.seq = ANY($1) AND j.state = 'available'
ORDER BY j.seq
FOR UPDATE OF j SKIP LOCKED`
)

// maxKilledByClaim bounds how many jobs past their wait one claim kills.
const maxKilledByClaim = claim.MaxKills

// killMet kills, in a transaction of its own, the jobs of seqs that a
// plain claim at now met past their deadlines, and adds to res the
// dead-letter queues that got copies.
func (ex *expirer) killMet(ctx context.Context, seqs []int64, now time.Time, res *store.ClaimResult) error {
	var letters []string
	err := ex.tx(ctx, func(tx pgx.Tx) error {
		var err error
		_, letters, err = ex.expire(ctx, tx, seqs, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("expire jobs met by a claim: %w", err)
	}
	for _, q := range letters {
		res.Available = appendOnce(res.Available, q)
	}
	return nil
}

// expire kills in tx at now those of the jobs of seqs still available,
// not held by another transaction and past their wait (job.PastMaxWait),
// where attempt.PastWait sends them; one whose deadline the rule does not
// share gets the rule's. It returns how many it killed and the
// dead-letter queues that got copies.
func (ex *expirer) expire(ctx context.Context, tx pgx.Tx, seqs []int64, now time.Time) (int, []string, error) {
	if len(seqs) == 0 {
		return 0, nil, nil
	}
	rows, err := tx.Query(ctx, sqlLockPastWait, seqs)
	if err != nil {
		return 0, nil, fmt.Errorf("lock jobs past their wait: %w", err)
	}
	var (
		fixSeq       []int64
		fixAtt       []int32
		fixDeadlines []pgtype.Timestamptz
		deaths       []change
		seq, maxWait int64
		s            job.QueueSettings
		att          int32
		runAt        time.Time
		letter       bool
		errs         []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&seq, &att, &runAt, &maxWait, &s.DeadLetterQueue, &letter, &errs}, func() error {
		s.MaxWait = time.Duration(maxWait)
		if !job.PastMaxWait(int(att), runAt.UTC(), s.MaxWait, now) {
			fixSeq, fixAtt = append(fixSeq, seq), append(fixAtt, att)
			fixDeadlines = append(fixDeadlines, waitDeadline(int(att), runAt.UTC(), s.MaxWait))
			return nil
		}
		deaths = append(deaths, change{seq: seq, end: attempt.PastWait(int(att), letter, s, now), errors: slices.Clone(errs)})
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("lock jobs past their wait: %w", err)
	}
	if len(fixSeq) > 0 {
		if _, err := tx.Exec(ctx, sqlSetWaits, fixSeq, fixAtt, fixDeadlines); err != nil {
			return 0, nil, fmt.Errorf("write wait deadlines: %w", err)
		}
	}
	copies, err := ex.fin.apply(ctx, tx, deaths, now, false)
	if err != nil {
		return 0, nil, fmt.Errorf("expire jobs: %w", err)
	}
	var queues []string
	for _, c := range copies {
		queues = appendOnce(queues, c.Queue)
	}
	return len(deaths), queues, nil
}

// JobExpireWaiting kills the jobs past their queues' maximum waits that
// no claim met and reports the next deadline; see store.Maintainer.
func (ex *expirer) JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	now = micro(now)
	var res *store.MaintenanceResult
	err := ex.tx(ctx, func(tx pgx.Tx) error {
		res = &store.MaintenanceResult{}
		seqs, err := collect[int64](ctx, tx, sqlPastWait, now, limit)
		if err != nil {
			return fmt.Errorf("find jobs past their wait: %w", err)
		}
		if res.Count, res.Available, err = ex.expire(ctx, tx, seqs, now); err != nil {
			return err
		}
		return scanNullTime(tx.QueryRow(ctx, sqlNextWait, now), &res.Next)
	})
	if err != nil {
		return nil, wrap("expire waiting jobs", err)
	}
	return res, nil
}
