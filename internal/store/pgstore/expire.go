package pgstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/claim"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Maximum waits on PostgreSQL. Every claim statement leaves out the jobs
// past their queue's maximum wait (job.PastMaxWait, written in SQL as
// waitOK), whatever a node believes of the queue, so no node hands one
// out. A claim that meets them also kills them, every one it passed over
// up to maxKilledByClaim: the flow claim in its transaction
// (flowclaim.go); the plain claim, for the queues a node knows to have a
// maximum wait, reads in the same round trip the first jobs of those
// queues with what the rule needs, and when the rule finds any of them
// past their wait, kills in a transaction of its own, once it has
// claimed, the jobs past their wait at the head of those queues
// (expireHeads). The leader's sweep (JobExpireWaiting) kills the ones no
// claim meets. A node reads which queues have a maximum wait at most
// every waitRecheck, and at once after it set one itself.

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
	// sqlWaitHeads reads the first $2 available jobs, in claim order, of
	// each queue of $1 that has a maximum wait and is claimed the plain
	// way, with what job.PastMaxWait needs to know of them.
	sqlWaitHeads = waitHeads(`queue = n.name`)
	// sqlWaitHeadsGroup is sqlWaitHeads among the jobs of group $3
	// alone, read from the group claim index.
	sqlWaitHeadsGroup = waitHeads(`queue = n.name COLLATE "C" AND grp IS NOT NULL AND grp = $3 COLLATE "C"`)
)

// waitHeads is sqlWaitHeads among the jobs of queue n.name that jobs
// selects.
func waitHeads(jobs string) string {
	return `SELECT h.seq, n.name, h.attempt, h.run_at, s.max_wait_ns FROM unnest($1::text[]) AS n(name)
JOIN spool_queues s ON s.name = n.name AND s.max_wait_ns > 0 AND NOT s.paused AND NOT s.flow
CROSS JOIN LATERAL (
	SELECT seq, priority, attempt, run_at FROM spool_jobs
	WHERE state = 'available' AND ` + jobs + `
	ORDER BY priority DESC, run_at, seq LIMIT $2::int4) h
ORDER BY n.name, h.priority DESC, h.run_at, h.seq`
}

// Bounds of the kills of one claim.
const (
	// maxKilledByClaim bounds how many jobs past their wait one claim
	// kills; the sweep kills any it leaves.
	maxKilledByClaim = claim.MaxKills
	// headChunk is how many jobs of a queue one read of expireHeads
	// takes.
	headChunk = 64
)

// waitHead is one of the first available jobs of a queue with a maximum
// wait, as sqlWaitHeads reads it.
type waitHead struct {
	seq, maxWait int64
	queue        string
	attempt      int32
	runAt        time.Time
}

// past reports whether h may no longer start at now.
func (h *waitHead) past(now time.Time) bool {
	return job.PastMaxWait(int(h.attempt), h.runAt.UTC(), time.Duration(h.maxWait), now)
}

// readWaitHeads reads with q the first n available jobs of each of
// queues (of group alone when it is set), by queue in claim order.
func readWaitHeads(ctx context.Context, q querier, queues []string, group string, n int) ([]waitHead, error) {
	query, args := sqlWaitHeads, []any{queues, n}
	if group != "" {
		query, args = sqlWaitHeadsGroup, append(args, group)
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read the first jobs of queues with a maximum wait: %w", err)
	}
	return collectWaitHeads(rows)
}

// collectWaitHeads reads the rows of sqlWaitHeads and closes them.
func collectWaitHeads(rows pgx.Rows) ([]waitHead, error) {
	var out []waitHead
	var h waitHead
	_, err := pgx.ForEachRow(rows, []any{&h.seq, &h.queue, &h.attempt, &h.runAt, &h.maxWait}, func() error {
		out = append(out, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the first jobs of queues with a maximum wait: %w", err)
	}
	return out, nil
}

// queuesWithPast lists the queues of heads that hold a job past its wait
// at now.
func queuesWithPast(heads []waitHead, now time.Time) []string {
	var out []string
	for i := range heads {
		if heads[i].past(now) {
			out = appendOnce(out, heads[i].queue)
		}
	}
	return out
}

// leadingPast returns the seqs of the jobs of heads (read by queue, in
// claim order, n a queue) that come before the first job of their queue
// that may still start at now, and the queues all of whose n jobs read
// were past their wait, whose next jobs may be too.
func leadingPast(heads []waitHead, n int, now time.Time) (seqs []int64, more []string) {
	run, queue := 0, ""
	for i := range heads {
		h := &heads[i]
		if h.queue != queue {
			queue, run = h.queue, 0
		}
		if run < 0 {
			continue // the queue met a job that may start
		}
		if !h.past(now) {
			run = -1
			continue
		}
		seqs = append(seqs, h.seq)
		if run++; run == n {
			more = append(more, queue)
		}
	}
	return seqs, more
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

// expireHeads kills, in a transaction of its own, the jobs past their
// wait at now at the head of queues (of group alone when it is set),
// which a plain claim at now met: from the first available job of each
// queue in claim order up to the first that may still start, up to
// maxKilledByClaim in all. It adds the dead-letter queues that got
// copies to res. The jobs the claim leased are active by then, so a
// queue's head starts with those the claim passed over.
func (s *Store) expireHeads(ctx context.Context, queues []string, group string, now time.Time, res *store.ClaimResult) error {
	var letters []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
		letters = nil
		qs := queues
		for killed := 0; len(qs) > 0 && killed < maxKilledByClaim; {
			heads, err := readWaitHeads(ctx, tx, qs, group, min(headChunk, maxKilledByClaim-killed))
			if err != nil {
				return err
			}
			seqs, more := leadingPast(heads, min(headChunk, maxKilledByClaim-killed), now)
			if len(seqs) == 0 {
				return nil
			}
			n, got, err := s.expire(ctx, tx, seqs, now)
			if err != nil {
				return err
			}
			for _, q := range got {
				letters = appendOnce(letters, q)
			}
			killed += n
			if n < len(seqs) {
				return nil // others hold some of them: they are read again first
			}
			qs = more
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("expire jobs met by a claim: %w", err)
	}
	for _, q := range letters {
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
