package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/consumergroup"
)

// The operations of consumer groups (see lanes.go).
const (
	sqlConsumerGroupAdd    = `INSERT INTO consumer_groups (queue, name, created_at) VALUES (?, ?, ?)`
	sqlConsumerGroupRemove = `DELETE FROM consumer_groups WHERE queue = ? AND name = ?`
	// sqlConsumerGroupsOf reads the groups of a queue by name;
	// sqlConsumerGroupsAfter a page of every queue's after a group.
	sqlConsumerGroupsOf    = `SELECT queue, name, created_at FROM consumer_groups WHERE queue = ? ORDER BY name`
	sqlConsumerGroupsAfter = `SELECT queue, name, created_at FROM consumer_groups WHERE (queue, name) > (?, ?) ORDER BY queue, name LIMIT ?`
	// sqlQueueJobsAfter reads a page of a queue's jobs in seq order.
	sqlQueueJobsAfter = `SELECT ` + jobColumns + ` FROM jobs WHERE queue = ? AND seq > ? ORDER BY seq LIMIT ?`
	// sqlLaneStates counts a queue's jobs by state but the leased seqs
	// ?2, whose rows may not say so yet.
	sqlLaneStates = `SELECT state, count(*) FROM jobs WHERE queue = ?1 AND seq NOT IN (SELECT value FROM json_each(?2)) GROUP BY state`
	sqlLaneDelete = `DELETE FROM jobs WHERE queue = ?`
	// sqlOldestPendingSpec reads the spec (which holds the creation time)
	// of a queue's first pending job: the lowest seq of each pending
	// state, by the index.
	sqlOldestPendingSpec = `SELECT spec FROM jobs WHERE seq = (SELECT min(s) FROM (
	SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'scheduled') AS s
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'available')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'active')
	UNION ALL SELECT (SELECT min(seq) FROM jobs WHERE queue = ?1 AND state = 'retrying')))`
	// startPage is how many jobs a group's start reads at once.
	startPage = 1000
)

// ConsumerGroupCreate creates a consumer group, unless it exists, with a
// lane that follows its queue's limits and pause and holds the copies of
// the jobs it starts with; see store.ConsumerGroups.
func (s *Store) ConsumerGroupCreate(ctx context.Context, p *store.ConsumerGroupParams) (bool, error) {
	return call(ctx, s, fmt.Sprintf("create consumer group %s of %s", p.Name, p.Queue), func(w *writer) (bool, error) {
		if w.lanes.has(p.Queue, p.Name) {
			return false, nil
		}
		q, err := w.ensureQueue(p.Queue)
		if err != nil {
			return false, err
		}
		w.touched = true
		if _, err := w.conn.ExecContext(context.Background(), sqlConsumerGroupAdd, p.Queue, p.Name, p.Now.UnixNano()); err != nil {
			return false, fmt.Errorf("record consumer group: %w", err)
		}
		w.lanes.add(p.Queue, p.Name)
		lane := job.LaneName(p.Queue, p.Name)
		if err := w.setLimits(lane, q.limits); err != nil {
			return false, err
		}
		if err := w.setPaused(lane, q.paused); err != nil {
			return false, err
		}
		_, err = w.startLane(p)
		return true, err
	})
}

// ConsumerGroupSeek empties a group's lane and gives it the jobs of its
// new start; see store.ConsumerGroups.
func (s *Store) ConsumerGroupSeek(ctx context.Context, p *store.ConsumerGroupParams) (int, error) {
	return call(ctx, s, fmt.Sprintf("seek consumer group %s of %s", p.Name, p.Queue), func(w *writer) (int, error) {
		if !w.lanes.has(p.Queue, p.Name) {
			return 0, fmt.Errorf("consumer group %s of %s: %w", p.Name, p.Queue, job.ErrNotFound)
		}
		if err := w.clearLane(job.LaneName(p.Queue, p.Name)); err != nil {
			return 0, err
		}
		return w.startLane(p)
	})
}

// ConsumerGroupDelete deletes a group and its lane's jobs; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupDelete(ctx context.Context, queue, name string) error {
	return wrap(fmt.Sprintf("delete consumer group %s of %s", name, queue), s.do(ctx, 1, func(w *writer) error {
		if !w.lanes.has(queue, name) {
			return fmt.Errorf("consumer group %s of %s: %w", name, queue, job.ErrNotFound)
		}
		if err := w.clearLane(job.LaneName(queue, name)); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(context.Background(), sqlConsumerGroupRemove, queue, name); err != nil {
			return fmt.Errorf("remove consumer group: %w", err)
		}
		w.lanes.remove(queue, name)
		return nil
	}))
}

