package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// ConsumerGroupRequest creates a consumer group or moves one.
type ConsumerGroupRequest struct {
	Queue string
	Name  string
	// Start says which jobs of the queue the consumer group starts with
	// (see job.ConsumerGroupStart); From is the first creation time for StartAt,
	// whose zero value (0001-01-01T00:00:00Z) is the beginning.
	Start job.ConsumerGroupStart
	From  time.Time
}

func (e *Engine) validateConsumerGroup(queue, name string) error {
	if !job.ValidName(queue) {
		return job.Invalid("queue", "must be a queue name")
	}
	if !job.ValidName(name) {
		return job.Invalid("name", "must be 1-%d characters of A-Za-z0-9_.:- starting with a letter or digit", job.MaxNameLength)
	}
	return nil
}

func (e *Engine) consumerGroupParams(req *ConsumerGroupRequest) (*store.ConsumerGroupParams, error) {
	if err := e.validateConsumerGroup(req.Queue, req.Name); err != nil {
		return nil, err
	}
	start := req.Start
	if start == job.StartAt && req.From.IsZero() {
		// The zero time, 0001-01-01T00:00:00Z, is before every job.
		start = job.StartBeginning
	}
	return &store.ConsumerGroupParams{Queue: req.Queue, Name: req.Name, Start: start, From: req.From, Now: e.Now()}, nil
}

// CreateConsumerGroup creates a consumer group of a queue, which then
// receives every job of the queue from where req starts it, and returns
// it; created is false when it existed, which changes nothing.
func (e *Engine) CreateConsumerGroup(ctx context.Context, req ConsumerGroupRequest) (g *job.ConsumerGroup, created bool, err error) {
	p, err := e.consumerGroupParams(&req)
	if err != nil {
		return nil, false, err
	}
	if created, err = e.st.ConsumerGroupCreate(ctx, p); err != nil {
		return nil, false, fmt.Errorf("create consumer group: %w", err)
	}
	e.NotifyAvailable([]string{job.LaneName(req.Queue, req.Name)})
	g, err = e.ConsumerGroup(ctx, req.Queue, req.Name)
	return g, created, err
}

// SeekConsumerGroup moves a consumer group to where req starts it: its
// jobs are replaced by copies of the queue's jobs from there on (jobs out
// with workers are taken back). It returns the consumer group and how
// many jobs it has to do again.
func (e *Engine) SeekConsumerGroup(ctx context.Context, req ConsumerGroupRequest) (*job.ConsumerGroup, int, error) {
	p, err := e.consumerGroupParams(&req)
	if err != nil {
		return nil, 0, err
	}
	n, err := e.st.ConsumerGroupSeek(ctx, p)
	if err != nil {
		return nil, 0, fmt.Errorf("seek consumer group: %w", err)
	}
	e.NotifyAvailable([]string{job.LaneName(req.Queue, req.Name)})
	g, err := e.ConsumerGroup(ctx, req.Queue, req.Name)
	return g, n, err
}

// DeleteConsumerGroup deletes a consumer group and its jobs. The
// fetches parked on the consumer group then answer that it is not found.
func (e *Engine) DeleteConsumerGroup(ctx context.Context, queue, name string) error {
	if err := e.validateConsumerGroup(queue, name); err != nil {
		return err
	}
	err := e.st.ConsumerGroupDelete(ctx, queue, name)
	e.ForgetConsumerGroups([]string{job.LaneName(queue, name)})
	if err != nil {
		return fmt.Errorf("delete consumer group: %w", err)
	}
	return nil
}

// ForgetConsumerGroups drops what the engine knows of the consumer
// groups of lanes (job.LaneName: the queue that holds a consumer group's
// copies), which another node deleted, or of every consumer group when
// lanes is nil, and wakes the fetches parked on lanes, which then look
// their consumer groups up again. Stores with ListenNotify call
// it (store.Hooks.OnConsumerGroupsDeleted).
func (e *Engine) ForgetConsumerGroups(lanes []string) {
	e.lanes.forget(lanes)
	e.NotifyAvailable(lanes)
}

// ConsumerGroups lists the consumer groups of a queue, with their lag.
func (e *Engine) ConsumerGroups(ctx context.Context, queue string) ([]job.ConsumerGroup, error) {
	if !job.ValidName(queue) {
		return nil, job.Invalid("queue", "must be a queue name")
	}
	gs, err := e.st.ConsumerGroupList(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("list consumer groups: %w", err)
	}
	return gs, nil
}

// ConsumerGroupsPage lists a page of the consumer groups of every queue,
// by queue then name, with their lag: one store read, whatever the number
// of queues (see job.ConsumerGroupListParams).
func (e *Engine) ConsumerGroupsPage(ctx context.Context, p job.ConsumerGroupListParams) ([]job.ConsumerGroup, error) {
	if p.Limit < 0 || p.Limit > job.MaxConsumerGroupPage {
		return nil, job.Invalid("limit", "must be between 1 and %d", job.MaxConsumerGroupPage)
	}
	gs, err := e.st.ConsumerGroupListAll(ctx, &p)
	if err != nil {
		return nil, fmt.Errorf("list consumer groups: %w", err)
	}
	return gs, nil
}

// ConsumerGroup returns one consumer group of a queue, or job.ErrNotFound.
func (e *Engine) ConsumerGroup(ctx context.Context, queue, name string) (*job.ConsumerGroup, error) {
	if err := e.validateConsumerGroup(queue, name); err != nil {
		return nil, err
	}
	gs, err := e.ConsumerGroups(ctx, queue)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(gs, func(g job.ConsumerGroup) bool { return g.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("consumer group %s of queue %s: %w", name, queue, job.ErrNotFound)
	}
	return &gs[i], nil
}

// laneQueues is the lanes of consumer group name of queues, each of which
// must have it (job.ErrNotFound otherwise). Known lanes are kept (see
// laneCache), so that a fetch looks a lane up once.
func (e *Engine) laneQueues(ctx context.Context, queues []string, name string) ([]string, error) {
	lanes := make([]string, len(queues))
	for i, q := range queues {
		lane := job.LaneName(q, name)
		lanes[i] = lane
		if e.lanes.has(lane) {
			continue
		}
		gen := e.lanes.generation()
		if _, err := e.ConsumerGroup(ctx, q, name); err != nil {
			if errors.Is(err, job.ErrNotFound) {
				return nil, &NotFoundError{Field: "consumer_group", Err: err}
			}
			return nil, err
		}
		e.lanes.put(lane, gen)
	}
	return lanes, nil
}

// validQueueOrLane reports whether name is a queue's, or the lane of a
// consumer group of one.
func validQueueOrLane(name string) bool {
	if queue, group, ok := job.SplitLane(name); ok {
		return job.ValidName(queue) && job.ValidName(group)
	}
	return job.ValidName(name)
}

// NotFoundError is a job.ErrNotFound that names the field of the request
// that named what was not found.
type NotFoundError struct {
	Field string
	Err   error
}

func (e *NotFoundError) Error() string { return e.Err.Error() }

// Unwrap returns the error, which wraps job.ErrNotFound.
func (e *NotFoundError) Unwrap() error { return e.Err }
