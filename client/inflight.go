package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// inflight is one job a Worker fetched and has not finished with. The
// fields from due on are guarded by Worker.mu; the others are set once. The
// token is kept apart from job, which the handler may modify.
type inflight struct {
	job    *Job
	token  int64         // fencing token of this hand-out
	lease  time.Duration // asked for at each heartbeat; 0 means the job's own
	length time.Duration // how long each lease lasts
	every  time.Duration // heartbeat interval

	due     time.Time // next heartbeat
	expires time.Time // when the lease runs out, as far as the worker knows

	ctx     context.Context
	cancel  context.CancelCauseFunc
	abandon chan struct{} // closed by hardStop

	queued      bool // waits in its run for the jobs ahead of it; not started
	handlerDone bool // the handler returned; the job is being acked or failed
	arrived     bool // its outcome reached the settler (runJob's goroutine only)
	lost        bool // the lease is gone; drop the result, stop heartbeats
	abandoned   bool // given up by hardStop; released at the end of Run
	cancelSeen  bool // the server reported cancel_requested
}

// leaseLength is how long each lease of j lasts, as fetched.
func (w *Worker) leaseLength(j *Job) time.Duration {
	switch {
	case w.cfg.Lease > 0:
		return w.cfg.Lease
	case j.LeaseDuration > 0:
		return j.LeaseDuration
	case j.Lease != nil && !j.StartedAt.IsZero() && j.Lease.ExpiresAt.After(j.StartedAt):
		return j.Lease.ExpiresAt.Sub(j.StartedAt)
	default:
		return 30 * time.Second
	}
}

// start registers fetched jobs and runs them. It takes their slots at
// once, before any runs, so that the worker does not look idle while it
// starts them. Once the stop began it starts none and returns them, for
// the caller to release.
func (w *Worker) start(jobs []*Job) (unstarted []ReleaseItem) {
	if len(jobs) == 0 {
		return nil
	}
	now := time.Now()
	entries := make([]*inflight, len(jobs))
	for i, j := range jobs {
		length := w.leaseLength(j)
		every := w.cfg.HeartbeatInterval
		if every <= 0 {
			every = max(length/3, 10*time.Millisecond)
		}
		entries[i] = &inflight{
			job: j, token: j.Token(), lease: w.cfg.Lease, length: length, every: every,
			due: now.Add(every), expires: now.Add(length), abandon: make(chan struct{}),
		}
	}

	var runs [][]*inflight
	if w.cfg.Runs {
		runs = runsOf(entries)
	}
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		for _, j := range jobs {
			unstarted = append(unstarted, ReleaseItem{ID: j.ID, Token: j.Token()})
		}
		return unstarted
	}
	for _, e := range entries {
		e.ctx, e.cancel = context.WithCancelCause(w.hardCtx)
		w.jobs[e] = struct{}{}
	}
	for _, run := range runs {
		for _, e := range run[1:] {
			e.queued = true
		}
	}
	w.running += len(entries)
	w.jobsWG.Add(len(entries))
	w.mu.Unlock()

	select {
	case w.hbWake <- struct{}{}:
	default:
	}
	if w.cfg.Runs {
		// The settler expects the outcome of each run's running job only.
		w.settler.expect(len(runs))
		for _, run := range runs {
			go w.runRun(run)
		}
		return nil
	}
	w.settler.expect(len(entries))
	for _, e := range entries {
		go w.runJob(e)
	}
	return nil
}

