package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Maximum waits on PostgreSQL. Every claim statement leaves out the jobs
// past their queue's maximum wait (job.PastMaxWait, written in SQL as
// waitOK), whatever a node believes of the queue, so no node hands one
// out. A claim that meets them also kills them: the flow claim in its
// transaction (flowclaim.go); the plain claim, for the queues a node
// knows to have a maximum wait, reads in the same round trip the jobs
// past their wait at the head of those queues, and kills them in a
// transaction of its own once it has claimed (expire). The leader's
// sweep (JobExpireWaiting) kills the ones no claim meets. A node reads
// which queues have a maximum wait at most every waitRecheck, and at
// once after it set one itself.

const (
	// waitOK is true for a job of alias j that may still start at $2 in
	// a queue whose maximum wait, in nanoseconds, is %s (0 for none):
	// the negation of job.PastMaxWait.
	waitOK = `(%[1]s <= 0 OR j.attempt > 0 OR j.run_at > $2::timestamptz - (%[1]s / 1000) * interval '1 microsecond')`
	// sqlWaitQueues lists the queues with a maximum wait.
	sqlWaitQueues = `SELECT name FROM spool_queues WHERE max_wait_ns > 0`
	// sqlLockPastWait locks the available jobs of the seqs $1 whose queues
	// have a maximum wait, passing over those another transaction holds,
	// with what the rules need to know and their errors.
	sqlLockPastWait = `SELECT j.seq, j.queue, j.attempt, j.run_at, q.max_wait_ns, COALESCE(q.dead_letter_queue, ''),
	j.dead_letter_of_id IS NOT NULL, j.errors
FROM spool_jobs j JOIN spool_queues q ON q.name = j.queue
WHERE j.seq = ANY($1) AND j.state = 'available' AND q.max_wait_ns > 0
ORDER BY j.seq
FOR UPDATE OF j SKIP LOCKED`
	// sqlSweepPastWait finds up to $2 jobs past their queue's maximum
	// wait at $1, up to $2 of each queue with one. It reads a queue's
	// claim index with the run time as a filter: a queue with a maximum
	// wait holds no more unstarted jobs than come due within it, besides
	// those past it.
	sqlSweepPastWait = `SELECT w.seq FROM spool_queues q
CROSS JOIN LATERAL (
	SELECT seq FROM spool_jobs
	WHERE queue = q.name AND state = 'available' AND attempt = 0
		AND run_at <= $1::timestamptz - (q.max_wait_ns / 1000) * interval '1 microsecond'
	LIMIT $2::int4) w
WHERE q.max_wait_ns > 0
LIMIT $2::int4`
)

var (
	// sqlPastWaitAtHead reads, among the first $3 available jobs of each
	// queue of $1 that has a maximum wait and is claimed the plain way,
	// those past their wait at $2.
	sqlPastWaitAtHead = pastWaitAtHead(`queue = n.name`)
	// sqlPastWaitAtHeadGroup is sqlPastWaitAtHead among the jobs of group
	// $4 alone, read from the group claim index.
	sqlPastWaitAtHeadGroup = pastWaitAtHead(`queue = n.name COLLATE "C" AND grp IS NOT NULL AND grp = $4 COLLATE "C"`)
)

// pastWaitAtHead is sqlPastWaitAtHead among the jobs of queue n.name
// that jobs selects.
func pastWaitAtHead(jobs string) string {
	return `SELECT h.seq FROM unnest($1::text[]) AS n(name)
JOIN spool_queues s ON s.name = n.name AND s.max_wait_ns > 0 AND NOT s.paused AND NOT s.flow
CROSS JOIN LATERAL (
	SELECT seq, attempt, run_at FROM spool_jobs
	WHERE state = 'available' AND ` + jobs + `
	ORDER BY priority DESC, run_at, seq LIMIT $3::int4) h
WHERE h.attempt = 0 AND h.run_at <= $2::timestamptz - (s.max_wait_ns / 1000) * interval '1 microsecond'`
}

// waitRecheck is how long a node trusts what it read of which queues
// have a maximum wait; a queue given one on another node is met by this
// node's claims from then on (its jobs past the wait are left out by
// every claim all the same).
const waitRecheck = time.Second

// waitSet is what a node knows of the queues with a maximum wait.
type waitSet struct {
	mu      sync.Mutex // held by the one refresh at a time
	queues  atomic.Pointer[map[string]bool]
	checked atomic.Int64 // Unix nanoseconds of the last read; 0: read again
}

