package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spoolq/spool/internal/events"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Get returns one job, or job.ErrNotFound.
func (e *Engine) Get(ctx context.Context, id string) (*job.Job, error) {
	if !job.ValidJobID(id) {
		return nil, fmt.Errorf("get job %q: %w", id, job.ErrNotFound)
	}
	j, err := e.st.JobGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get job: %w", err)
	}
	return j, nil
}

// List pages through jobs by queue and state, p.Limit jobs a page (the
// store's default page size when zero, at most MaxListLimit). With
// p.Worker (at most MaxWorkerBytes bytes, or a name in the form Workers
// lists, compared in its job.WorkerName form, as a fetch's) and State
// active only, it lists the active jobs
// that worker holds.
func (e *Engine) List(ctx context.Context, p job.ListParams) (*job.ListPage, error) {
	if p.Queue != "" && !validQueueOrLane(p.Queue) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if p.State != "" && !p.State.Valid() {
		return nil, job.Invalid("state", "must be one of scheduled, available, active, retrying, completed, dead, cancelled")
	}
	if p.Limit < 0 || p.Limit > MaxListLimit {
		return nil, job.Invalid("limit", "must be between 1 and %d", MaxListLimit)
	}
	// A name as a fetch gave it, or as Workers lists it: cleaned, a name
	// of MaxWorkerBytes whose bytes were not UTF-8 takes up to three times
	// as many, each bad byte a U+FFFD.
	if len(p.Worker) > MaxWorkerBytes && (len(p.Worker) > 3*MaxWorkerBytes || !strings.ContainsRune(p.Worker, utf8.RuneError) ||
		job.WorkerName(p.Worker) != p.Worker) {
		return nil, job.Invalid("worker", "must be at most %d bytes", MaxWorkerBytes)
	}
	p.Worker = job.WorkerName(p.Worker)
	if err := p.Check(); err != nil {
		return nil, err
	}
	p.Limit = p.PageSize()
	page, err := e.st.JobList(ctx, &p)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return page, nil
}

// Cancel cancels a job (see store.Admin.JobCancel).
func (e *Engine) Cancel(ctx context.Context, id string) (*job.Job, error) {
	if !job.ValidJobID(id) {
		return nil, fmt.Errorf("cancel job %q: %w", id, job.ErrNotFound)
	}
	now := e.Now()
	j, err := e.st.JobCancel(ctx, id, now)
	if err != nil {
		return nil, fmt.Errorf("cancel job: %w", err)
	}
	if j.State == job.StateCancelled {
		e.emitJob(events.Cancelled, j, now)
	}
	e.mayFree(j.Queue)
	return j, nil
}

// mayFree wakes the fetches parked on queue when a cap held its jobs
// back: a job of it that ended without an ack (cancelled, deleted) may
// free a place, or the group it held in an ordered queue.
func (e *Engine) mayFree(queue string) {
	if _, ok := e.capped.Load(queue); ok {
		e.NotifyAvailable([]string{queue})
	}
}

// Retry makes a dead, cancelled, retrying or scheduled job available now.
func (e *Engine) Retry(ctx context.Context, id string) (*job.Job, error) {
	if !job.ValidJobID(id) {
		return nil, fmt.Errorf("retry job %q: %w", id, job.ErrNotFound)
	}
	now := e.Now()
	j, err := e.st.JobRetry(ctx, id, now)
	if err != nil {
		return nil, fmt.Errorf("retry job: %w", err)
	}
	e.emitJob(events.Retried, j, now)
	e.NotifyAvailable([]string{j.Queue})
	return j, nil
}

// Delete removes a job that is not active.
func (e *Engine) Delete(ctx context.Context, id string) error {
	if !job.ValidJobID(id) {
		return fmt.Errorf("delete job %q: %w", id, job.ErrNotFound)
	}
	j, err := e.st.JobGet(ctx, id)
	if err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	if err := e.st.JobDelete(ctx, id); err != nil {
		return fmt.Errorf("delete job: %w", err)
	}
	e.emitJob(events.Deleted, j, e.Now())
	e.mayFree(j.Queue)
	return nil
}

// RetryMany retries every job of queue in state, one that
// job.State.Retryable lets through.
func (e *Engine) RetryMany(ctx context.Context, queue string, state job.State) (int, error) {
	if err := checkBulk(queue, state); err != nil {
		return 0, err
	}
	if !state.Retryable() {
		return 0, job.Invalid("state", "must be dead, cancelled, retrying or scheduled")
	}
	n, err := e.st.JobRetryMany(ctx, &store.JobBulkParams{Queue: queue, State: state, Now: e.Now()})
	if err != nil {
		return 0, fmt.Errorf("retry jobs: %w", err)
	}
	if n > 0 {
		e.NotifyAvailable([]string{queue})
	}
	return n, nil
}

