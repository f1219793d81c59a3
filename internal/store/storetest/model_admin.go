package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The model's operations on jobs by hand and its maintenance passes:
// cancels, retries and deletes of one job or of a queue's jobs in one
// state, purges, pauses, promotions, rescues of expired leases and
// retention.

func (m *model) cancel() {
	m.op = "cancel"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	m.op = "cancel " + j.id
	got, err := m.b.s.JobCancel(m.b.ctx, j.id, m.now)
	switch j.state {
	case job.StateCompleted, job.StateDead:
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("cancel a %s job: %v, want invalid state", j.state, err)
		}
		return
	case job.StateActive:
		j.cancel = true
	case job.StateCancelled:
	default:
		j.state, j.finished = job.StateCancelled, m.now
	}
	if err != nil || got.State != j.state || got.CancelRequested != j.cancel {
		m.fatalf("cancel job %s: %+v, %v", j.id, got, err)
	}
}

func (m *model) retry() {
	m.op = "retry"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	m.op = "retry " + j.id
	got, err := m.b.s.JobRetry(m.b.ctx, j.id, m.now)
	switch j.state {
	case job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled:
		m.revive(j)
		if err != nil || got.State != job.StateAvailable {
			m.fatalf("retry a job: %+v, %v", got, err)
		}
	default:
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("retry a %s job: %v, want invalid state", j.state, err)
		}
	}
}

// revive applies a retry to j.
func (m *model) revive(j *mjob) {
	j.state, j.attempt, j.runAt, j.finished, j.cancel = job.StateAvailable, 0, m.now, time.Time{}, false
}

func (m *model) delete() {
	m.op = "delete"
	j := m.pick(func(*mjob) bool { return true })
	if j == nil {
		return
	}
	m.op = "delete " + j.id
	err := m.b.s.JobDelete(m.b.ctx, j.id)
	if j.state == job.StateActive {
		if !errors.Is(err, job.ErrInvalidState) {
			m.fatalf("delete an active job: %v, want invalid state", err)
		}
		return
	}
	if err != nil {
		m.fatalf("delete a %s job: %v", j.state, err)
	}
	delete(m.jobs, j.id)
}

func (m *model) promote() {
	m.op = "promote"
	queues := make(map[string]bool)
	count := 0
	var next time.Time
	for _, j := range m.jobs {
		if j.state != job.StateScheduled && j.state != job.StateRetrying {
			continue
		}
		if !j.runAt.After(m.now) {
			j.state = job.StateAvailable
			queues[j.queue] = true
			count++
		} else if next.IsZero() || j.runAt.Before(next) {
			next = j.runAt
		}
	}
	res, err := m.b.s.JobPromoteDue(m.b.ctx, m.now, 1000)
	if err != nil {
		m.fatalf("%v", err)
	}
	m.checkPass(res, count, queues, next)
}

func (m *model) rescue() {
	m.op = "rescue"
	queues := make(map[string]bool)
	count := 0
	var next time.Time
	var expired []*mjob
	for _, id := range m.ids {
		j := m.jobs[id]
		if j == nil || j.state != job.StateActive {
			continue
		}
		if !j.leaseExp.After(m.now) {
			expired = append(expired, j)
		}
	}
	// Leases end in the order they ran out; one that sends the rest of
	// its run back ends theirs unrun.
	slices.SortFunc(expired, func(a, c *mjob) int {
		if d := a.leaseExp.Compare(c.leaseExp); d != 0 {
			return d
		}
		return cmp.Compare(a.seq, c.seq)
	})
	for _, j := range expired {
		if j.state != job.StateActive {
			continue // sent back with the rest of a run
		}
		count++
		m.recordError(j, j.attempt, job.LeaseExpiredMessage)
		switch {
		case j.cancel:
			m.finish(j, job.StateCancelled)
		case j.attempt >= j.maxAttempts:
			m.finish(j, job.StateDead)
		default:
			j.state, j.leaseExp = job.StateAvailable, time.Time{}
			queues[j.queue] = true
		}
		m.returnRun(j)
	}
	// The next expiry is of the leases left, which returns may have ended.
	for _, j := range m.jobs {
		if j.state == job.StateActive && (next.IsZero() || j.leaseExp.Before(next)) {
			next = j.leaseExp
		}
	}
	for _, e := range m.expect {
		queues[e.dlq] = true
	}
	res, err := m.b.s.JobRescueExpired(m.b.ctx, m.now, 1000)
	if err != nil {
		m.fatalf("%v", err)
	}
	m.checkPass(res, count, queues, next)
}

func (m *model) setPaused(queue string, paused bool) {
	m.op = fmt.Sprintf("set %s paused %v", queue, paused)
	if err := m.b.s.QueueSetPaused(m.b.ctx, queue, paused); err != nil {
		m.fatalf("%v", err)
	}
	m.paused[queue] = paused
}

func (m *model) purge(queue string) {
	m.op = "purge " + queue
	want := 0
	for id, j := range m.jobs {
		if j.queue == queue && j.state == job.StateAvailable {
			delete(m.jobs, id)
			want++
		}
	}
	if n, err := m.b.s.QueuePurge(m.b.ctx, queue); err != nil || n != want {
		m.fatalf("purged %d, %v; want %d", n, err, want)
	}
}

func (m *model) bulk(queue string) {
	st := job.States[m.rng.IntN(len(job.States))]
	retry := m.rng.IntN(2) == 0
	want := 0
	var err error
	var n int
	if retry {
		m.op = fmt.Sprintf("retry %s jobs of %s", st, queue)
		n, err = m.b.s.JobRetryMany(m.b.ctx, &store.JobBulkParams{Queue: queue, State: st, Now: m.now})
		switch st {
		case job.StateDead, job.StateCancelled, job.StateRetrying, job.StateScheduled:
		default:
			if !errors.Is(err, job.ErrInvalidState) {
				m.fatalf("%v, want invalid state", err)
			}
			return
		}
		for _, j := range m.jobs {
			if j.queue == queue && j.state == st {
				m.revive(j)
				want++
			}
		}
	} else {
		m.op = fmt.Sprintf("delete %s jobs of %s", st, queue)
		n, err = m.b.s.JobDeleteMany(m.b.ctx, &store.JobBulkParams{Queue: queue, State: st, Now: m.now})
		if st == job.StateActive {
			if !errors.Is(err, job.ErrInvalidState) {
				m.fatalf("%v, want invalid state", err)
			}
			return
		}
		for id, j := range m.jobs {
			if j.queue == queue && j.state == st {
				delete(m.jobs, id)
				want++
			}
		}
	}
	if err != nil || n != want {
		m.fatalf("%d jobs, %v; want %d", n, err, want)
	}
}

func (m *model) prune() {
	m.op = "prune"
	cutoff := m.now.Add(-20 * time.Second)
	want := 0
	for id, j := range m.jobs {
		if j.state.Final() && j.finished.Before(cutoff) {
			delete(m.jobs, id)
			want++
		}
	}
	n, err := m.b.s.JobPrune(m.b.ctx, &store.JobPruneParams{CompletedBefore: cutoff, DeadBefore: cutoff, Limit: 1000})
	if err != nil || n != want {
		m.fatalf("pruned %d, %v; want %d", n, err, want)
	}
}
