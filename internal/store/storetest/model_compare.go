package storetest

import (
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// expectedCopy is a dead-letter copy that an operation must have made:
// of dead, as it died, in queue dlq; id is the copy's id when the
// operation named it (Outcome.DeadLetter), else "".
type expectedCopy struct {
	dead mjob
	dlq  string
	id   string
}

// wantLetter checks the copy a failure reported against the copy the
// model expects of it, if any, and notes its id.
func (m *model) wantLetter(got job.JobRef) {
	m.b.t.Helper()
	var want *expectedCopy
	if n := len(m.expect); n > 0 {
		want = m.expect[n-1]
	}
	switch {
	case want == nil && !got.IsZero():
		m.fatalf("the failure reports a dead-letter copy %+v, want none", got)
	case want != nil && (got.Queue != want.dlq || got.ID == ""):
		m.fatalf("the failure reports the dead-letter copy %+v, want one in %s", got, want.dlq)
	case want != nil:
		want.id = got.ID
	}
}

// adopt takes into the model the jobs the store made in the last
// operation, got being every job the store lists, in enqueue order: each
// must be a dead-letter copy the model expects, which then joins the
// model with the copies the consumer groups of its queue get of it. The
// store's enqueue order gives the copies their places in claim order.
func (m *model) adopt(got []*job.Job) {
	m.b.t.Helper()
	for _, g := range got {
		if m.jobs[g.ID] != nil {
			continue
		}
		i := slices.IndexFunc(m.expect, func(e *expectedCopy) bool {
			return e.dlq == g.Queue && (e.id == "" || e.id == g.ID) &&
				g.DeadLetterOf == (job.JobRef{Queue: e.dead.queue, ID: e.dead.id})
		})
		if i < 0 {
			m.fatalf("the store holds job %s of %s (a copy of %+v), which the model does not know", g.ID, g.Queue, g.DeadLetterOf)
		}
		e := m.expect[i]
		m.expect = slices.Delete(m.expect, i, i+1)
		d := &e.dead
		m.add(&mjob{id: g.ID, queue: e.dlq, group: d.group, priority: d.priority, state: job.StateAvailable,
			runAt: d.finished, created: d.finished, maxAttempts: d.maxAttempts, lease: d.lease, errs: d.errs,
			lastErr: d.lastErr, letterOf: job.JobRef{Queue: d.queue, ID: d.id}})
		for _, cg := range m.lanes[e.dlq] {
			m.add(&mjob{id: job.CopyID(g.ID, cg), queue: job.LaneName(e.dlq, cg), group: d.group, priority: d.priority,
				state: job.StateAvailable, runAt: d.finished, created: d.finished, maxAttempts: d.maxAttempts, lease: d.lease})
		}
	}
	if len(m.expect) > 0 {
		e := m.expect[0]
		m.fatalf("no dead-letter copy in %s of job %s, which died", e.dlq, e.dead.id)
	}
}

// checkPass compares the result of a promotion or rescue pass with the
// jobs the model saw it change.
func (m *model) checkPass(res *store.MaintenanceResult, count int, queues map[string]bool, next time.Time) {
	m.b.t.Helper()
	got := make(map[string]bool)
	for _, q := range res.Available {
		if got[q] {
			m.fatalf("queue %s named twice in %v", q, res.Available)
		}
		got[q] = true
	}
	if res.Count != count || !sameSet(got, queues) || !res.Next.Equal(next) {
		m.fatalf("result %+v, want %d jobs, queues %v, next %v", res, count, queues, next)
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// compare checks every job, queue and consumer group of the store
// against the model, once it has adopted the copies the last operation
// made.
func (m *model) compare() {
	m.b.t.Helper()
	got := m.b.listAll("", "", 1000)
	m.adopt(got)
	if len(got) != len(m.jobs) {
		m.fatalf("store lists %d jobs, model has %d", len(got), len(m.jobs))
	}
	counts := make(map[string]map[job.State]int64)
	for _, g := range got {
		j := m.jobs[g.ID]
		if counts[j.queue] == nil {
			counts[j.queue] = make(map[job.State]int64)
		}
		counts[j.queue][j.state]++
		var last job.AttemptError
		if n := len(g.Errors); n > 0 {
			last = g.Errors[n-1]
		}
		if g.Queue != j.queue || g.State != j.state || g.Attempt != j.attempt || g.LeaseToken != j.token ||
			g.Priority != j.priority || g.Group != j.group || !g.RunAt.Equal(j.runAt) || !g.CreatedAt.Equal(j.created) ||
			!g.LeaseExpiresAt.Equal(j.leaseExp) || !g.FinishedAt.Equal(j.finished) || g.CancelRequested != j.cancel ||
			g.DeadLetterOf != j.letterOf || g.MaxAttempts != j.maxAttempts || g.LeaseDuration != j.lease ||
			len(g.Errors)+g.ErrorsDropped != j.errs || len(g.Errors) != min(j.errs, job.LatestErrors+1) ||
			last.Attempt != j.lastErr.Attempt || last.Message != j.lastErr.Message || !last.At.Equal(j.lastErr.At) {
			m.fatalf("job %s is %+v, model says %+v", g.ID, *g, *j)
		}
	}
	check := func(q string) {
		m.b.t.Helper()
		info, err := m.b.s.QueueGet(m.b.ctx, q)
		if err != nil {
			m.fatalf("get queue %s: %v", q, err)
		}
		if info.Paused != m.pausedOf(q) || info.Limits != m.limitsOf(q) || info.Settings != m.settingsOf(q) {
			m.fatalf("queue %s paused %v, limits %+v, settings %+v; model says %v, %+v, %+v",
				q, info.Paused, info.Limits, info.Settings, m.pausedOf(q), m.limitsOf(q), m.settingsOf(q))
		}
		for _, st := range job.States {
			if info.Counts[st] != counts[q][st] {
				m.fatalf("queue %s counts %v, model says %v", q, info.Counts, counts[q])
			}
		}
	}
	for q := range m.paused {
		check(q)
		for _, cg := range m.lanes[q] {
			check(job.LaneName(q, cg))
		}
	}
	m.compareLanes(counts)
}
