package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
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
	sqlOldestPlain = `SELECT seq, '', priority, run_at, state FROM jobs INDEXED BY jobs_claim
WHERE queue = ?1 AND state = 'available' AND grp IS NULL AND priority < ?2
ORDER BY priority DESC, run_at, seq`
	// sqlOldestInGroup walks the jobs of group ?2 of queue ?1 from
	// priority ?3 down (exclusive); sqlOldestNextGroup those of the groups
	// after ?2. The rows marked ready include some that left the available
	// state since the last sweep (writer.go), which the walk steps over.
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
func (s *Store) setOldestAvailable(ctx context.Context, qs []job.QueueInfo) error {
	for i := range qs {
		if qs[i].Counts[job.StateAvailable] == 0 {
			continue
		}
		oldest, err := s.oldestAvailable(ctx, qs[i].Name)
		if err != nil {
			return fmt.Errorf("find the oldest available job of %s: %w", qs[i].Name, err)
		}
		qs[i].OldestAvailable = oldest
	}
	return nil
}

// oldestAvailable is the earliest run time of the available jobs of
// queue, zero when there is none: of those kept outside groups, then of
// those kept by group (in a grouped queue, those without a group are the
// group ""), over at most oldestGroups groups.
func (s *Store) oldestAvailable(ctx context.Context, queue string) (time.Time, error) {
	var oldest time.Time
	for below := int64(aboveAll); ; {
		h, found, err := s.firstFree(ctx, sqlOldestPlain, queue, below)
		if err != nil {
			return oldest, err
		}
		if !found {
			break
		}
		oldest = earlier(oldest, h.runAt)
		below = h.priority
	}
	group, below := "", int64(aboveAll)
	for groups := 1; ; {
		// The group's next priority, else the next group.
		h, found, err := s.firstFree(ctx, sqlOldestInGroup, queue, group, below)
		if err == nil && !found {
			if groups++; groups > oldestGroups {
				return oldest, nil
			}
			h, found, err = s.firstFree(ctx, sqlOldestNextGroup, queue, group)
		}
		if err != nil || !found {
			return oldest, err
		}
		oldest = earlier(oldest, h.runAt)
		group, below = h.group, h.priority
	}
}

// earlier is the earlier of a and b, where zero is none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// firstJob is the first available job of one priority, in one group.
type firstJob struct {
	group    string
	priority int64
	runAt    time.Time
}

// firstFree runs query with args and returns the first row whose job is
// available and not handed out.
func (s *Store) firstFree(ctx context.Context, query string, args ...any) (firstJob, bool, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return firstJob{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at int64
		var h firstJob
		var state job.State
		if err := rows.Scan(&seq, &h.group, &h.priority, &at, &state); err != nil {
			return firstJob{}, false, err
		}
		if state == job.StateAvailable && !s.leases.held(seq) {
			h.runAt = fromNanos(at)
			return h, true, closeRows(rows)
		}
	}
	return firstJob{}, false, closeRows(rows)
}
