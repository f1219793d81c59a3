package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Ack completes jobs, each with its fencing token. Per-item failures
// (job.ErrNotFound, job.ErrLeaseLost) are in the outcomes; the error is for
// the call as a whole (bad input, store down). Item ids are checked at the
// edge, where the request names its fields (httpapi); an id that is no job
// id names no job and gets job.ErrNotFound like any unknown id.
func (e *Engine) Ack(ctx context.Context, items []job.CompleteItem) ([]job.Outcome, error) {
	if err := e.checkBatch("items", len(items)); err != nil {
		return nil, err
	}
	if err := e.checkAcks(items, batchField("items", len(items))); err != nil {
		return nil, err
	}
	now := e.Now()
	out, err := e.st.JobComplete(ctx, &store.JobCompleteParams{Items: items, Now: now})
	if err != nil {
		return nil, fmt.Errorf("complete jobs: %w", err)
	}
	e.emitOutcomes(out, now, func(i int) string { return items[i].ID }, nil)
	e.freed(out)
	return out, nil
}

// Fail records failed attempts; see Ack for the error contract. A retrying
// job wakes the scheduler for its run time; a job that died into a
// dead-letter queue wakes the fetches parked on that queue.
func (e *Engine) Fail(ctx context.Context, items []job.FailItem) ([]job.Outcome, error) {
	if err := e.checkBatch("items", len(items)); err != nil {
		return nil, err
	}
	if err := checkFails(items, batchField("items", len(items))); err != nil {
		return nil, err
	}
	now := e.Now()
	out, err := e.st.JobFail(ctx, &store.JobFailParams{Items: items, Now: now, Rand: e.rand})
	if err != nil {
		return nil, fmt.Errorf("fail jobs: %w", err)
	}
	e.emitOutcomes(out, now, func(i int) string { return items[i].ID }, func(i int) string { return items[i].Message })
	e.retrying(out)
	e.freed(out)
	return out, nil
}

// checkAcks validates the results of items and keeps each as its JSON
// value; field names an item's field in errors.
func (e *Engine) checkAcks(items []job.CompleteItem, field func(i int, name string) string) error {
	for i := range items {
		if len(items[i].Result) > 0 {
			res, err := e.checkJSON(items[i].Result, false, field(i, "result"))
			if err != nil {
				return err
			}
			items[i].Result = res
		}
	}
	return nil
}

// checkFails validates items and keeps each error message as
// job.ErrorMessage has it; field names an item's field in errors.
func checkFails(items []job.FailItem, field func(i int, name string) string) error {
	for i := range items {
		items[i].Message = job.ErrorMessage(items[i].Message)
		if items[i].RetryAfter < 0 || items[i].RetryAfter > MaxDelay {
			return job.Invalid(field(i, "retry_after_ms"), "must be between 0 and %d", MaxDelay.Milliseconds())
		}
	}
	return nil
}

// retrying wakes the scheduler for the earliest run time of the jobs out
// sent to retry, and the fetches parked on the dead-letter queues the jobs
// that died went to.
func (e *Engine) retrying(out []job.Outcome) {
	var earliest time.Time
	for _, o := range out {
		if o.Err == nil && o.State == job.StateRetrying && (earliest.IsZero() || o.RunAt.Before(earliest)) {
			earliest = o.RunAt
		}
	}
	if !earliest.IsZero() {
		e.scheduled(earliest)
	}
	// A job that died into a dead-letter queue is available there.
	e.NotifyAvailable(deadLetters(out))
}

// deadLetters lists the queues that got the dead-letter copies of the
// jobs of outcomes.
func deadLetters(out []job.Outcome) []string {
	var queues []string
	for _, o := range out {
		if q := o.DeadLetter.Queue; o.Err == nil && q != "" && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	return queues
}

// Extend moves leases forward (heartbeat); see Ack for the error contract.
func (e *Engine) Extend(ctx context.Context, items []job.ExtendItem) ([]job.Outcome, error) {
	if err := e.checkBatch("items", len(items)); err != nil {
		return nil, err
	}
	for i := range items {
		if items[i].Lease != 0 {
			if err := checkLease(items[i].Lease, itemField("items", i, len(items), "lease_ms")); err != nil {
				return nil, err
			}
		}
	}
	out, err := e.st.JobExtend(ctx, &store.JobExtendParams{Items: items, Now: e.Now()})
	if err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	var earliest time.Time
	for _, o := range out {
		if o.Err == nil && (earliest.IsZero() || o.LeaseExpiresAt.Before(earliest)) {
			earliest = o.LeaseExpiresAt
		}
	}
	e.leased(earliest)
	return out, nil
}

// Release hands active jobs back unrun (see store.Claimer.JobRelease) and
// wakes the fetches parked on their queues; see Ack for the error contract.
func (e *Engine) Release(ctx context.Context, items []job.ReleaseItem) ([]job.Outcome, error) {
	if err := e.checkBatch("items", len(items)); err != nil {
		return nil, err
	}
	now := e.Now()
	out, err := e.st.JobRelease(ctx, &store.JobReleaseParams{Items: items, Now: now})
	if err != nil {
		return nil, fmt.Errorf("release jobs: %w", err)
	}
	e.emitOutcomes(out, now, func(i int) string { return items[i].ID }, nil)
	var queues []string
	for _, o := range out {
		if o.Err == nil && o.State == job.StateAvailable {
			queues = append(queues, o.Queue)
		}
	}
	e.NotifyAvailable(queues)
	e.freed(out)
	return out, nil
}

// Progress stores a progress report of an active job; its id is checked
// at the edge, as Ack's are.
func (e *Engine) Progress(ctx context.Context, id string, token int64, progress json.RawMessage) error {
	p, err := e.checkJSON(progress, false, "progress")
	if err != nil {
		return err
	}
	if err := e.st.JobProgress(ctx, &store.JobProgressParams{ID: id, Token: token, Progress: p, Now: e.Now()}); err != nil {
		return fmt.Errorf("report progress: %w", err)
	}
	return nil
}

func (e *Engine) checkBatch(field string, n int) error {
	if n == 0 {
		return job.Invalid(field, "must hold at least one item")
	}
	if n > e.cfg.MaxBatch {
		return &BatchTooLargeError{Field: field, Max: e.cfg.MaxBatch, Got: n}
	}
	return nil
}

// itemField names a field of a batch item; a batch of one (the single-job
// routes) names the bare field.
func itemField(prefix string, i, n int, name string) string {
	if n == 1 {
		return name
	}
	return listField(prefix)(i, name)
}

// batchField names the fields of the items of a batch of n, as itemField
// does.
func batchField(prefix string, n int) func(i int, name string) string {
	return func(i int, name string) string { return itemField(prefix, i, n, name) }
}

// listField names the fields of the items of list: "list[i].name".
func listField(list string) func(i int, name string) string {
	return func(i int, name string) string { return fmt.Sprintf("%s[%d].%s", list, i, name) }
}
