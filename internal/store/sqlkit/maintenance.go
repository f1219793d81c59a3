package sqlkit

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Maintenance runs the leader's passes over a store's jobs: it makes due
// jobs available, rescues expired leases and prunes finished jobs; it
// implements store.Maintainer.
type Maintenance struct {
	d    *Dialect
	db   DB
	jobs MaintainedJobs
	sql  MaintenanceSQL
	lock string
}

// MaintenanceSQL are a store's statements of the passes, spelt as the
// store runs them, with numbered parameters.
type MaintenanceSQL struct {
	// Due reads, locking them, up to $2 scheduled and retrying jobs due
	// at $1, earliest first: seq, queue, state, priority, run_at, group.
	Due string
	// Promote makes available the jobs of the list of seqs $1.
	Promote string
	// Seqs is the argument of a list of seqs.
	Seqs func([]int64) any
	// NextDue reads the earliest run time of a scheduled or retrying job.
	NextDue string
	// PruneOldest deletes up to $2 of the oldest finished jobs in the
	// states of the list $1 (as Dialect.List makes it) that finished
	// before $3, returning the queue and the state of each.
	PruneOldest string
}

// MaintainedJobs is what a store keeps of its jobs beside their rows,
// that the passes read and update inside their writes.
type MaintainedJobs interface {
	// Promoted is told, inside the write, of the jobs a pass made
	// available, as res notes them.
	Promoted(c Conn, due []DueJob, res *store.MaintenanceResult)
	// Rescue ends up to limit attempts whose leases expired by now, each
	// where job.AfterLeaseExpiry sends it, notes each with NoteRescued and
	// sets res.Next to the next expiry.
	Rescue(ctx context.Context, c Conn, now time.Time, limit int, res *store.MaintenanceResult) error
	// CountFinished counts the jobs in states, as job.Prune asks.
	CountFinished(ctx context.Context, c Conn, states []job.State) (int64, error)
	// Pruned is told of each job a prune pass deleted.
	Pruned(c Conn, queue string, state job.State)
	// AfterPrune runs the store's own pruning, inside the write of a
	// prune pass, after its jobs.
	AfterPrune(ctx context.Context, c Conn, p *store.JobPruneParams) error
}

// DueJob is a scheduled or retrying job that has come due.
type DueJob struct {
	Seq      int64
	Queue    string
	State    job.State
	Priority int
	RunAt    time.Time
	Group    string
}

// NewMaintenance serves store.Maintainer on db, which speaks d, with the
// statements q and what jobs keeps beside the rows.
func NewMaintenance(d *Dialect, db DB, jobs MaintainedJobs, q MaintenanceSQL) *Maintenance {
	return &Maintenance{d: d, db: db, jobs: jobs, sql: q, lock: d.render(d.Lock)}
}

// Pass runs fn, one pass of a maintenance service, as one write and
// returns what it did; a pass run again (its write retried or split)
// starts from nothing.
func (m *Maintenance) Pass(ctx context.Context, what string, fn func(Conn, *store.MaintenanceResult) error) (*store.MaintenanceResult, error) {
	var res *store.MaintenanceResult
	err := m.db.Write(ctx, 1, func(c Conn) error {
		res = &store.MaintenanceResult{}
		return fn(c, res)
	})
	if err != nil {
		return nil, m.db.Wrap(what, err)
	}
	return res, nil
}

