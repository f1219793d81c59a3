package engine

import (
	"context"
	"fmt"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// NewQueues says how the queues that a call creates are configured (see
// EnqueueBatchCreating and TransactRequest.NewQueues). For each queue of
// the call's jobs that does not exist yet, it returns the limits and
// settings the queue is created with, in the same atomic store operation
// as the jobs, whose defaults come from those settings; or an error,
// which refuses the whole call before anything is written. A queue that
// exists keeps its own configuration and is not asked about.
type NewQueues func(queue string) (job.Limits, job.QueueSettings, error)

// EnqueueBatchCreating is EnqueueBatch that creates the queues of reqs
// that do not exist yet as newQueues says, in the insert of the jobs: all
// of it or, on any error, nothing.
func (e *Engine) EnqueueBatchCreating(ctx context.Context, reqs []EnqueueRequest, newQueues NewQueues) ([]EnqueueResult, error) {
	if len(reqs) == 0 {
		return nil, job.Invalid("jobs", "must hold at least one job")
	}
	if len(reqs) > e.cfg.MaxBatch {
		return nil, &BatchTooLargeError{Field: "jobs", Max: e.cfg.MaxBatch, Got: len(reqs)}
	}
	return e.enqueueCreating(ctx, reqs, "jobs", newQueues)
}

// CreateQueue creates queue name with limits l and settings s, unless it
// exists, which changes nothing. Invalid limits or settings are a
// *job.InputError naming the field.
func (e *Engine) CreateQueue(ctx context.Context, name string, l job.Limits, s job.QueueSettings) error {
	c, err := e.newQueueConfig(name, func(string) (job.Limits, job.QueueSettings, error) { return l, s, nil })
	if err != nil {
		return err
	}
	if _, err := e.st.JobInsertMany(ctx, &store.JobInsertManyParams{Create: []store.QueueConfig{c}, Now: e.Now()}); err != nil {
		return fmt.Errorf("create queue %s: %w", name, err)
	}
	return nil
}

// newQueueConfig is the configuration newQueues gives queue name,
// checked and normalized.
func (e *Engine) newQueueConfig(name string, newQueues NewQueues) (store.QueueConfig, error) {
	if !job.ValidName(name) {
		return store.QueueConfig{}, job.Invalid("queue", "must be a queue name")
	}
	l, s, err := newQueues(name)
	if err != nil {
		return store.QueueConfig{}, err
	}
	if err := l.Check(); err != nil {
		return store.QueueConfig{}, err
	}
	if err := s.Check(name); err != nil {
		return store.QueueConfig{}, err
	}
	return store.QueueConfig{Name: name, Limits: l.Normalized(), Settings: s}, nil
}
