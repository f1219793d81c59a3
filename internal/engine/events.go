package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// The engine tells of every change it makes to a job, once the store has
// kept it, as an events.Event: on its bus (Events), which readers
// subscribe to, and to Config.Observe, which must not miss any (metrics).
// Changes the maintenance services make in bulk (promotions, lease
// expiries, pruning) and bulk retries and deletes are not told job by job.

// Events is the engine's bus of job events.
func (e *Engine) Events() *events.Bus { return e.bus }

// emit publishes evs and tells the observer.
func (e *Engine) emit(evs []events.Event) {
	if len(evs) == 0 {
		return
	}
	e.bus.Publish(evs)
	if e.cfg.Observe != nil {
		e.cfg.Observe(evs)
	}
}

// emitInserted tells of the jobs res inserted (not the duplicates).
func (e *Engine) emitInserted(res []store.InsertResult, at time.Time) {
	evs := make([]events.Event, 0, len(res))
	for _, r := range res {
		if r.Duplicate {
			continue
		}
		ev := events.Of(events.Enqueued, at, r.Job.ID, r.Job.Queue)
		ev.Kind, ev.State = r.Job.Kind, r.Job.State
		evs = append(evs, ev)
	}
	e.emit(evs)
}

// emitStarted tells of the jobs a fetch by worker leased.
func (e *Engine) emitStarted(jobs []*job.Job, worker string) {
	evs := make([]events.Event, len(jobs))
	for i, j := range jobs {
		ev := events.Of(events.Started, j.StartedAt, j.ID, j.Queue)
		ev.Kind, ev.State, ev.Attempt, ev.Worker = j.Kind, j.State, j.Attempt, worker
		ev.Waited = j.StartedAt.Sub(j.RunAt)
		evs[i] = ev
	}
	e.emit(evs)
}

// outcomeType is the type of the event of an ack, fail or release that
// left its job in state.
func outcomeType(state job.State) events.Type {
	switch state {
	case job.StateCompleted:
		return events.Completed
	case job.StateRetrying:
		return events.Failed
	case job.StateDead:
		return events.Dead
	case job.StateCancelled:
		return events.Cancelled
	default:
		return events.Released
	}
}

// emitOutcomes tells of the accepted outcomes out of the items whose job
// ids id gives, at; message gives a failed item's error ("" for none).
func (e *Engine) emitOutcomes(out []job.Outcome, at time.Time, id func(i int) string, message func(i int) string) {
	evs := make([]events.Event, 0, len(out))
	for i, o := range out {
		if o.Err != nil {
			continue
		}
		ev := events.Of(outcomeType(o.State), at, id(i), o.Queue)
		ev.State, ev.Kind, ev.Attempt = o.State, o.Kind, o.Attempt
		if !o.StartedAt.IsZero() {
			ev.Ran = at.Sub(o.StartedAt)
		}
		if message != nil && (o.State == job.StateRetrying || o.State == job.StateDead) {
			ev.Error = message(i)
		}
		evs = append(evs, ev)
		if dl := o.DeadLetter; !dl.IsZero() {
			copied := events.Of(events.Enqueued, at, dl.ID, dl.Queue)
			copied.State = job.StateAvailable
			evs = append(evs, copied)
		}
	}
	e.emit(evs)
}

// emitJob tells of one change of j.
func (e *Engine) emitJob(t events.Type, j *job.Job, at time.Time) {
	ev := events.Of(t, at, j.ID, j.Queue)
	ev.Kind, ev.State, ev.Attempt = j.Kind, j.State, j.Attempt
	if t == events.Deleted {
		ev.State = ""
	}
	e.emit([]events.Event{ev})
}

// awaitRecheck bounds how long Await trusts the bus alone: a job that
// another node finishes is seen by then at the latest.
const awaitRecheck = time.Second

// Await returns job id once it is in a final state (completed, dead or
// cancelled), or as it is when wait ends or ctx ends first; job.ErrNotFound
// when it does not exist or is deleted while awaited. wait is 0 to
// MaxWait.
func (e *Engine) Await(ctx context.Context, id string, wait time.Duration) (*job.Job, error) {
	if wait < 0 || wait > MaxWait {
		return nil, job.Invalid("wait_ms", "must be between 0 and %d", MaxWait.Milliseconds())
	}
	if wait == 0 {
		return e.Get(ctx, id)
	}
	// Watch before the first look: a change in between is on the watch.
	watch := e.bus.WatchJob(id, events.DefaultWatchBuffer)
	defer watch.Close()
	j, err := e.Get(ctx, id)
	if err != nil || j.State.Final() {
		return j, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	recheck := time.NewTicker(awaitRecheck)
	defer recheck.Stop()
	changes := watch.C()
	for {
		select {
		case ev, ok := <-changes:
			if !ok {
				changes = nil // dropped or closing: the recheck carries on
				continue
			}
			if !ev.Type.Final() {
				continue
			}
		case <-recheck.C:
		case <-timer.C:
			return e.Get(context.WithoutCancel(ctx), id)
		case <-ctx.Done():
			return j, nil
		case <-e.closing:
			return j, nil
		}
		next, err := e.Get(ctx, id)
		switch {
		case errors.Is(err, job.ErrNotFound):
			return nil, err
		case err != nil:
			return nil, fmt.Errorf("await job: %w", err)
		}
		j = next
		if j.State.Final() {
			return j, nil
		}
	}
}