// JobPromoteDue makes due scheduled and retrying jobs available; see
// store.Maintainer.
func (m *Maintenance) JobPromoteDue(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return m.Pass(ctx, "promote due jobs", func(c Conn, res *store.MaintenanceResult) error {
		var due []DueJob
		err := c.Query(ctx, m.sql.Due, []any{m.d.time(now), limit}, func(r Row) error {
			var j DueJob
			err := r.Scan(&j.Seq, &j.Queue, &j.State, &j.Priority, timeInto(&j.RunAt), &j.Group)
			due = append(due, j)
			return err
		})
		if err != nil {
			return fmt.Errorf("read due jobs: %w", err)
		}
		if len(due) > 0 {
			seqs := make([]int64, len(due))
			for i, j := range due {
				seqs[i] = j.Seq
				res.Available = appendOnce(res.Available, j.Queue)
			}
			if _, err := c.Exec(ctx, m.sql.Promote, m.sql.Seqs(seqs)); err != nil {
				return fmt.Errorf("make due jobs available: %w", err)
			}
			res.Count = len(due)
			m.jobs.Promoted(c, due, res)
		}
		_, err = queryRow(ctx, c, m.sql.NextDue, nil, timeInto(&res.Next))
		return err
	})
}

// JobRescueExpired takes back jobs whose lease ran out, each where
// job.AfterLeaseExpiry sends it; see store.Maintainer.
func (m *Maintenance) JobRescueExpired(ctx context.Context, now time.Time, limit int) (*store.MaintenanceResult, error) {
	return m.Pass(ctx, "rescue expired jobs", func(c Conn, res *store.MaintenanceResult) error {
		return m.jobs.Rescue(ctx, c, m.d.trunc(now.UTC()), limit, res)
	})
}

// NoteRescued notes in res an attempt of queue that a rescue ended by
// end, whose dead-letter copy, if any, went to letterQueue.
func NoteRescued(res *store.MaintenanceResult, queue string, end *attempt.End, letterQueue string) {
	res.Count++
	if res.Rescued == nil {
		res.Rescued = make(map[string]int)
	}
	res.Rescued[queue]++
	if end.Available() {
		res.Available = appendOnce(res.Available, queue)
	}
	if letterQueue != "" {
		res.Available = appendOnce(res.Available, letterQueue)
	}
}

// JobPrune deletes up to p.Limit final jobs by retention, pass by pass as
// p.Passes lists them, under a lock that keeps two prunes from both
// deleting the same excess over a count cap; see store.Maintainer.
func (m *Maintenance) JobPrune(ctx context.Context, p *store.JobPruneParams) (int, error) {
	if _, err := m.db.Read(); err != nil {
		return 0, m.db.Wrap("prune jobs", err)
	}
	if p.Limit <= 0 {
		return 0, nil
	}
	total := 0
	err := m.db.Write(ctx, 1, func(c Conn) (err error) {
		if err := run(ctx, c, step{"lock pruning", m.lock, []any{"prune", "jobs"}}); err != nil {
			return err
		}
		count := func(states []job.State) (int64, error) { return m.jobs.CountFinished(ctx, c, states) }
		if total, err = job.Prune(p.Passes(), p.Limit, count, func(pass *job.PrunePass, n int) (int, error) {
			return m.pruneOldest(ctx, c, pass, n)
		}); err != nil {
			return err
		}
		return m.jobs.AfterPrune(ctx, c, p)
	})
	if err != nil {
		return 0, m.db.Wrap("prune jobs", err)
	}
	return total, nil
}

// pruneOldest deletes up to n of the oldest jobs in the states of pass
// finished before its Before; a pass by count has no age bound.
func (m *Maintenance) pruneOldest(ctx context.Context, c Conn, pass *job.PrunePass, n int) (int, error) {
	before := pass.Before
	if !pass.ByAge() {
		before = time.Unix(0, 1<<62)
	}
	states := make([]string, len(pass.States))
	for i, st := range pass.States {
		states[i] = string(st)
	}
	deleted := 0
	err := c.Query(ctx, m.sql.PruneOldest, []any{m.d.List(states), n, m.d.time(before)}, func(r Row) error {
		var queue string
		var state job.State
		if err := r.Scan(&queue, &state); err != nil {
			return err
		}
		deleted++
		m.jobs.Pruned(c, queue, state)
		return nil
	})
	if err != nil {
		return deleted, fmt.Errorf("delete %v jobs: %w", pass.States, err)
	}
	return deleted, nil
}

// appendOnce is list with s appended unless it holds s already.
func appendOnce(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
