// Package adminkit is what both stores share of the admin side: a
// queue's configuration and counts as the stores keep them, and how they
// make a job.QueueInfo and a store.QueueDefaults of them.
package adminkit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Queue is a queue's configuration as a store keeps it: a zero field is
// unset (an empty durability is full).
type Queue struct {
	Paused     bool
	Durability job.Durability
	Limits     job.Limits
	Settings   job.QueueSettings
}

// NumStates is how many job states there are.
const NumStates = 7

// Counts holds the number of a queue's jobs in every state, in
// job.States order.
type Counts [NumStates]int64

// Index is the slot of state s in a Counts; an unknown state is a
// programmer's error.
func Index(s job.State) int {
	if i := slices.Index(job.States, s); i >= 0 {
		return i
	}
	panic(fmt.Sprintf("adminkit: unknown job state %q", s))
}

// Add adds o to c.
func (c *Counts) Add(o *Counts) {
	for i, n := range o {
		c[i] += n
	}
}

// Record is what a store knows of one queue: its configuration and the
// number of its jobs in every state.
type Record struct {
	Name string
	Queue
	Counts Counts
}

// Info is the queue as the store contract shows it, with the earliest
// run time of its available jobs.
func (r *Record) Info(oldest time.Time) job.QueueInfo {
	cs := make(map[job.State]int64, NumStates)
	for i, s := range job.States {
		cs[s] = r.Counts[i]
	}
	return job.QueueInfo{Name: r.Name, Paused: r.Paused, Durability: r.Defaults().Durability, Limits: r.Limits,
		Settings: r.Settings, Counts: cs, OldestAvailable: oldest}
}

// Defaults is what the queue gives the jobs enqueued without their own.
func (q *Queue) Defaults() store.QueueDefaults {
	return store.QueueDefaults{Durability: cmp.Or(q.Durability, job.DurabilityFull), Settings: q.Settings}
}

// CheckDurability refuses, with an *InputError, a queue durability d
// that is not a level, or memory when the store keeps no memory jobs
// (memory false), giving why.
func CheckDurability(d job.Durability, memory bool, why string) error {
	if !d.Valid() {
		return job.Invalid("durability", "must be full, process or memory")
	}
	if d == job.DurabilityMemory && !memory {
		return job.Invalid("durability", "memory durability is not available %s", why)
	}
	return nil
}
