package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/spoolq/spool/internal/job"
)

// Each job that waits unstarted carries its wait deadline, wait_until
// (job.WaitDeadline), computed in Go wherever such a job is written and
// rewritten for a queue's pending jobs when its maximum wait changes; a
// claim passes over the jobs whose deadline has come, and the kills leave
// the decision to job.PastMaxWait. A change of a maximum wait holds the
// queue's flow lock exclusively; every writer of a waiting job holds it
// shared and reads the wait after it, except an insert, which writes the
// deadlines of what the node believes (waitSet) and checks that belief in
// its statement, writing them again where it was wrong (fixWaits).

const (
	// sqlWaitQueues lists the queues with a maximum wait.
	sqlWaitQueues = `SELECT name, max_wait_ns FROM spool_queues WHERE max_wait_ns > 0`
	// sqlMaxWaits reads the maximum waits of those of the queues $1 that
	// have one.
	sqlMaxWaits = `SELECT name, max_wait_ns FROM spool_queues WHERE name = ANY($1::text[]) AND max_wait_ns > 0`
	// waitMismatch selects those of the queues $22, believed to have the
	// maximum waits $25, whose row says otherwise, with the row's wait.
	waitMismatch = `SELECT b.name, q.max_wait_ns FROM unnest($22::text[], $25::int8[]) AS b(name, wait)
	JOIN spool_queues q ON q.name = b.name WHERE q.max_wait_ns <> b.wait`
	// sqlQueueWaiting reads up to $3 pending jobs of queue $1 after seq
	// $2, in seq order, with their deadlines.
	sqlQueueWaiting = `SELECT seq, attempt, run_at, wait_until FROM spool_jobs WHERE queue = $1 AND seq > $2 ORDER BY seq LIMIT $3`
	// sqlSetWaits writes the deadlines $3 of the jobs of the seqs $1 whose
	// attempt counts are still $2, so not of a job handed out since.
	sqlSetWaits = `UPDATE spool_jobs j SET wait_until = u.wait_until
FROM unnest($1::int8[], $2::int4[], $3::timestamptz[]) AS u(seq, attempt, wait_until)
WHERE j.seq = u.seq AND j.attempt = u.attempt`
	// sqlFixWaits writes the deadlines $2 of the jobs of the ids $1.
	sqlFixWaits = `UPDATE spool_jobs j SET wait_until = u.wait_until
FROM unnest($1::text[], $2::timestamptz[]) AS u(id, wait_until) WHERE j.id = u.id`
)

// waitDeadline is the stored form of job.WaitDeadline: NULL for none.
func waitDeadline(attempt int, runAt time.Time, maxWait time.Duration) pgtype.Timestamptz {
	return tstz(job.WaitDeadline(attempt, runAt, maxWait))
}

// readWaits runs query, which reads queues with their maximum waits.
func readWaits(ctx context.Context, q querier, query string, args ...any) (map[string]time.Duration, error) {
	return collectWaits(q.Query(ctx, query, args...))
}

// collectWaits reads rows of queues with their maximum waits, unless err.
func collectWaits(rows pgx.Rows, err error) (map[string]time.Duration, error) {
	m := make(map[string]time.Duration)
	var name string
	var wait int64
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&name, &wait}, func() error {
			m[name] = time.Duration(wait)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("read maximum waits: %w", err)
	}
	return m, nil
}

// lockWaits adds to batch the statements that take the flow locks of
// queues shared and read their maximum waits, which then hold until the
// transaction ends, into waits.
func lockWaits(batch *pgx.Batch, queues []string, waits *map[string]time.Duration) {
	batch.Queue(sqlLockFlowShared, queues, lockClass)
	batch.Queue(sqlMaxWaits, queues).Query(func(rows pgx.Rows) (err error) {
		*waits, err = collectWaits(rows, nil)
		return err
	})
}

// setQueueWaits gives the pending jobs of queue the deadlines of the
// maximum wait maxWait (job.RewriteWaits), in tx, which holds the queue's
// flow lock exclusively.
func setQueueWaits(ctx context.Context, tx pgx.Tx, queue string, maxWait time.Duration) error {
	read := func(after int64, n int) ([]job.WaitRow, error) {
		rows, err := tx.Query(ctx, sqlQueueWaiting, queue, after, n)
		if err != nil {
			return nil, fmt.Errorf("read the jobs of %s: %w", queue, err)
		}
		var out []job.WaitRow
		var (
			r       job.WaitRow
			attempt int32
			stored  *time.Time
		)
		if _, err := pgx.ForEachRow(rows, []any{&r.Seq, &attempt, &r.RunAt, &stored}, func() error {
			r.Attempt, r.RunAt, r.Deadline = int(attempt), r.RunAt.UTC(), utc(stored)
			out = append(out, r)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("read the jobs of %s: %w", queue, err)
		}
		return out, nil
	}
	write := func(changed []job.WaitRow) error {
		seqs, attempts, deadlines := make([]int64, len(changed)), make([]int32, len(changed)), make([]pgtype.Timestamptz, len(changed))
		for i, r := range changed {
			seqs[i], attempts[i], deadlines[i] = r.Seq, int32(r.Attempt), tstz(r.Deadline)
		}
		if _, err := tx.Exec(ctx, sqlSetWaits, seqs, attempts, deadlines); err != nil {
			return fmt.Errorf("write the wait deadlines of %s: %w", queue, err)
		}
		return nil
	}
	return job.RewriteWaits(maxWait, read, write)
}

// backfillWaits gives the jobs waiting when wait_until came their
// deadlines.
func backfillWaits(ctx context.Context, tx pgx.Tx) error {
	waits, err := readWaits(ctx, tx, sqlWaitQueues)
	if err != nil {
		return err
	}
	for queue, wait := range waits {
		if err := setQueueWaits(ctx, tx, queue, wait); err != nil {
			return err
		}
	}
	return nil
}

// believedWaits are the maximum waits this node believes queues to have,
// as waitMismatch takes them.
func believedWaits(queues []string, waits map[string]time.Duration) []int64 {
	out := make([]int64, len(queues))
	for i, q := range queues {
		out[i] = int64(waits[q])
	}
	return out
}

// fixWaits writes in tx the deadlines of the jobs of ids (of queues, with
// runAts) that tx inserted, in queues with the maximum waits actual.
func fixWaits(ctx context.Context, tx pgx.Tx, ids, queues []string, runAts []time.Time, actual map[string]time.Duration,
	inserted func(id string) bool) error {
	var fix []string
	var deadlines []pgtype.Timestamptz
	for i, id := range ids {
		if wait, ok := actual[queues[i]]; ok && inserted(id) {
			fix, deadlines = append(fix, id), append(deadlines, waitDeadline(0, runAts[i], wait))
		}
	}
	if len(fix) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlFixWaits, fix, deadlines); err != nil {
		return fmt.Errorf("write wait deadlines: %w", err)
	}
	return nil
}
