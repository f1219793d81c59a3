package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
	"github.com/spoolq/spool/internal/store/adminkit"
)

// counts is the committed, in-memory view of every known queue: its row
// of the queues table and the number of its jobs in each state, which no
// table holds: they are counted at open and kept since. The writer
// updates it after each successful commit; QueueList and QueueGet read it
// without touching the database.
type counts struct {
	mu     sync.RWMutex
	queues map[string]*adminkit.Record
}

// loadCounts reads the queues table and counts jobs by queue and state
// (one scan of the jobs_queue_state index).
func loadCounts(ctx context.Context, conn *sql.Conn) (*counts, error) {
	c := &counts{queues: make(map[string]*adminkit.Record)}
	qs, err := readQueues(ctx, conn)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		c.queues[q.name] = &adminkit.Record{Name: q.name, Queue: q.Queue}
	}
	rows, err := conn.QueryContext(ctx, `SELECT queue, state, COUNT(*) FROM jobs INDEXED BY jobs_queue_state GROUP BY queue, state`)
	_, err = scanAll(rows, err, func(r *sql.Rows, _ *struct{}) error {
		var name string
		var state job.State
		var n int64
		if err := r.Scan(&name, &state, &n); err != nil {
			return err
		}
		if !state.Valid() {
			return fmt.Errorf("queue %s has jobs in unknown state %q", name, state)
		}
		c.record(name).Counts[adminkit.Index(state)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return c, nil
}

// apply records a committed change.
func (c *counts) apply(d *delta) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, set := range d.sets {
		set.apply(c.record(set.queue))
	}
	for name, cs := range d.counts {
		c.record(name).Counts.Add(cs)
	}
}

// record returns the record of queue name, making it first if needed.
// c.mu is held.
func (c *counts) record(name string) *adminkit.Record {
	q := c.queues[name]
	if q == nil {
		q = &adminkit.Record{Name: name}
		c.queues[name] = q
	}
	return q
}

// info returns one queue as the store contract shows it.
func (c *counts) info(name string) (*job.QueueInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q := c.queues[name]
	if q == nil {
		return nil, false
	}
	info := q.Info(time.Time{})
	return &info, true
}

// defaults returns what queue name gives its new jobs.
func (c *counts) defaults(name string) (store.QueueDefaults, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q := c.queues[name]
	if q == nil {
		return store.QueueDefaults{}, false
	}
	return q.Defaults(), true
}

// list returns every known queue by name.
func (c *counts) list() []job.QueueInfo {
	c.mu.RLock()
	out := make([]job.QueueInfo, 0, len(c.queues))
	for _, q := range c.queues {
		out = append(out, q.Info(time.Time{}))
	}
	c.mu.RUnlock()
	slices.SortFunc(out, func(a, b job.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// names returns the names of the known queues that keep takes (given
// each queue's counts), in byte order.
func (c *counts) names(keep func(name string, c *adminkit.Counts) bool) []string {
	c.mu.RLock()
	var out []string
	for name, q := range c.queues {
		if keep(name, &q.Counts) {
			out = append(out, name)
		}
	}
	c.mu.RUnlock()
	slices.Sort(out)
	return out
}

// totals sums the counts of states over every queue.
func (c *counts) totals(states ...job.State) int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var n int64
	for _, q := range c.queues {
		n += sumStates(&q.Counts, states)
	}
	return n
}

// sumStates sums the counts of states in cs.
func sumStates(cs *adminkit.Counts, states []job.State) int64 {
	var n int64
	for _, s := range states {
		n += cs[adminkit.Index(s)]
	}
	return n
}

// delta is a change to the counts made by one operation or one batch and
// not yet committed: moves between the counts, and the changes to the
// queues' records, in order.
type delta struct {
	counts map[string]*adminkit.Counts
	sets   []recordSet
}

// recordSet is a change to the record of a queue: apply makes it, and
// sets only what the change names.
type recordSet struct {
	queue string
	apply func(*adminkit.Record)
}

func newDelta() *delta { return &delta{counts: make(map[string]*adminkit.Counts)} }

// of returns the counts of queue in d, making them first if needed.
func (d *delta) of(queue string) *adminkit.Counts {
	cs := d.counts[queue]
	if cs == nil {
		cs = new(adminkit.Counts)
		d.counts[queue] = cs
	}
	return cs
}

// move records n jobs of queue leaving state from (empty: none) for state
// to (empty: none).
func (d *delta) move(queue string, from, to job.State, n int64) {
	cs := d.of(queue)
	if from != "" {
		cs[adminkit.Index(from)] -= n
	}
	if to != "" {
		cs[adminkit.Index(to)] += n
	}
}

// know records that queue is known, with a record.
func (d *delta) know(queue string) { d.set(queue, func(*adminkit.Record) {}) }

// set records a change of queue's record.
func (d *delta) set(queue string, apply func(*adminkit.Record)) {
	d.sets = append(d.sets, recordSet{queue: queue, apply: apply})
}

// merge adds o to d.
func (d *delta) merge(o *delta) {
	d.sets = append(d.sets, o.sets...)
	for name, cs := range o.counts {
		d.of(name).Add(cs)
	}
}

// total sums the counts of states in d.
func (d *delta) total(states ...job.State) int64 {
	var n int64
	for _, cs := range d.counts {
		n += sumStates(cs, states)
	}
	return n
}

func (d *delta) reset() {
	clear(d.counts)
	clear(d.sets)
	d.sets = d.sets[:0]
}

func (d *delta) empty() bool { return len(d.counts) == 0 && len(d.sets) == 0 }