// runJob runs e's handler in a goroutine of its own, so that a handler that
// ignores its cancelled context cannot hold up a stop, then acks or fails
// the job. It reports whether the job was acked (completed, or cancelled
// when a cancel was asked, as the server answered): whether the rest of its
// run may go on, since the server sends a run's rest back after any other
// end of a job of it.
func (w *Worker) runJob(e *inflight) (ended bool) {
	defer w.jobsWG.Done()
	defer w.forget(e)
	defer func() {
		if !e.arrived { // dropped: its outcome will not come
			w.settler.expect(-1)
		}
	}()
	fn := w.handlers[e.job.Kind]
	// The handler gets its own copy: what it changes does not reach the
	// ack, fail or heartbeats.
	hj := *e.job
	if hj.Lease != nil {
		lease := *hj.Lease
		hj.Lease = &lease
	}
	// The handler's context carries the job's traceparent, or none, so
	// that what it enqueues continues the job's trace.
	ctx := WithTraceParent(e.ctx, hj.TraceParent)
	results := make(chan outcome, 1)
	go func() {
		freed := false
		defer func() {
			if !freed { // the handler called runtime.Goexit
				w.freeSlot()
			}
		}()
		o := w.call(ctx, fn, &hj)
		// The slot is free before the outcome is sent, so that the worker
		// knows whether other handlers run that could share its call.
		freed = true
		w.freeSlot()
		results <- o
	}()
	var o outcome
	select {
	case o = <-results:
	case <-e.abandon:
		return false
	}
	w.mu.Lock()
	drop := e.abandoned || e.lost
	e.handlerDone = !drop
	w.mu.Unlock()
	if drop {
		w.log.Warn("job result dropped: lease lost or worker stopped", "job_id", e.job.ID, "kind", e.job.Kind, "cause", context.Cause(e.ctx))
		return false
	}
	return w.finish(e, o)
}

// forget removes e once its runner is done.
func (w *Worker) forget(e *inflight) {
	w.mu.Lock()
	delete(w.jobs, e)
	w.mu.Unlock()
	e.cancel(context.Canceled)
	w.signalFree()
}

// finish acks or fails e's job according to its handler's outcome. It
// reports whether the server answered that the job ended: acked, or
// failed into a final state (dead, cancelled).
func (w *Worker) finish(e *inflight, o outcome) (ended bool) {
	j := e.job
	// The job's logger is made only when something is logged: most jobs
	// log nothing, and With costs allocations per job.
	log := func() *slog.Logger {
		return w.log.With("job_id", j.ID, "kind", j.Kind, "queue", j.Queue, "attempt", j.Attempt)
	}
	if o.err == nil {
		raw, err := marshalValue(o.result)
		if err != nil {
			o.err = NoRetry(fmt.Errorf("encode result: %w", err))
		} else {
			c := &settleCall{id: j.ID, token: e.token, result: raw}
			err = w.settle(e, c)
			switch {
			case err == nil:
				if w.log.Enabled(context.Background(), slog.LevelDebug) {
					log().Debug("job acked", "state", c.acked.State)
				}
				return true
			case errors.Is(err, ErrPayloadTooLarge):
				o.err = NoRetry(fmt.Errorf("store result: %w", err))
			default:
				w.logSettleError(log(), "ack", err)
				return false
			}
		}
	}
	c := &settleCall{id: j.ID, token: e.token, fail: true, params: failParams(o.err)}
	if err := w.settle(e, c); err != nil {
		w.logSettleError(log(), "fail", err)
		return false
	}
	if w.log.Enabled(context.Background(), slog.LevelDebug) {
		log().Debug("job failed", "state", c.failed.State, "err", truncate(c.params.Error, 200))
	}
	return false // a failure ends the run: the server sent its rest back
}

func (w *Worker) logSettleError(log interface{ Warn(string, ...any) }, op string, err error) {
	if errors.Is(err, ErrLeaseLost) {
		log.Warn(op+" refused: the lease was lost; another worker may run the job", "err", err)
		return
	}
	log.Warn(op+" failed; the job runs again when its lease expires", "err", err)
}

// settle sends c, an ack or fail of e's job, through the worker's settler,
// which shares one call among the outcomes of jobs that finish together
// (see SettleDelay). It retries temporary failures with backoff while the
// lease may still be held (heartbeats go on meanwhile), and gives up when
// the lease is lost or has run out, or at a hard stop. The job stays the
// worker's, and its lease is extended, until its outcome is answered.
func (w *Worker) settle(e *inflight, c *settleCall) error {
	for n := 1; ; n++ {
		c.acked, c.failed, c.err = nil, nil, nil
		arrived := !e.arrived
		e.arrived = true
		w.settler.settle(c, arrived, w.isStopping())
		err := c.err
		if err == nil || !temporary(err) {
			return err
		}
		d := backoff(n)
		w.mu.Lock()
		hopeless := e.lost || time.Now().Add(d).After(e.expires)
		w.mu.Unlock()
		if hopeless {
			return err
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-w.hardCh:
			t.Stop()
			return err
		}
	}
}
