package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Flow control (see job.Limits) on PostgreSQL.
//
// A queue has flow control (spool_queues.flow) when it has limits or ever
// had a job with a group (grouped). Only such queues pay for it: their
// jobs carry a non-NULL grp (the group, or the empty group for a job
// without one), so the partial indexes on grp cover their jobs alone, and
// the plain claim (claim.go) passes over them with the same one look at
// spool_queues with which it passes over paused queues.
//
// A queue gets flow control under an exclusive advisory lock on the queue
// (sqlLockFlow) in the transaction that converts its pending jobs without
// a group from NULL to the empty group. A transaction that puts jobs into
// spool_jobs takes the same lock shared (sqlLockFlowShared) in a
// statement of its own, then reads which of their queues have flow
// control in the statement that puts them there, whose snapshot is taken
// after the lock: it either sees the flag or holds the lock the
// conversion waits for, so no job of a flow queue is left with a NULL
// group, whichever node inserts it. (A function that locks, then reads
// with a fresh snapshot, would do it in one statement, but its query cost
// a single insert some 70 µs; the extra statement of the pipeline costs
// some 15.) A change of a queue's maximum wait takes the same lock
// exclusively, for the same reason (see waits.go).
//
// The limits, the round-robin cursor and the queue's rate start log live
// on its spool_queues row, each group's start log in spool_group_starts.
// A claim of a flow queue locks that row (claimFlow), so the claims of
// one such queue run one at a time across all nodes and each sees what
// the one before it handed out; claims of other queues never wait on it.

// flowControl sets the limits of queues and makes queues grouped, their
// lanes with them.
type flowControl struct {
	*db
	*beliefs
}

const (
	// sqlLanesOf reads the lanes of the groups of the queues $1.
	sqlLanesOf = `SELECT queue || '` + job.LaneSep + `' || name FROM spool_consumer_groups
WHERE queue = ANY($1::text[]) ORDER BY 1`
	// sqlGroupedQueues reads which of the queues $1 are grouped already:
	// that flag never goes back, so it needs no lock.
	sqlGroupedQueues = `SELECT name FROM spool_queues WHERE name = ANY($1) AND grouped`
	// sqlFlowBefore reads which of the queues $1 have flow control. Under
	// their exclusive flow lock, which every change of the flag takes, the
	// answer holds until the transaction ends.
	sqlFlowBefore = `SELECT name FROM spool_queues WHERE name = ANY($1) AND flow`
	// sqlSetGrouped marks the queues $1 grouped, creating them if unknown.
	sqlSetGrouped = `INSERT INTO spool_queues (name, grouped, flow) SELECT q, true, true FROM unnest($1::text[]) AS q ORDER BY q
ON CONFLICT (name) DO UPDATE SET grouped = true, flow = true`
	// sqlConvertGroups gives the pending jobs without a group of the
	// queues $1 the empty group.
	sqlConvertGroups = `UPDATE spool_jobs SET grp = '' WHERE queue = ANY($1) AND grp IS NULL`
	// sqlSetLimits stores the limits of a queue, creating it if unknown.
	// A rate that is cleared takes its start log with it.
	// $9 is whether the limits are not zero: a queue has flow control
	// when they are not, or when it is grouped.
	sqlSetLimits = `INSERT INTO spool_queues (name, rate_limit, rate_period_ns, max_active, group_rate_limit,
	group_rate_period_ns, group_max_active, ordered, flow)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (name) DO UPDATE SET rate_limit = excluded.rate_limit, rate_period_ns = excluded.rate_period_ns,
	max_active = excluded.max_active, group_rate_limit = excluded.group_rate_limit,
	group_rate_period_ns = excluded.group_rate_period_ns, group_max_active = excluded.group_max_active,
	ordered = excluded.ordered, flow = spool_queues.grouped OR excluded.flow,
	rate_starts = CASE WHEN excluded.rate_limit = 0 THEN NULL ELSE spool_queues.rate_starts END
RETURNING flow, paused`
	// sqlLimitsForUpdate reads the limits of queue $1 and locks its row
	// until the transaction ends.
	sqlLimitsForUpdate = `SELECT rate_limit, rate_period_ns, max_active, group_rate_limit, group_rate_period_ns,
	group_max_active, ordered FROM spool_queues WHERE name = $1 FOR UPDATE`
	// sqlClearGroupStarts drops the group start logs of a queue whose
	// group rate is cleared.
	sqlClearGroupStarts = `DELETE FROM spool_group_starts WHERE queue = $1`
	// sqlPruneGroupStarts drops up to $2 start logs of groups whose newest
	// start no longer counts at $1 (unix ns) under their queue's group
	// rate: the pruner keeps one row per group from staying forever.
	sqlPruneGroupStarts = `DELETE FROM spool_group_starts WHERE (queue, grp) IN (
	SELECT s.queue, s.grp FROM spool_group_starts s JOIN spool_queues q ON q.name = s.queue
	WHERE s.last_start <= $1 - q.group_rate_period_ns LIMIT $2)`
)