// waiting returns the queues this node knows to have a maximum wait,
// reading them again when what it read is older than waitRecheck.
func (s *Store) waiting(ctx context.Context) (map[string]bool, error) {
	w := &s.waits
	fresh := func() bool { return time.Since(time.Unix(0, w.checked.Load())) < waitRecheck }
	if m := w.queues.Load(); m != nil && fresh() {
		return *m, nil
	}
	if !w.mu.TryLock() {
		if m := w.queues.Load(); m != nil {
			return *m, nil // another claim is reading them
		}
		w.mu.Lock()
	}
	defer w.mu.Unlock()
	if m := w.queues.Load(); m != nil && fresh() {
		return *m, nil
	}
	started := time.Now()
	rows, err := s.pool.Query(ctx, sqlWaitQueues)
	if err != nil {
		return nil, fmt.Errorf("read the queues with a maximum wait: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the queues with a maximum wait: %w", err)
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	w.queues.Store(&m)
	w.checked.Store(started.UnixNano())
	return m, nil
}

// forgetWaits makes the next claim read the queues with a maximum wait
// again.
func (s *Store) forgetWaits() { s.waits.checked.Store(0) }

// expire kills in tx at now the jobs of seqs that are still available
// and past their queue's maximum wait, where job.AfterMaxWait sends
// them, with their dead-letter copies. Jobs another transaction holds
// are passed over. It returns how many it killed and the dead-letter
// queues that got copies.
func (s *Store) expire(ctx context.Context, tx pgx.Tx, seqs []int64, now time.Time) (int, []string, error) {
	if len(seqs) == 0 {
		return 0, nil, nil
	}
	rows, err := tx.Query(ctx, sqlLockPastWait, seqs)
	if err != nil {
		return 0, nil, fmt.Errorf("lock jobs past their wait: %w", err)
	}
	var (
		fSeq              []int64
		fState, fErr      []string
		fAtt              []int32
		letters           map[int64]string
		seq, maxWait      int64
		queue, deadLetter string
		attempt           int32
		runAt             time.Time
		letter            bool
		errs              []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&seq, &queue, &attempt, &runAt, &maxWait, &deadLetter, &letter, &errs}, func() error {
		if !job.PastMaxWait(int(attempt), runAt.UTC(), time.Duration(maxWait), now) {
			return nil
		}
		state, e := job.AfterMaxWait(int(attempt), now)
		msg, err := appendError(errs, e)
		if err != nil {
			return err
		}
		fSeq, fState, fAtt, fErr = append(fSeq, seq), append(fState, string(state)), append(fAtt, attempt), append(fErr, msg)
		settings := job.QueueSettings{DeadLetterQueue: deadLetter, MaxWait: time.Duration(maxWait)}
		if dlq := settings.DeadLetterFor(state, letter); dlq != "" {
			if letters == nil {
				letters = make(map[int64]string)
			}
			letters[seq] = dlq
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("lock jobs past their wait: %w", err)
	}
	if len(fSeq) == 0 {
		return 0, nil, nil
	}
	if _, err := tx.Exec(ctx, sqlFinish, fSeq, fState, fAtt, fErr, now); err != nil {
		return 0, nil, fmt.Errorf("expire jobs: %w", err)
	}
	copies, err := s.deadLetter(ctx, tx, letters, now)
	if err != nil {
		return 0, nil, err
	}
	var queues []string
	for _, c := range copies {
		queues = appendOnce(queues, c.Queue)
	}
	return len(fSeq), queues, nil
}

// expireMet kills the jobs of seqs, past their wait at the head of the
// queues a plain claim at now looked at, in a transaction of its own,
// and adds the dead-letter queues that got copies to res.
func (s *Store) expireMet(ctx context.Context, seqs []int64, now time.Time, res *store.ClaimResult) error {
	var queues []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		_, queues, err = s.expire(ctx, tx, seqs, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("expire jobs met by a claim: %w", err)
	}
	for _, q := range queues {
		res.Available = appendOnce(res.Available, q)
	}
	return nil
}

// JobExpireWaiting kills the jobs past their queues' maximum waits that
// no claim met; see store.Maintainer. It knows no next deadline: the
// leader's sweep looks again at its idle interval.
func (s *Store) JobExpireWaiting(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	if err := s.check(); err != nil {
		return nil, wrap("expire waiting jobs", err)
	}
	now = micro(now)
	var res *store.MaintenanceResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		res = &store.MaintenanceResult{}
		rows, err := tx.Query(ctx, sqlSweepPastWait, now, limit)
		if err != nil {
			return fmt.Errorf("find jobs past their wait: %w", err)
		}
		seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("find jobs past their wait: %w", err)
		}
		res.Count, res.Available, err = s.expire(ctx, tx, seqs, now)
		return err
	})
	if err != nil {
		return nil, wrap("expire waiting jobs", err)
	}
	return res, nil
}
