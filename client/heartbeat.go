package client

import (
	"context"
	"errors"
	"time"
)

// maxHeartbeatBatch bounds the items of one extend call, well under the
// server's batch limit.
const maxHeartbeatBatch = 1000

// heartbeatLoop extends the leases of all running jobs, one call for all of
// them whenever the earliest is due, until hbQuit closes. Extending a
// lease early is harmless, so every beat extends every job and their
// schedules fall into step.
func (w *Worker) heartbeatLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := w.nextBeat()
		var tick <-chan time.Time
		if ok {
			timer.Reset(time.Until(next))
			tick = timer.C
		} else {
			timer.Stop()
		}
		select {
		case <-w.hbWake:
		case <-tick:
			w.heartbeat()
		case <-w.hbQuit:
			return
		}
	}
}

// nextBeat is when the earliest heartbeat is due; ok is false when no job
// needs one.
func (w *Worker) nextBeat() (next time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for e := range w.jobs {
		if e.lost || e.abandoned {
			continue
		}
		if !ok || e.due.Before(next) {
			next, ok = e.due, true
		}
	}
	return next, ok
}

// heartbeat extends every running job's lease. A job whose lease is lost
// has its context cancelled (cause ErrLeaseLost) and its result will be
// dropped; a job a user cancelled has its context cancelled with cause
// ErrJobCancelled. A failed call is retried soon, with backoff.
func (w *Worker) heartbeat() {
	w.mu.Lock()
	var all []*inflight
	for e := range w.jobs {
		if !e.lost && !e.abandoned {
			all = append(all, e)
		}
	}
	w.mu.Unlock()
	for len(all) > 0 {
		n := min(len(all), maxHeartbeatBatch)
		w.beat(all[:n])
		all = all[n:]
	}
}

// beat extends the leases of one batch of jobs.
func (w *Worker) beat(batch []*inflight) {
	items := make([]ExtendItem, len(batch))
	for i, e := range batch {
		items[i] = ExtendItem{ID: e.job.ID, Token: e.token, Lease: e.lease}
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(w.baseCtx, callTimeout)
	results, err := w.c.ExtendBatch(ctx, items)
	cancel()

	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.hbFailures++
		retry := backoff(w.hbFailures)
		for _, e := range batch {
			e.due = time.Now().Add(min(retry, e.every))
		}
		w.log.Warn("heartbeat failed; retrying", "jobs", len(batch), "err", err)
		return
	}
	w.hbFailures = 0
	for i, r := range results {
		e := batch[i]
		switch {
		case r.Err == nil:
			e.due = sent.Add(e.every)
			e.expires = sent.Add(e.length)
			if r.CancelRequested && !e.cancelSeen {
				e.cancelSeen = true
				e.cancel(ErrJobCancelled)
				w.log.Debug("job cancelled by a user; handler told", "job_id", e.job.ID)
			}
		case errors.Is(r.Err, ErrLeaseLost) || errors.Is(r.Err, ErrNotFound):
			if !e.lost && !e.handlerDone && !e.abandoned && !e.queued {
				w.log.Warn("lease lost; handler cancelled and its result will be dropped", "job_id", e.job.ID, "kind", e.job.Kind, "err", r.Err)
			}
			e.lost = true
			e.cancel(ErrLeaseLost)
		default:
			e.due = time.Now().Add(min(backoff(1), e.every))
			w.log.Warn("heartbeat of one job failed; retrying", "job_id", e.job.ID, "err", r.Err)
		}
	}
}
