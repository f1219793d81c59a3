package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The oldest available job of a queue is found in the claim indexes,
// which order each queue's available jobs by priority, then run time:
// the first job of each priority is the oldest of that priority, so a
// walk that seeks from one priority to the next (and, in a grouped
// queue, from one group to the next) reads a few entries per priority
// instead of every job. A handed-out job keeps its row available until
// its outcome is written (its lease lives in memory), and those jobs come
// first in claim order: the walk steps over them, which reads about as
// many entries as the queue has active jobs.
const (
	// sqlOldestPlain walks the available jobs of queue ?1 kept outside
	// groups (grp NULL: those of a queue that is not grouped) from
	// priority ?2 down (exclusive).
	sqlOldestPlain = `SELECT seq, priority, run_at FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority < ?2
ORDER BY priority DESC, run_at, seq`
	// sqlOldestInGroup walks the jobs of group ?2 of queue ?1 from
	// priority ?3 down (exclusive); sqlOldestNextGroup those of the groups
	// after ?2. The rows marked ready include some that left the available
	// state since the last sweep (flow.go), which the walk steps over.
	sqlOldestInGroup = `SELECT seq, grp, priority, run_at, state FROM jobs INDEXED BY jobs_group_claim
WHERE queue = ?1 AND gready = 1 AND grp IS NOT NULL AND grp = ?2 AND priority < ?3
ORDER BY priority DESC, run_at, seq`
	sqlOldestNextGroup = `SELECT seq, grp, priority, run_at, state FROM jobs INDEXED BY jobs_group_claim
WHERE queue = ?1 AND gready = 1 AND grp > ?2
ORDER BY grp, priority DESC, run_at, seq`
)

// oldestGroups bounds how many groups of one queue the walk visits: past
// it, a grouped queue's oldest available job is the oldest of its first
// oldestGroups groups (by name) that have available jobs.
const oldestGroups = 1024

// aboveAll is a priority above every priority a job may have.
const aboveAll = 1 << 20

// setOldestAvailable sets OldestAvailable on the queues of qs that have
// available jobs, reading beside the writer.
func (s *Store) setOldestAvailable(ctx context.Context, qs []store.QueueInfo) error {
	for i := range qs {
		if qs[i].Counts[job.StateAvailable] == 0 {
			continue
		}
		oldest, err := s.oldestPlain(ctx, qs[i].Name)
		if err != nil {
			return fmt.Errorf("find the oldest available job of %s: %w", qs[i].Name, err)
		}
		grouped, err := s.oldestGrouped(ctx, qs[i].Name)
		if err != nil {
			return fmt.Errorf("find the oldest available job of %s: %w", qs[i].Name, err)
		}
		if !grouped.IsZero() && (oldest.IsZero() || grouped.Before(oldest)) {
			oldest = grouped
		}
		qs[i].OldestAvailable = oldest
	}
	return nil
}

// oldestPlain is the earliest run time of the available jobs without a
// group of queue, zero when there is none.
func (s *Store) oldestPlain(ctx context.Context, queue string) (time.Time, error) {
	var oldest time.Time
	for below := int64(aboveAll); ; {
		priority, runAt, found, err := s.firstFree(ctx, sqlOldestPlain, queue, below)
		if err != nil || !found {
			return oldest, err
		}
		if oldest.IsZero() || runAt.Before(oldest) {
			oldest = runAt
		}
		below = priority
	}
}

// firstFree runs query with args and returns the priority and run time
// of the first row whose job is not handed out.
func (s *Store) firstFree(ctx context.Context, query string, args ...any) (priority int64, runAt time.Time, found bool, err error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at int64
		if err := rows.Scan(&seq, &priority, &at); err != nil {
			return 0, time.Time{}, false, err
		}
		if !s.leases.held(seq) {
			return priority, fromNanos(at), true, closeRows(rows)
		}
	}
	return 0, time.Time{}, false, closeRows(rows)
}

// oldestGrouped is the earliest run time of the available jobs of
// queue kept by group (in a grouped queue, those without a group are the
// group ""), zero when there is none, over at most oldestGroups groups.
func (s *Store) oldestGrouped(ctx context.Context, queue string) (time.Time, error) {
	var oldest time.Time
	group, below := "", int64(aboveAll)
	for groups := 1; ; {
		// The group's next priority, else the next group.
		h, found, err := s.firstFreeInGroup(ctx, sqlOldestInGroup, queue, group, below)
		if err == nil && !found {
			if groups++; groups > oldestGroups {
				return oldest, nil
			}
			h, found, err = s.firstFreeInGroup(ctx, sqlOldestNextGroup, queue, group)
		}
		if err != nil || !found {
			return oldest, err
		}
		if oldest.IsZero() || h.runAt.Before(oldest) {
			oldest = h.runAt
		}
		group, below = h.group, h.priority
	}
}

// groupHead is the first available job of one priority of one group.
type groupHead struct {
	group    string
	priority int64
	runAt    time.Time
}

// firstFreeInGroup runs query with args and returns the first row whose
// job is available and not handed out.
func (s *Store) firstFreeInGroup(ctx context.Context, query string, args ...any) (groupHead, bool, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return groupHead{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at int64
		var g groupHead
		var state job.State
		if err := rows.Scan(&seq, &g.group, &g.priority, &at, &state); err != nil {
			return groupHead{}, false, err
		}
		if state == job.StateAvailable && !s.leases.held(seq) {
			g.runAt = fromNanos(at)
			return g, true, closeRows(rows)
		}
	}
	return groupHead{}, false, closeRows(rows)
}
