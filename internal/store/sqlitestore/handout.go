package sqlitestore

import (
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// What a claim writes: the jobs it picked, from the windows in claim
// order (claim.go) or as the planner decided (flowclaim.go), are read,
// then killed when past their wait (kill.go) or leased in memory
// (lease.go).

// sqlJobsBySeq reads the jobs whose seqs are listed in the JSON array.
const sqlJobsBySeq = `SELECT ` + jobColumns + ` FROM jobs NOT INDEXED WHERE seq IN (SELECT value FROM json_each(?))`

var stJobsBySeq = prepared(sqlJobsBySeq)

// pick is a job chosen for a claim, from a window of q.
type pick struct {
	q *wqueue
	e entry
}

// handOut writes what a claim does with the picked jobs: it kills those
// that dies reports past their wait, leaving their dead-letter copies
// (whose queues it adds to res.Available), and leases the others for the
// claim p at now, which it returns in pick order.
func (w *writer) handOut(picks []pick, p *store.JobClaimParams, now time.Time, res *store.ClaimResult,
	dies func(i int, j *job.Job) bool) ([]*job.Job, error) {
	jobs, err := w.loadPicked(picks)
	if err != nil {
		return nil, err
	}
	out := make([]*job.Job, 0, len(picks))
	for i, j := range jobs {
		if dies(i, j) {
			letter, err := w.killPastWait(j, picks[i].e.seq, now)
			if err != nil {
				return nil, err
			}
			noteQueue(&res.Available, letter.Queue)
			continue
		}
		out = append(out, w.leaseJob(picks[i], j, p, now))
	}
	return out, nil
}

// loadPicked returns the picked jobs in pick order, each a copy: cached ones
// straight from memory, the rest read from the database in one query.
// A job that is not available in the database is an error: the windows
// are out of step with it.
func (w *writer) loadPicked(picks []pick) ([]*job.Job, error) {
	w.touched = true
	var missing []int64
	for _, pk := range picks {
		if pk.e.body == nil {
			missing = append(missing, pk.e.seq)
		}
	}
	var bySeq map[int64]*job.Job
	if len(missing) > 0 {
		jobs, seqs, err := scanJobs(w.st.get(stJobsBySeq).Query(seqList(missing)))
		if err != nil {
			return nil, fmt.Errorf("read claimed jobs: %w", err)
		}
		bySeq = make(map[int64]*job.Job, len(jobs))
		for i, j := range jobs {
			bySeq[seqs[i]] = j
		}
	}
	out := make([]*job.Job, len(picks))
	for i, pk := range picks {
		j := bySeq[pk.e.seq]
		if pk.e.body != nil {
			c := *pk.e.body
			j = &c
		}
		if j == nil || j.State != job.StateAvailable {
			w.logger.Error("sqlitestore: ready window out of step with the database", "seq", pk.e.seq)
			return nil, fmt.Errorf("lease job %d: not available in the database", pk.e.seq)
		}
		out[i] = j
	}
	return out, nil
}

// leaseJob leases j, the job of pk, for the claim p at now, and returns
// it as leased.
func (w *writer) leaseJob(pk pick, j *job.Job, p *store.JobClaimParams, now time.Time) *job.Job {
	dur := p.LeaseDuration
	if dur <= 0 {
		dur = j.LeaseDuration
	}
	l := &lease{
		seq: pk.e.seq, id: j.ID, queue: j.Queue, kind: j.Kind, group: j.Group, key: entry{priority: pk.e.priority, runAt: pk.e.runAt, seq: pk.e.seq},
		token: w.tokens.take(), attempt: j.Attempt + 1, maxAttempts: j.MaxAttempts, backoff: j.Backoff,
		duration: j.LeaseDuration, startedAt: now, expiresAt: now.Add(dur), durability: j.Durability, worker: p.Worker,
	}
	w.leases.grant(l)
	j.State, j.Attempt, j.LeaseToken = job.StateActive, l.attempt, l.token
	j.StartedAt, j.LeaseExpiresAt, j.Progress, j.Worker = now, l.expiresAt, nil, p.Worker
	w.fx.move(j.Queue, job.StateAvailable, job.StateActive, 1)
	return j
}
