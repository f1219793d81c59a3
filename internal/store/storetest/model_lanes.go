package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Consumer groups in the model: each group of a queue gets a copy of
// every job of the queue in its lane, a queue of its own that follows
// its queue's limits and pause and has no settings. A group's name is
// never taken again once deleted.

// pickConsumerGroup returns the name of a random consumer group of any
// queue, or "" when there is none.
func (m *model) pickConsumerGroup() string {
	var names []string
	for _, q := range modelLaneQueues {
		names = append(names, m.lanes[q]...)
	}
	if len(names) == 0 {
		return ""
	}
	return names[m.rng.IntN(len(names))]
}

// consumerGroup creates a consumer group of a or o, creates one that
// exists (which changes nothing), or deletes one, or one that does not
// exist.
func (m *model) consumerGroup() {
	q := modelLaneQueues[m.rng.IntN(len(modelLaneQueues))]
	switch r := m.rng.IntN(10); {
	case r < 4 && len(m.lanes[q]) < 2:
		m.lanesMade++
		m.createGroup(q, fmt.Sprintf("cg%d", m.lanesMade))
	case r < 5 && len(m.lanes[q]) > 0:
		m.createGroup(q, m.lanes[q][m.rng.IntN(len(m.lanes[q]))])
	case r < 9 && len(m.lanes[q]) > 0:
		cg := m.lanes[q][m.rng.IntN(len(m.lanes[q]))]
		m.op = "delete consumer group " + cg + " of " + q
		if err := m.b.s.ConsumerGroupDelete(m.b.ctx, q, cg); err != nil {
			m.fatalf("%v", err)
		}
		lane := job.LaneName(q, cg)
		for id, j := range m.jobs {
			if j.queue == lane {
				delete(m.jobs, id)
			}
		}
		m.lanes[q] = slices.DeleteFunc(m.lanes[q], func(n string) bool { return n == cg })
	default:
		m.op = "delete a consumer group of " + q + " that does not exist"
		if err := m.b.s.ConsumerGroupDelete(m.b.ctx, q, "nobody"); !errors.Is(err, job.ErrNotFound) {
			m.fatalf("%v, want not found", err)
		}
	}
}

// createGroup creates consumer group cg of q from a random start: its
// lane gets a copy of each job of the queue that the start names, in
// enqueue order, due when the job is.
func (m *model) createGroup(q, cg string) {
	p := &store.ConsumerGroupParams{Queue: q, Name: cg, Start: job.ConsumerGroupStart(m.rng.IntN(3)), Now: m.now}
	if p.Start == job.StartAt {
		p.From = m.now.Add(-time.Duration(m.rng.IntN(60)) * time.Second)
	}
	m.op = fmt.Sprintf("create consumer group %s of %s from %d at %v", cg, q, p.Start, p.From.Sub(t0))
	created, err := m.b.s.ConsumerGroupCreate(m.b.ctx, p)
	exists := slices.Contains(m.lanes[q], cg)
	if err != nil || created == exists {
		m.fatalf("created %v, %v; the group exists: %v", created, err, exists)
	}
	if exists {
		return
	}
	m.lanes[q] = append(m.lanes[q], cg)
	if _, ok := m.paused[q]; !ok {
		m.paused[q] = false
	}
	var from []*mjob
	for _, j := range m.jobs {
		if j.queue == q && (p.Start == job.StartBeginning || (p.Start == job.StartAt && !j.created.Before(p.From))) {
			from = append(from, j)
		}
	}
	sort.Slice(from, func(i, k int) bool { return from[i].seq < from[k].seq })
	for _, j := range from {
		st := job.StateAvailable
		if j.runAt.After(m.now) {
			st = job.StateScheduled
		}
		m.add(&mjob{id: job.CopyID(j.id, cg), queue: job.LaneName(q, cg), group: j.group, priority: j.priority,
			state: st, runAt: j.runAt, created: j.created, maxAttempts: j.maxAttempts, lease: j.lease})
	}
}

// compareLanes checks the consumer groups the store lists, with their
// counts (counts by queue, from the model).
func (m *model) compareLanes(counts map[string]map[job.State]int64) {
	m.b.t.Helper()
	gs, err := m.b.s.ConsumerGroupListAll(m.b.ctx, &job.ConsumerGroupListParams{})
	if err != nil {
		m.fatalf("list the consumer groups: %v", err)
	}
	var want []string
	for _, q := range modelLaneQueues {
		for _, cg := range slices.Sorted(slices.Values(m.lanes[q])) {
			want = append(want, job.LaneName(q, cg))
		}
	}
	if len(gs) != len(want) {
		m.fatalf("the store has consumer groups %+v, model says %v", gs, want)
	}
	for i, g := range gs {
		lane := job.LaneName(g.Queue, g.Name)
		if lane != want[i] {
			m.fatalf("the store has consumer groups %+v, model says %v", gs, want)
		}
		for _, st := range job.States {
			if g.Counts[st] != counts[lane][st] {
				m.fatalf("consumer group %s counts %v, model says %v", lane, g.Counts, counts[lane])
			}
		}
	}
}
