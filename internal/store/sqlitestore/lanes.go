package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Consumer groups in the embedded store (see store.ConsumerGroups). The
// writer keeps the groups of every queue in memory (lanes), read at open
// and after a rollback; an insert into a queue with groups inserts the
// copies in the same operation, so one commit holds a job and its copies.
// A lane is a queue of its own: its jobs are claimed, finished and pruned
// like any other's.

const (
	sqlConsumerGroups      = `SELECT queue, name, created_at FROM consumer_groups ORDER BY queue, name`
	sqlConsumerGroupAdd    = `INSERT INTO consumer_groups (queue, name, created_at) VALUES (?, ?, ?)`
	sqlConsumerGroupRemove = `DELETE FROM consumer_groups WHERE queue = ? AND name = ?`
	// sqlQueueJobsAfter reads the jobs of a queue in seq order, a page at
	// a time, for the copies of a group's start.
	sqlQueueJobsAfter = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND seq > ? ORDER BY seq LIMIT ?`
	// sqlLaneStates counts the jobs of a queue by state but those of the
	// seqs ?2, which are leased (their rows may not say so yet).
	sqlLaneStates = `SELECT state, count(*) FROM jobs WHERE queue = ?1 AND seq NOT IN (SELECT value FROM json_each(?2)) GROUP BY state`
	sqlLaneDelete = `DELETE FROM jobs WHERE queue = ?`
	// sqlOldestPending reads the creation time of the first pending job of
	// a queue: the lowest seq of each pending state, by the index.
	sqlOldestPending = `SELECT ` + jobColumns + ` FROM jobs WHERE seq = (SELECT min(s) FROM (
	SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'scheduled') AS s
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'available')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'active')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'retrying')))`
	// sqlConsumerGroupsAfter reads a page of the groups of every queue
	// after a group, by the table's key.
	sqlConsumerGroupsAfter = `SELECT queue, name, created_at FROM consumer_groups WHERE (queue, name) > (?, ?) ORDER BY queue, name LIMIT ?`
	// sqlOldestPendingSpec reads the spec (which holds the creation time)
	// of the first pending job of a queue, as sqlOldestPending finds it,
	// and nothing else of it.
	sqlOldestPendingSpec = `SELECT spec FROM jobs WHERE seq = (SELECT min(s) FROM (
	SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'scheduled') AS s
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'available')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'active')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'retrying')))`
	// startPage is how many jobs a group's start reads at once.
	startPage = 1000
)

// laneGroup is a consumer group as the writer keeps it.
type laneGroup struct {
	name      string
	createdAt time.Time
}

// loadLanes reads every queue's consumer groups.
func (w *writer) loadLanes() error {
	rows, err := w.conn.QueryContext(context.Background(), sqlConsumerGroups)
	if err != nil {
		return fmt.Errorf("read consumer groups: %w", err)
	}
	lanes := map[string][]laneGroup{}
	for rows.Next() {
		var queue string
		var g laneGroup
		var created int64
		if err := rows.Scan(&queue, &g.name, &created); err != nil {
			rows.Close()
			return fmt.Errorf("read consumer groups: %w", err)
		}
		g.createdAt = time.Unix(0, created).UTC()
		lanes[queue] = append(lanes[queue], g)
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("read consumer groups: %w", err)
	}
	w.lanes = lanes
	return nil
}

// hasLane reports whether queue has consumer group name.
func (w *writer) hasLane(queue, name string) bool {
	return slices.ContainsFunc(w.lanes[queue], func(g laneGroup) bool { return g.name == name })
}

// copyToLanes inserts, for every job of jobs that out says was inserted,
// a copy in each consumer group of its queue.
func (w *writer) copyToLanes(jobs []store.JobInsertParams, now time.Time, out []store.InsertResult) error {
	var copies []store.JobInsertParams
	for i := range jobs {
		groups := w.lanes[jobs[i].Queue]
		if len(groups) == 0 || out[i].Duplicate {
			continue
		}
		for _, g := range groups {
			copies = append(copies, store.CopyOfInsert(&jobs[i], g.name, now))
		}
	}
	if len(copies) == 0 {
		return nil
	}
	if err := w.insertJobs(copies, now, make([]store.InsertResult, len(copies))); err != nil {
		return fmt.Errorf("copy jobs to their consumer groups: %w", err)
	}
	return nil
}

// ConsumerGroupCreate creates a consumer group and gives it the jobs it
// starts with; see store.ConsumerGroups.
func (s *Store) ConsumerGroupCreate(ctx context.Context, p *store.ConsumerGroupParams) (bool, error) {
	created := false
	err := s.do(ctx, 1, func(w *writer) error {
		if w.hasLane(p.Queue, p.Name) {
			return nil
		}
		if _, err := w.ensureQueue(p.Queue); err != nil {
			return err
		}
		w.touched = true
		now := p.Now.UTC()
		if _, err := w.conn.ExecContext(context.Background(), sqlConsumerGroupAdd, p.Queue, p.Name, now.UnixNano()); err != nil {
			return fmt.Errorf("record consumer group: %w", err)
		}
		w.lanes[p.Queue] = append(w.lanes[p.Queue], laneGroup{name: p.Name, createdAt: now})
		slices.SortFunc(w.lanes[p.Queue], func(a, b laneGroup) int { return strings.Compare(a.name, b.name) })
		if err := w.followQueue(p.Queue, p.Name); err != nil {
			return err
		}
		created = true
		_, err := w.startLane(p)
		return err
	})
	if err != nil {
		return false, wrap(fmt.Sprintf("create consumer group %s of %s", p.Name, p.Queue), err)
	}
	return created, nil
}

// ConsumerGroupSeek empties a group's lane and gives it the jobs of its
// new start; see store.ConsumerGroups.
func (s *Store) ConsumerGroupSeek(ctx context.Context, p *store.ConsumerGroupParams) (int, error) {
	n := 0
	err := s.do(ctx, 1, func(w *writer) error {
		if !w.hasLane(p.Queue, p.Name) {
			return fmt.Errorf("consumer group %s of %s: %w", p.Name, p.Queue, job.ErrNotFound)
		}
		if err := w.clearLane(job.LaneName(p.Queue, p.Name)); err != nil {
			return err
		}
		var err error
		n, err = w.startLane(p)
		return err
	})
	if err != nil {
		return 0, wrap(fmt.Sprintf("seek consumer group %s of %s", p.Name, p.Queue), err)
	}
	return n, nil
}

// ConsumerGroupDelete deletes a group and its lane's jobs; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupDelete(ctx context.Context, queue, name string) error {
	err := s.do(ctx, 1, func(w *writer) error {
		if !w.hasLane(queue, name) {
			return fmt.Errorf("consumer group %s of %s: %w", name, queue, job.ErrNotFound)
		}
		if err := w.clearLane(job.LaneName(queue, name)); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlConsumerGroupRemove, queue, name); err != nil {
			return fmt.Errorf("remove consumer group: %w", err)
		}
		w.lanes[queue] = slices.DeleteFunc(w.lanes[queue], func(g laneGroup) bool { return g.name == name })
		return nil
	})
	if err != nil {
		return wrap(fmt.Sprintf("delete consumer group %s of %s", name, queue), err)
	}
	return nil
}

// ConsumerGroupList lists a queue's groups with their lanes' counts; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupList(ctx context.Context, queue string) ([]store.ConsumerGroup, error) {
	var out []store.ConsumerGroup
	err := s.do(ctx, 1, func(w *writer) error {
		for _, g := range w.lanes[queue] {
			cg := store.ConsumerGroup{Queue: queue, Name: g.name, CreatedAt: g.createdAt, Counts: map[job.State]int64{}}
			lane := job.LaneName(queue, g.name)
			if info, ok := s.cat.info(lane); ok {
				cg.Counts = info.Counts
			}
			oldest, _, err := scanJob(w.conn.QueryRowContext(context.Background(), sqlOldestPending, lane))
			switch {
			case err == nil:
				cg.OldestPending = oldest.CreatedAt
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("read the oldest pending job of %s: %w", lane, err)
			}
			out = append(out, cg)
		}
		return nil
	})
	if err != nil {
		return nil, wrap(fmt.Sprintf("list consumer groups of %s", queue), err)
	}
	return out, nil
}

// ConsumerGroupListAll lists a page of the groups of every queue with
// their lanes' counts; see store.ConsumerGroups. It reads the groups
// table and each group's oldest pending job (its spec, for its creation
// time, and not its payload) from the read pool, and the counts from the catalog, so it never waits
// for the writer.
func (s *Store) ConsumerGroupListAll(ctx context.Context, p *store.ConsumerGroupListParams) ([]store.ConsumerGroup, error) {
	if err := s.check(); err != nil {
		return nil, wrap("list consumer groups", err)
	}
	rows, err := s.rdb.QueryContext(ctx, sqlConsumerGroupsAfter, p.AfterQueue, p.AfterName, p.PageSize())
	if err != nil {
		return nil, wrap("list consumer groups", err)
	}
	var out []store.ConsumerGroup
	for rows.Next() {
		var g store.ConsumerGroup
		var created int64
		if err := rows.Scan(&g.Queue, &g.Name, &created); err != nil {
			rows.Close()
			return nil, wrap("list consumer groups", err)
		}
		g.CreatedAt = time.Unix(0, created).UTC()
		out = append(out, g)
	}
	if err := closeRows(rows); err != nil {
		return nil, wrap("list consumer groups", err)
	}
	for i := range out {
		g := &out[i]
		lane := job.LaneName(g.Queue, g.Name)
		g.Counts = map[job.State]int64{}
		if info, ok := s.cat.info(lane); ok {
			g.Counts = info.Counts
		}
		var spec []byte
		switch err := s.rdb.QueryRowContext(ctx, sqlOldestPendingSpec, lane).Scan(&spec); {
		case err == nil:
			var oldest job.Job
			if err := decodeSpec(spec, &oldest); err != nil {
				return nil, wrap(fmt.Sprintf("read the oldest pending job of %s", lane), err)
			}
			g.OldestPending = oldest.CreatedAt
		case !errors.Is(err, sql.ErrNoRows):
			return nil, wrap(fmt.Sprintf("read the oldest pending job of %s", lane), err)
		}
	}
	return out, nil
}

// followQueue gives the lane of group name of queue the queue's limits
// and pause.
func (w *writer) followQueue(queue, name string) error {
	lane := job.LaneName(queue, name)
	if _, err := w.ensureQueue(lane); err != nil {
		return err
	}
	q := w.queues[queue]
	if err := w.setLimits(lane, q.limits); err != nil {
		return err
	}
	return w.setPaused(lane, q.paused)
}

// clearLane deletes every job of lane, active ones too, and forgets
// their leases.
func (w *writer) clearLane(lane string) error {
	w.touched = true
	leased := w.leasedSeqs(lane)
	rows, err := w.conn.QueryContext(context.Background(), sqlLaneStates, lane, leased)
	if err != nil {
		return fmt.Errorf("count the jobs of %s: %w", lane, err)
	}
	counts := map[job.State]int64{}
	for rows.Next() {
		var st job.State
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return fmt.Errorf("count the jobs of %s: %w", lane, err)
		}
		counts[st] = n
	}
	if err := closeRows(rows); err != nil {
		return fmt.Errorf("count the jobs of %s: %w", lane, err)
	}
	if _, err := w.deleteWhere(lane, sqlLaneDelete, lane); err != nil {
		return fmt.Errorf("delete the jobs of %s: %w", lane, err)
	}
	for st, n := range counts {
		w.fx.move(lane, st, "", n)
	}
	for _, l := range w.leases.all() {
		if l.queue == lane {
			w.drop(l)
			w.fx.move(lane, job.StateActive, "", 1)
		}
	}
	return nil
}

// startLane gives group p.Name a copy of each job of p.Queue that p.Start
// names and returns how many.
func (w *writer) startLane(p *store.ConsumerGroupParams) (int, error) {
	if p.Start == store.StartNew {
		return 0, nil
	}
	now := p.Now.UTC()
	n := 0
	for after := int64(0); ; {
		rows, err := w.conn.QueryContext(context.Background(), sqlQueueJobsAfter, p.Queue, after, startPage)
		if err != nil {
			return n, fmt.Errorf("read the jobs of %s: %w", p.Queue, err)
		}
		jobs, seqs, err := scanJobs(rows)
		if err != nil {
			return n, fmt.Errorf("read the jobs of %s: %w", p.Queue, err)
		}
		var copies []store.JobInsertParams
		for _, j := range jobs {
			if p.Start == store.StartAt && j.CreatedAt.Before(p.From) {
				continue
			}
			copies = append(copies, store.CopyOf(j, p.Name, now))
		}
		if len(copies) > 0 {
			if err := w.insertJobs(copies, now, make([]store.InsertResult, len(copies))); err != nil {
				return n, fmt.Errorf("copy jobs to consumer group %s: %w", p.Name, err)
			}
			n += len(copies)
		}
		if len(jobs) < startPage {
			return n, nil
		}
		after = seqs[len(seqs)-1]
	}
}