// ConsumerGroupList lists a queue's groups with their lanes' counts; see
// store.ConsumerGroups.
func (s *Store) ConsumerGroupList(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	out, err := consumergroup.List(ctx, groupReader{s}, queue, nil)
	return out, wrap(fmt.Sprintf("list consumer groups of %s", queue), err)
}

// ConsumerGroupListAll lists a page of the groups of every queue with
// their lanes' counts; see store.ConsumerGroups.
func (s *Store) ConsumerGroupListAll(ctx context.Context, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	out, err := consumergroup.List(ctx, groupReader{s}, "", p)
	return out, wrap("list consumer groups", err)
}

// groupReader reads the consumer groups from the read pool and their
// lanes' counts from memory, so that a listing never waits for the
// writer.
type groupReader struct{ *Store }

// Groups reads the groups' rows; see consumergroup.Reader.
func (r groupReader) Groups(ctx context.Context, queue string, p *job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	query, args := sqlConsumerGroupsOf, []any{queue}
	if p != nil {
		query, args = sqlConsumerGroupsAfter, []any{p.AfterQueue, p.AfterName, p.PageSize()}
	}
	rows, err := r.rdb.QueryContext(ctx, query, args...)
	return scanAll(rows, err, func(r *sql.Rows, g *job.ConsumerGroup) error {
		var created int64
		err := r.Scan(&g.Queue, &g.Name, &created)
		g.CreatedAt = fromNanos(created)
		return err
	})
}

// Standing takes each lane's counts from memory and reads the spec of its
// oldest pending job, for its creation time, not its payload; see
// consumergroup.Reader.
func (r groupReader) Standing(ctx context.Context, gs []job.ConsumerGroup) error {
	for i := range gs {
		lane := job.LaneName(gs[i].Queue, gs[i].Name)
		if info, ok := r.counts.info(lane); ok {
			maps.Copy(gs[i].Counts, info.Counts)
		}
		var spec []byte
		err := r.rdb.QueryRowContext(ctx, sqlOldestPendingSpec, lane).Scan(&spec)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		var oldest job.Job
		if err == nil {
			err = decodeSpec(spec, &oldest)
		}
		if err != nil {
			return fmt.Errorf("read the oldest pending job of %s: %w", lane, err)
		}
		gs[i].OldestPending = oldest.CreatedAt
	}
	return nil
}

// clearLane deletes every job of lane, active ones too, and forgets
// their leases.
func (w *writer) clearLane(lane string) error {
	w.touched = true
	type row struct {
		state job.State
		n     int64
	}
	rows, err := w.conn.QueryContext(context.Background(), sqlLaneStates, lane, w.leasedSeqs(lane))
	counts, err := scanAll(rows, err, func(r *sql.Rows, v *row) error { return r.Scan(&v.state, &v.n) })
	if err != nil {
		return fmt.Errorf("count the jobs of %s: %w", lane, err)
	}
	if _, err := w.deleteWhere(lane, sqlLaneDelete, lane); err != nil {
		return fmt.Errorf("delete the jobs of %s: %w", lane, err)
	}
	for _, c := range counts {
		w.fx.move(lane, c.state, "", c.n)
	}
	for _, l := range w.leases.ofQueue(lane) {
		w.leases.drop(l)
		w.fx.move(lane, job.StateActive, "", 1)
	}
	return nil
}

// startLane gives group p.Name a copy of each job of p.Queue that p.Start
// names and returns how many.
func (w *writer) startLane(p *store.ConsumerGroupParams) (int, error) {
	from, none, err := p.Since()
	if none || err != nil {
		return 0, err
	}
	now := p.Now.UTC()
	n := 0
	for after := int64(0); ; {
		jobs, seqs, err := scanJobs(w.conn.QueryContext(context.Background(), sqlQueueJobsAfter, p.Queue, after, startPage))
		if err != nil {
			return n, fmt.Errorf("read the jobs of %s: %w", p.Queue, err)
		}
		var copies []store.JobInsertParams
		for _, j := range jobs {
			if j.CreatedAt.Before(from) {
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
