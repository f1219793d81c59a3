package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// numStates is how many job states there are.
const numStates = 7

// stateIndex maps a state to its slot in a counts array, in job.States order.
func stateIndex(s job.State) int {
	if i := slices.Index(job.States, s); i >= 0 {
		return i
	}
	panic(fmt.Sprintf("sqlitestore: unknown job state %q", s))
}

// stateCounts holds the number of jobs of one queue in every state.
type stateCounts [numStates]int64

// queueRecord is what the counts know of one queue.
type queueRecord struct {
	paused     bool
	durability job.Durability
	limits     job.Limits
	settings   job.QueueSettings
	counts     stateCounts
}

// counts is the committed, in-memory view of every known queue: its row
// of the queues table (pause, durability, limits, settings) and the
// number of its jobs in each state, which no table holds: they are
// counted at open and kept since. The writer updates it after each
// successful commit; QueueList and QueueGet read it without touching the
// database.
type counts struct {
	mu     sync.RWMutex
	queues map[string]*queueRecord
}

// loadCounts reads the queues table and counts jobs by queue and state
// (one scan of the jobs_queue_state index).
func loadCounts(ctx context.Context, conn *sql.Conn) (*counts, error) {
	c := &counts{queues: make(map[string]*queueRecord)}
	qs, err := readQueues(ctx, conn)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		c.queues[q.name] = &queueRecord{paused: q.paused, durability: q.durability, limits: q.limits, settings: q.settings}
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
		c.record(name).counts[stateIndex(state)] = n
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
		q := c.record(name)
		for i, n := range cs {
			q.counts[i] += n
		}
	}
}

// record returns the record of queue name, making it first if needed.
// c.mu is held.
func (c *counts) record(name string) *queueRecord {
	q := c.queues[name]
	if q == nil {
		q = &queueRecord{}
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
	return q.info(name), true
}

// defaults returns what queue name gives its new jobs.
func (c *counts) defaults(name string) (store.QueueDefaults, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q := c.queues[name]
	if q == nil {
		return store.QueueDefaults{}, false
	}
	return store.QueueDefaults{Durability: cmp.Or(q.durability, job.DurabilityFull), Settings: q.settings}, true
}

// list returns every known queue by name.
func (c *counts) list() []job.QueueInfo {
	c.mu.RLock()
	out := make([]job.QueueInfo, 0, len(c.queues))
	for name, q := range c.queues {
		out = append(out, *q.info(name))
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// names returns the names of the known queues that keep takes (given
// each queue's counts), in byte order.
func (c *counts) names(keep func(name string, c *stateCounts) bool) []string {
	c.mu.RLock()
	var out []string
	for name, q := range c.queues {
		if keep(name, &q.counts) {
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
		for _, s := range states {
			n += q.counts[stateIndex(s)]
		}
	}
	return n
}

func (q *queueRecord) info(name string) *job.QueueInfo {
	cs := make(map[job.State]int64, numStates)
	for i, s := range job.States {
		cs[s] = q.counts[i]
	}
	d := q.durability
	if d == "" {
		d = job.DurabilityFull
	}
	return &job.QueueInfo{Name: name, Paused: q.paused, Durability: d, Limits: q.limits, Settings: q.settings, Counts: cs}
}

// delta is a change to the counts made by one operation or one batch and
// not yet committed: moves between the counts, and the changes to the
// queues' records, in order.
type delta struct {
	counts map[string]*stateCounts
	sets   []recordSet
}

// recordSet is a change to the record of a queue: apply makes it.
type recordSet struct {
	queue string
	apply func(*queueRecord)
}

func newDelta() *delta { return &delta{counts: make(map[string]*stateCounts)} }

// move records n jobs of queue leaving state from (empty: none) for state
// to (empty: none).
func (d *delta) move(queue string, from, to job.State, n int64) {
	cs := d.counts[queue]
	if cs == nil {
		cs = new(stateCounts)
		d.counts[queue] = cs
	}
	if from != "" {
		cs[stateIndex(from)] -= n
	}
	if to != "" {
		cs[stateIndex(to)] += n
	}
}

// know records that queue is known, with a record.
func (d *delta) know(queue string) { d.set(queue, func(*queueRecord) {}) }

// set records a change of queue's record.
func (d *delta) set(queue string, apply func(*queueRecord)) {
	d.sets = append(d.sets, recordSet{queue: queue, apply: apply})
}

// merge adds o to d.
func (d *delta) merge(o *delta) {
	d.sets = append(d.sets, o.sets...)
	for name, cs := range o.counts {
		mine := d.counts[name]
		if mine == nil {
			mine = new(stateCounts)
			d.counts[name] = mine
		}
		for i, n := range cs {
			mine[i] += n
		}
	}
}

// total sums the counts of states in d.
func (d *delta) total(states ...job.State) int64 {
	var n int64
	for _, cs := range d.counts {
		for _, s := range states {
			n += cs[stateIndex(s)]
		}
	}
	return n
}

func (d *delta) reset() {
	clear(d.counts)
	clear(d.sets)
	d.sets = d.sets[:0]
}

func (d *delta) empty() bool { return len(d.counts) == 0 && len(d.sets) == 0 }
