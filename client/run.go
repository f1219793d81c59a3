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
// after (see dropRun). The settler expects the outcome of run[0] already.
func (w *Worker) runRun(run []*inflight) {
	for i, e := range run {
		if i > 0 && !w.dequeue(e) {
			w.dropRun(run[i:], "run not started before shutdown")
			return
		}
		if !w.runJob(e) {
			w.dropRun(run[i+1:], "run stopped")
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

// dropRun gives up rest, the jobs of a run not started, unrun: it hands
// those whose leases it holds back to the server in one release call, in
// order, then forgets them all and frees their slots. On an ordered queue
// the server has already sent them back when the job before them went back
// to wait (or sends the later ones back with the first released), and
// answers lease_lost for them, as expected; on any other queue the release
// is what makes them available again before their leases run out. A
// failed call is logged, and the jobs then wait out their leases. They
// count as dropped (see Worker.dropped), not released.
func (w *Worker) dropRun(rest []*inflight, why string) {
	if len(rest) == 0 {
		return
	}
	w.mu.Lock()
	items := make([]ReleaseItem, 0, len(rest))
	for _, e := range rest {
		if !e.lost {
			items = append(items, ReleaseItem{ID: e.job.ID, Token: e.token})
		}
	}
	w.mu.Unlock()
	if len(items) > 0 {
		w.release(items, why, ErrLeaseLost, ErrNotFound)
	}
	w.log.Debug("run stopped; its later jobs dropped unrun", "why", why, "jobs", len(rest), "first_job_id", rest[0].job.ID,
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
