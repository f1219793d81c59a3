package client

import "context"

// runKey is what makes jobs of one fetch's answer one run (see
// WorkerConfig.Runs): their queue and their group.
type runKey struct{ queue, group string }

// runsOf splits entries, one fetch's jobs in the order received, into
// runs: the jobs of one queue and one group, in that order. A job without
// a group is a run of its own.
func runsOf(entries []*inflight) [][]*inflight {
	var runs [][]*inflight
	at := map[runKey]int{}
	for _, e := range entries {
		if e.job.Group == "" {
			runs = append(runs, []*inflight{e})
			continue
		}
		k := runKey{e.job.Queue, e.job.Group}
		if i, ok := at[k]; ok {
			runs[i] = append(runs[i], e)
			continue
		}
		at[k] = len(runs)
		runs = append(runs, []*inflight{e})
	}
	return runs
}

// runRun runs the jobs of one run one after another, in order, each once
// the one before it ended as the server answered. It stops at the first
// job that does not end, or once the worker stops, and gives up the jobs
// after (see endRun). The settler expects the outcome of run[0] already.
func (w *Worker) runRun(run []*inflight) {
	for i, e := range run {
		if i > 0 && !w.dequeue(e) {
			w.endRun(run[i:])
			return
		}
		if !w.runJob(e) {
			w.dropRun(run[i+1:])
			return
		}
	}
}

// dequeue lets e, the next job of its run, start: it reports false, and
// leaves e queued, once the worker stops or e's lease is lost.
func (w *Worker) dequeue(e *inflight) bool {
	w.mu.Lock()
	if w.stopping || e.lost {
		w.mu.Unlock()
		return false
	}
	e.queued = false
	w.mu.Unlock()
	w.settler.expect(1)
	return true
}

// endRun gives up rest, the jobs of a run not started, in order. Once the
// worker stops it releases the first, whose lease still holds, so that it
// runs again at once: the server then sends the others back, as for any
// job of a run that goes back to wait. Then it drops them all.
func (w *Worker) endRun(rest []*inflight) {
	w.mu.Lock()
	release := w.stopping && !rest[0].lost
	w.mu.Unlock()
	if release {
		w.release([]ReleaseItem{{ID: rest[0].job.ID, Token: rest[0].token}}, "run not started before shutdown")
	}
	w.dropRun(rest)
}

// dropRun forgets rest, the jobs of a run after one that did not end,
// unrun and without a call: the server sent them back when that job went
// back to wait, and their acks would be refused. Their slots free.
func (w *Worker) dropRun(rest []*inflight) {
	if len(rest) == 0 {
		return
	}
	w.log.Debug("run stopped; its later jobs dropped unrun", "jobs", len(rest), "first_job_id", rest[0].job.ID,
		"queue", rest[0].job.Queue, "group", rest[0].job.Group)
	w.mu.Lock()
	for _, e := range rest {
		delete(w.jobs, e)
	}
	w.running -= len(rest)
	w.dropped += len(rest)
	w.mu.Unlock()
	for _, e := range rest {
		e.cancel(context.Canceled)
	}
	w.signalFree()
	w.jobsWG.Add(-len(rest))
}
