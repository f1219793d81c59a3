package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
)

// sqlRunTails locks, for each job of $1 (active, locked already), the
// active jobs of its group enqueued after it, as found(head, …) in seq
// order: what a return of the rest of its run (attempt.ReturnsRun)
// hands back. It reads the group's active jobs from the group's active
// index.
const sqlRunTails = `SELECT h.seq, t.seq, t.queue, t.cancel_requested, t.attempt, t.run_at, t.durability,
	COALESCE(q.max_wait_ns, 0)
FROM spool_jobs h
JOIN spool_jobs t ON t.queue = h.queue AND t.grp = h.grp AND t.state = 'active' AND t.grp IS NOT NULL AND t.seq > h.seq
LEFT JOIN spool_queues q ON q.name = t.queue
WHERE h.seq = ANY($1) AND h.grp IS NOT NULL
ORDER BY t.seq
FOR UPDATE OF t`

// runMember is what a return of runs needs of a job whose lease a change
// ends: its group and whether its queue is ordered.
type runMember struct {
	group   string
	ordered bool
}

// withRunReturns applies, to changes made in their order (members[k] is
// change k's job), the return of the rest of each run a change sends
// back to wait (attempt.ReturnsRun): every active job of the group
// enqueued after it (attempt.RunTail) goes back as handed back unrun
// (attempt.Release), locked in tx. A change to a job an earlier change
// of the list returned is dropped: dropped[k] reports it, and the job's
// lease counts as lost. It returns the changes to apply, the returns
// after the changes kept.
func withRunReturns(ctx context.Context, tx pgx.Tx, changes []change, members []runMember) ([]change, []bool, error) {
	var heads []int64
	for k := range changes {
		if attempt.ReturnsRun(members[k].ordered, members[k].group, &changes[k].end) {
			heads = append(heads, changes[k].seq)
		}
	}
	if len(heads) == 0 {
		return changes, nil, nil
	}
	tails, err := runTails(ctx, tx, heads)
	if err != nil {
		return nil, nil, err
	}
	ended := make(map[int64]bool, len(changes))
	returned := make(map[int64]bool)
	dropped := make([]bool, len(changes))
	var kept, returns []change
	for k := range changes {
		c := changes[k]
		if returned[c.seq] {
			dropped[k] = true
			continue
		}
		ended[c.seq] = true
		kept = append(kept, c)
		if !attempt.ReturnsRun(members[k].ordered, members[k].group, &c.end) {
			continue
		}
		active := make([]int64, len(tails[c.seq]))
		byseq := make(map[int64]*leased, len(tails[c.seq]))
		for i, t := range tails[c.seq] {
			active[i], byseq[t.seq] = t.seq, t
		}
		for _, seq := range attempt.RunTail(c.seq, active) {
			if ended[seq] || returned[seq] {
				continue
			}
			returned[seq] = true
			t := byseq[seq]
			returns = append(returns, t.changeOf(attempt.Release(&t.Held)))
		}
	}
	return append(kept, returns...), dropped, nil
}

// runTails reads and locks the rest of the runs of the jobs heads, by
// head.
func runTails(ctx context.Context, tx pgx.Tx, heads []int64) (map[int64][]*leased, error) {
	rows, err := tx.Query(ctx, sqlRunTails, heads)
	if err != nil {
		return nil, fmt.Errorf("lock the rest of runs: %w", err)
	}
	out := make(map[int64][]*leased)
	var (
		head, maxWait int64
		l             leased
		att           int32
		durability    string
	)
	_, err = pgx.ForEachRow(rows, []any{&head, &l.seq, &l.Queue, &l.CancelRequested, &att, &l.runAt, &durability, &maxWait},
		func() error {
			c := l
			c.Attempt, c.runAt, c.durability = int(att), l.runAt.UTC(), job.Durability(durability)
			c.settings.MaxWait = time.Duration(maxWait)
			out[head] = append(out[head], &c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("lock the rest of runs: %w", err)
	}
	return out, nil
}