// QueueSetLimits sets a queue's flow control, creating the queue if
// unknown; zero limits remove it (a queue that ever had a job with a group
// keeps round-robin over its groups); see store.Admin. The limits are kept
// normalized (job.Limits.Normalized), so an ordered queue has a group cap
// of 1, which the claim and the wake-ups of freed places rely on. The
// lanes of the queue's consumer groups get the same limits in the same
// transaction. A queue that gets flow control gives its pending jobs
// without a group the empty group. The fetches parked on the queue on
// every node wake, since new limits may let more jobs out.
func (f *flowControl) QueueSetLimits(ctx context.Context, name string, l job.Limits) error {
	l = l.Normalized()
	flows := make(map[string]bool)
	err := f.tx(ctx, func(tx pgx.Tx) error {
		clear(flows)
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{name}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		return f.writeLimits(ctx, tx, name, l, flows)
	})
	if err != nil {
		return wrap("set queue limits", err)
	}
	f.rememberFlow(flows)
	return nil
}

// QueuePatchLimits changes some of a queue's limits, its lanes' with
// them, creating the queue if unknown; see store.Admin. Under the queue's
// flow lock, it reads the queue's row FOR UPDATE, merges the patch and
// writes the result as QueueSetLimits does, in the same transaction, so
// the patches of every node follow one another.
func (f *flowControl) QueuePatchLimits(ctx context.Context, name string, p job.LimitsPatch) (job.Limits, error) {
	var out job.Limits
	flows := make(map[string]bool)
	err := f.tx(ctx, func(tx pgx.Tx) error {
		clear(flows)
		if _, err := tx.Exec(ctx, sqlLockFlow, []string{name}, lockClass); err != nil {
			return fmt.Errorf("lock queue: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlEnsureQueue, name); err != nil {
			return fmt.Errorf("create queue: %w", err)
		}
		var cur job.Limits
		var ratePeriod, groupRatePeriod int64
		if err := tx.QueryRow(ctx, sqlLimitsForUpdate, name).Scan(&cur.Rate.Limit, &ratePeriod, &cur.MaxActive,
			&cur.GroupRate.Limit, &groupRatePeriod, &cur.GroupMaxActive, &cur.Ordered); err != nil {
			return fmt.Errorf("read limits: %w", err)
		}
		cur.Rate.Period, cur.GroupRate.Period = time.Duration(ratePeriod), time.Duration(groupRatePeriod)
		l, err := p.Merge(cur)
		if err != nil {
			return err
		}
		out = l
		return f.writeLimits(ctx, tx, name, l, flows)
	})
	if err != nil {
		return job.Limits{}, wrap("patch queue limits", err)
	}
	f.rememberFlow(flows)
	return out, nil
}

// writeLimits stores limits l, normalized, of queue name and of its
// lanes in tx, which holds the queue's flow lock, noting in flows which
// of them have flow control, and wakes the fetches parked on those not
// paused once tx commits.
func (f *flowControl) writeLimits(ctx context.Context, tx pgx.Tx, name string, l job.Limits, flows map[string]bool) error {
	names, err := withLanes(ctx, tx, name)
	if err != nil {
		return err
	}
	var wake []string
	for _, n := range names {
		flow, paused, err := applyLimits(ctx, tx, n, l, false)
		if err != nil {
			return err
		}
		flows[n] = flow
		if !paused {
			wake = append(wake, n)
		}
	}
	f.announceOnCommit(tx, wake)
	return nil
}

// applyLimits stores limits l of queue name, creating it if unknown, and,
// when grouped, marks it grouped, in tx, which holds the queue's flow
// lock. A queue that gets flow control gives its pending jobs without a
// group the empty group. It returns whether the queue has flow control
// now and whether it is paused.
func applyLimits(ctx context.Context, tx pgx.Tx, name string, l job.Limits, grouped bool) (flow, paused bool, err error) {
	names := []string{name}
	before, err := collect[string](ctx, tx, sqlFlowBefore, names)
	if err != nil {
		return false, false, fmt.Errorf("read flow control of %s: %w", name, err)
	}
	if grouped {
		if _, err := tx.Exec(ctx, sqlSetGrouped, names); err != nil {
			return false, false, fmt.Errorf("mark queue %s grouped: %w", name, err)
		}
	}
	if err := tx.QueryRow(ctx, sqlSetLimits, name, l.Rate.Limit, int64(l.Rate.Period), l.MaxActive,
		l.GroupRate.Limit, int64(l.GroupRate.Period), l.GroupMaxActive, l.Ordered, !l.IsZero()).Scan(&flow, &paused); err != nil {
		return false, false, fmt.Errorf("store limits of %s: %w", name, err)
	}
	if l.GroupRate.IsZero() {
		if _, err := tx.Exec(ctx, sqlClearGroupStarts, name); err != nil {
			return false, false, fmt.Errorf("clear group start logs of %s: %w", name, err)
		}
	}
	if flow && len(before) == 0 {
		if _, err := tx.Exec(ctx, sqlConvertGroups, names); err != nil {
			return false, false, fmt.Errorf("convert groups of %s: %w", name, err)
		}
	}
	return flow, paused, nil
}

// withGroups is the queues of the jobs that have a group, each once.
func withGroups(jobs []store.JobInsertParams) []string {
	var queues []string
	for i := range jobs {
		if jobs[i].Group != "" {
			queues = appendOnce(queues, jobs[i].Queue)
		}
	}
	return queues
}

// markGrouped makes sure that grouped, the queues that get jobs with a
// group, are grouped, in tx, and remembers them as grouped once tx
// commits. A queue this node knows to be grouped costs nothing; one that
// is grouped already costs one read without a lock.
func (f *flowControl) markGrouped(ctx context.Context, tx pgx.Tx, grouped []string) error {
	var queues []string
	for _, q := range grouped {
		if _, ok := f.groupedQueues.Load(q); !ok {
			queues = append(queues, q)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	f.afterCommit(tx, func() { f.noteGrouped(queues) })
	marked, err := collect[string](ctx, tx, sqlGroupedQueues, queues)
	if err != nil {
		return fmt.Errorf("read grouped queues: %w", err)
	}
	var missing []string
	for _, q := range queues {
		if !slices.Contains(marked, q) {
			missing = append(missing, q)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, sqlLockFlow, missing, lockClass); err != nil {
		return fmt.Errorf("lock queues: %w", err)
	}
	// The lanes of the queues' consumer groups get grouped with them: read
	// under the lock, which a group's creation takes too, the list misses
	// none.
	lanes, err := lanesOf(ctx, tx, missing)
	if err != nil {
		return err
	}
	missing = append(missing, lanes...)
	before, err := collect[string](ctx, tx, sqlFlowBefore, missing)
	if err != nil {
		return fmt.Errorf("read flow control: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlSetGrouped, missing); err != nil {
		return fmt.Errorf("mark queues grouped: %w", err)
	}
	var convert []string
	for _, q := range missing {
		if !slices.Contains(before, q) {
			convert = append(convert, q)
		}
	}
	if len(convert) > 0 {
		if _, err := tx.Exec(ctx, sqlConvertGroups, convert); err != nil {
			return fmt.Errorf("convert groups: %w", err)
		}
	}
	return nil
}

// A start log (job.StartLog) is stored run-length encoded: pairs of a
// start time (Unix nanoseconds) and how many jobs started then, 16 bytes
// a pair, oldest first. A claim's starts share one time, so a log costs
// one pair a claim however many jobs each started.

// encodeStarts is the stored form of l.
func encodeStarts(l job.StartLog) []byte {
	if len(l) == 0 {
		return nil
	}
	var out []byte
	for i := 0; i < len(l); {
		k := i
		for k < len(l) && l[k] == l[i] {
			k++
		}
		out = binary.LittleEndian.AppendUint64(out, uint64(l[i]))
		out = binary.LittleEndian.AppendUint64(out, uint64(k-i))
		i = k
	}
	return out
}

// errStartLog reports a stored start log that encodeStarts did not write.
var errStartLog = errors.New("corrupt start log")

// decodeStarts reads a log stored by encodeStarts; nil is the empty log.
// It expands at most limit starts (the newest): a rate of limit starts
// looks at no more (see job.StartLog.Add).
func decodeStarts(b []byte, limit int) (job.StartLog, error) {
	if len(b)%16 != 0 {
		return nil, errStartLog
	}
	total := 0
	for i := 0; i < len(b); i += 16 {
		total += int(binary.LittleEndian.Uint64(b[i+8:]))
	}
	skip := max(0, total-limit)
	l := make(job.StartLog, 0, total-skip)
	for i := 0; i < len(b); i += 16 {
		at, n := int64(binary.LittleEndian.Uint64(b[i:])), int(binary.LittleEndian.Uint64(b[i+8:]))
		if n < 0 || n > total {
			return nil, errStartLog
		}
		drop := min(skip, n)
		skip -= drop
		for range n - drop {
			l = append(l, at)
		}
	}
	return l, nil
}

// earliest is the earlier of two moments, the zero time being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// withLanes is name followed by the lanes of its consumer groups, read
// in tx.
func withLanes(ctx context.Context, tx pgx.Tx, name string) ([]string, error) {
	lanes, err := lanesOf(ctx, tx, []string{name})
	if err != nil {
		return nil, err
	}
	return append([]string{name}, lanes...), nil
}

// lanesOf reads the lanes of the consumer groups of queues in tx.
func lanesOf(ctx context.Context, tx pgx.Tx, queues []string) ([]string, error) {
	lanes, err := collect[string](ctx, tx, sqlLanesOf, queues)
	if err != nil {
		return nil, fmt.Errorf("read consumer groups: %w", err)
	}
	return lanes, nil
}