// DeleteMany deletes every job of queue in state (not active).
func (e *Engine) DeleteMany(ctx context.Context, queue string, state job.State) (int, error) {
	if err := checkBulk(queue, state); err != nil {
		return 0, err
	}
	if state == job.StateActive {
		return 0, job.Invalid("state", "active jobs cannot be deleted; cancel them first")
	}
	n, err := e.st.JobDeleteMany(ctx, &store.JobBulkParams{Queue: queue, State: state, Now: e.Now()})
	if err != nil {
		return 0, fmt.Errorf("delete jobs: %w", err)
	}
	return n, nil
}

func checkBulk(queue string, state job.State) error {
	if !job.ValidName(queue) {
		return job.Invalid("queue", "must be a queue name")
	}
	if !state.Valid() {
		return job.Invalid("state", "must be one of scheduled, available, active, retrying, completed, dead, cancelled")
	}
	return nil
}

// Queues lists every known queue with its counts.
func (e *Engine) Queues(ctx context.Context) ([]job.QueueInfo, error) {
	qs, err := e.st.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	// The lanes of consumer groups show with their consumer groups, not
	// as queues.
	return slices.DeleteFunc(qs, func(q job.QueueInfo) bool {
		_, _, lane := job.SplitLane(q.Name)
		return lane
	}), nil
}

// Queue returns one queue, or job.ErrNotFound.
func (e *Engine) Queue(ctx context.Context, name string) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, fmt.Errorf("get queue %q: %w", name, job.ErrNotFound)
	}
	q, err := e.st.QueueGet(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("get queue: %w", err)
	}
	return q, nil
}

// SetPaused pauses or resumes a queue and returns it. Resuming wakes the
// fetches parked on it.
func (e *Engine) SetPaused(ctx context.Context, name string, paused bool) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if err := e.st.QueueSetPaused(ctx, name, paused); err != nil {
		return nil, fmt.Errorf("set queue paused: %w", err)
	}
	if !paused {
		e.NotifyAvailable([]string{name})
	}
	return e.Queue(ctx, name)
}

// SetDurability sets the level of the jobs later enqueued into a queue
// without one of their own, and returns the queue.
func (e *Engine) SetDurability(ctx context.Context, name string, d job.Durability) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if !d.Valid() {
		return nil, job.Invalid("durability", "must be full, process or memory")
	}
	if err := e.st.QueueSetDurability(ctx, name, d); err != nil {
		return nil, fmt.Errorf("set queue durability: %w", err)
	}
	return e.Queue(ctx, name)
}

// SetLimits sets a queue's flow control (zero limits remove it) and
// returns the queue. Limits out of range are an *job.InputError naming
// the field. The fetches parked on the queue look again: new limits may
// let more jobs start.
func (e *Engine) SetLimits(ctx context.Context, name string, l job.Limits) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if err := l.Check(); err != nil {
		return nil, err
	}
	if err := e.st.QueueSetLimits(ctx, name, l.Normalized()); err != nil {
		return nil, fmt.Errorf("set queue limits: %w", err)
	}
	e.NotifyAvailable([]string{name})
	return e.Queue(ctx, name)
}

// SetSettings replaces a queue's settings (zero settings clear them) and
// returns the queue. Settings the queue may not have are an
// *job.InputError naming the field (see job.QueueSettings.Check).
func (e *Engine) SetSettings(ctx context.Context, name string, s job.QueueSettings) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if err := s.Check(name); err != nil {
		return nil, err
	}
	if err := e.st.QueueSetSettings(ctx, name, s); err != nil {
		return nil, fmt.Errorf("set queue settings: %w", err)
	}
	return e.Queue(ctx, name)
}

// PatchSettings changes some of a queue's settings and keeps the others
// (job.SettingsPatch.Merge, run by the store in the transaction that
// writes its result), creating the queue if unknown as SetSettings does,
// and returns the queue. A patch whose field or result the queue may not
// have is an *job.InputError naming the field, and changes nothing.
func (e *Engine) PatchSettings(ctx context.Context, name string, p job.SettingsPatch) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if _, err := e.st.QueuePatchSettings(ctx, name, p); err != nil {
		return nil, fmt.Errorf("patch queue settings: %w", err)
	}
	return e.Queue(ctx, name)
}

// PatchLimits changes some of a queue's limits and keeps the others
// (job.LimitsPatch.Merge, run by the store in the transaction that writes
// its result), creating the queue if unknown as SetLimits does, and
// returns the queue. A patch whose field or result is out of range is an
// *job.InputError naming the field, and changes nothing. The fetches
// parked on the queue look again.
func (e *Engine) PatchLimits(ctx context.Context, name string, p job.LimitsPatch) (*job.QueueInfo, error) {
	if !job.ValidName(name) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	if _, err := e.st.QueuePatchLimits(ctx, name, p); err != nil {
		return nil, fmt.Errorf("patch queue limits: %w", err)
	}
	e.NotifyAvailable([]string{name})
	return e.Queue(ctx, name)
}

// Purge deletes a queue's available jobs.
func (e *Engine) Purge(ctx context.Context, name string) (int, error) {
	if !job.ValidName(name) {
		return 0, job.Invalid("queue", "must be a queue name")
	}
	n, err := e.st.QueuePurge(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("purge queue: %w", err)
	}
	return n, nil
}
