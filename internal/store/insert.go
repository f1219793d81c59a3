package store

import (
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// CheckInserts refuses, before anything is written, jobs a store whose
// own durability level is own cannot insert: in a state other than
// scheduled or available, or of a durability it does not keep
// (job.StoredDurability).
func CheckInserts(jobs []JobInsertParams, own job.Durability) error {
	for i := range jobs {
		jp := &jobs[i]
		if jp.State != job.StateAvailable && jp.State != job.StateScheduled {
			return fmt.Errorf("jobs[%d]: insert job %s in state %q: only scheduled or available", i, jp.ID, jp.State)
		}
		if _, ok := job.StoredDurability(jp.Durability, own); !ok {
			return fmt.Errorf("jobs[%d]: insert job %s: %w", i, jp.ID,
				job.Invalid(fmt.Sprintf("jobs[%d].durability", i), "this store does not keep %q jobs", jp.Durability))
		}
	}
	return nil
}

// Relaxed reports whether no job of jobs needs the commit that inserts
// it to wait for the disk: each is of process or memory durability.
func Relaxed(jobs []JobInsertParams) bool {
	for i := range jobs {
		if d := jobs[i].Durability; d != job.DurabilityProcess && d != job.DurabilityMemory {
			return false
		}
	}
	return true
}

// NewJob is jp as a store inserts it: to run at runAt, created at
// created, kept at durability d (each as the store keeps it).
func NewJob(jp *JobInsertParams, runAt, created time.Time, d job.Durability) *job.Job {
	return &job.Job{
		ID: jp.ID, Queue: jp.Queue, Kind: jp.Kind, Payload: jp.Payload, Priority: jp.Priority, State: jp.State,
		RunAt: runAt, MaxAttempts: jp.MaxAttempts, Backoff: jp.Backoff, LeaseDuration: jp.LeaseDuration,
		UniqueKey: jp.UniqueKey, UniqueFor: jp.UniqueFor, Tags: jp.Tags, Group: jp.Group,
		Durability: d, CreatedAt: created, TraceParent: jp.TraceParent,
	}
}

// UniqueRef names one unique key of one queue.
type UniqueRef struct{ Queue, Key string }

// InsertPlan is which jobs of one insert go in and which are duplicates,
// as Inserter's contract decides it (PlanInserts).
type InsertPlan struct {
	// Insert are the indexes of the jobs to insert, in batch order.
	Insert []int
	// sameAs are the jobs that duplicate an earlier job of the batch, in
	// batch order; each takes that job's result (SettleDuplicates).
	sameAs []batchDuplicate
}

// batchDuplicate is job i of a batch, a duplicate of the earlier job of:
// by id (so it must be of the same queue), else by unique key.
type batchDuplicate struct {
	i, of int
	byID  bool
}

// PlanInserts decides, job by job in batch order, which jobs of an
// insert are duplicates: a job whose id an earlier job of the batch has
// duplicates that job; one whose id is in byID (the store's jobs of the
// batch's ids) duplicates that job, or is refused with a
// *job.IDTakenError when that job is of another queue; one with a unique
// key duplicates the newest job of its queue with the key, one of the
// batch inserted before it or else the store's (newest), when
// job.UniqueConflict says so. It fills the results of the duplicates of
// the store's jobs in out.
func PlanInserts(jobs []JobInsertParams, byID map[string]*job.Job, newest map[UniqueRef]*job.Job, now time.Time, out []InsertResult) (*InsertPlan, error) {
	plan := &InsertPlan{Insert: make([]int, 0, len(jobs))}
	firstOfID := make(map[string]int, len(jobs))
	newestOfKey := make(map[UniqueRef]int) // the newest job of the batch to insert with each key
	for i := range jobs {
		jp := &jobs[i]
		if f, ok := firstOfID[jp.ID]; ok {
			plan.sameAs = append(plan.sameAs, batchDuplicate{i: i, of: f, byID: true})
			continue
		}
		firstOfID[jp.ID] = i
		if dup := byID[jp.ID]; dup != nil {
			if err := job.DuplicateByID(dup, jp.Queue, fmt.Sprintf("jobs[%d].id", i)); err != nil {
				return nil, err
			}
			out[i] = InsertResult{Job: dup, Duplicate: true}
			continue
		}
		if jp.UniqueKey != "" {
			r := UniqueRef{jp.Queue, jp.UniqueKey}
			if f, ok := newestOfKey[r]; ok {
				if job.UniqueConflict(inserted(&jobs[f], now), jp.UniqueFor, now) {
					plan.sameAs = append(plan.sameAs, batchDuplicate{i: i, of: f})
					continue
				}
			} else if n := newest[r]; n != nil && job.UniqueConflict(n, jp.UniqueFor, now) {
				out[i] = InsertResult{Job: n, Duplicate: true}
				continue
			}
			newestOfKey[r] = i
		}
		plan.Insert = append(plan.Insert, i)
	}
	return plan, nil
}

// inserted is as much of jp, inserted at now, as job.UniqueConflict reads.
func inserted(jp *JobInsertParams, now time.Time) *job.Job {
	return &job.Job{State: jp.State, CreatedAt: jp.Created(now)}
}

// Created is when jp is created, inserted at now: then, unless it says
// when (in UTC).
func (jp *JobInsertParams) Created(now time.Time) time.Time {
	if jp.CreatedAt.IsZero() {
		return now
	}
	return jp.CreatedAt.UTC()
}

// SettleDuplicates gives each job of the plan that duplicates an earlier
// job of the batch, once the jobs it inserts have their results in out,
// that job's result as a duplicate; or the *job.IDTakenError of a job
// whose id the earlier job has in another queue.
func (p *InsertPlan) SettleDuplicates(jobs []JobInsertParams, out []InsertResult) error {
	for _, d := range p.sameAs {
		if d.byID {
			if err := job.DuplicateByID(out[d.of].Job, jobs[d.i].Queue, fmt.Sprintf("jobs[%d].id", d.i)); err != nil {
				return err
			}
		}
		out[d.i] = InsertResult{Job: out[d.of].Job, Duplicate: true}
	}
	return nil
}
