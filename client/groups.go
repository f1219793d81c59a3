package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// GroupStart says which jobs of its queue a consumer group starts with
// (or, in a seek, moves to).
type GroupStart struct {
	// Start is "beginning" (every job the queue still holds, finished
	// ones included; the default), "new" (only the jobs enqueued from now
	// on) or "time" (the jobs enqueued at or after From).
	Start string `json:"start,omitempty"`
	// From is the first enqueue time for Start "time".
	From *time.Time `json:"from,omitempty"`
}

// FromBeginning, FromNew and FromTime are the starts of a consumer group.
var (
	FromBeginning = GroupStart{Start: "beginning"}
	FromNew       = GroupStart{Start: "new"}
)

// FromTime starts a consumer group with the jobs enqueued at or after t.
func FromTime(t time.Time) GroupStart { return GroupStart{Start: "time", From: &t} }

// ConsumerGroup is a consumer group of a queue and how far behind it is.
type ConsumerGroup struct {
	Queue     string    `json:"queue"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	// Counts has the group's jobs in every state.
	Counts QueueCounts `json:"counts"`
	// Pending is how many jobs the group has not finished.
	Pending int64 `json:"pending"`
	// OldestPendingAt is when the oldest of them was enqueued; nil when it
	// has finished them all. LagMS is its age in milliseconds.
	OldestPendingAt *time.Time `json:"oldest_pending_at,omitempty"`
	LagMS           int64      `json:"lag_ms"`
	// Replayed is, after SeekConsumerGroup, how many copies the seek made:
	// one for each job of the queue the server still holds from the start
	// named, finished ones included; 0 for a seek to new jobs.
	Replayed int `json:"replayed,omitempty"`
}

// Lag is how far the group is behind: the age of the oldest job it has
// not finished.
func (g *ConsumerGroup) Lag() time.Duration { return time.Duration(g.LagMS) * time.Millisecond }

func groupPath(queue, name, suffix string) string {
	return queuePath(queue, "/consumer-groups/"+url.PathEscape(name)+suffix)
}

// CreateConsumerGroup creates consumer group name of queue (PUT
// /v1/queues/{name}/consumer-groups/{group}). The consumer group receives
// every job of the queue as a copy of its own, with its own leases,
// attempts, retries and outcome: run them with FetchParams.ConsumerGroup or
// WorkerConfig.ConsumerGroup, and ack or fail them like any job. It starts
// with the jobs start names and then receives every job enqueued; in an
// ordered queue it keeps its own place in every group of jobs
// (EnqueueParams.Group). created is false when the consumer group existed,
// which changes nothing (see SeekConsumerGroup to move it).
func (c *Client) CreateConsumerGroup(ctx context.Context, queue, name string, start GroupStart) (g *ConsumerGroup, created bool, err error) {
	if err := checkQueue(queue); err != nil {
		return nil, false, err
	}
	g = &ConsumerGroup{}
	status, err := c.call(ctx, http.MethodPut, groupPath(queue, name, ""), nil, start, g)
	if err != nil {
		return nil, false, fmt.Errorf("create consumer group %s of %s: %w", name, queue, err)
	}
	return g, status == http.StatusCreated, nil
}

// SeekConsumerGroup moves consumer group name of queue to start (POST
// .../seek): the jobs it holds are dropped (those out with its workers
// too, whose calls then get ErrNotFound) and it receives a copy of each
// job of the queue from there on, finished ones included. The answer's
// Replayed says how many.
func (c *Client) SeekConsumerGroup(ctx context.Context, queue, name string, start GroupStart) (*ConsumerGroup, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	var g ConsumerGroup
	if err := c.do(ctx, http.MethodPost, groupPath(queue, name, "/seek"), nil, start, &g); err != nil {
		return nil, fmt.Errorf("seek consumer group %s of %s: %w", name, queue, err)
	}
	return &g, nil
}

// ConsumerGroup returns one consumer group of queue with its lag, or
// ErrNotFound.
func (c *Client) ConsumerGroup(ctx context.Context, queue, name string) (*ConsumerGroup, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	var g ConsumerGroup
	if err := c.do(ctx, http.MethodGet, groupPath(queue, name, ""), nil, nil, &g); err != nil {
		return nil, fmt.Errorf("get consumer group %s of %s: %w", name, queue, err)
	}
	return &g, nil
}

// ConsumerGroups lists the consumer groups of queue by name, with their
// lag.
func (c *Client) ConsumerGroups(ctx context.Context, queue string) ([]ConsumerGroup, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	var out struct {
		ConsumerGroups []ConsumerGroup `json:"consumer_groups"`
	}
	if err := c.do(ctx, http.MethodGet, queuePath(queue, "/consumer-groups"), nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list consumer groups of %s: %w", queue, err)
	}
	return out.ConsumerGroups, nil
}

// DeleteConsumerGroup deletes consumer group name of queue and every job
// it holds; ErrNotFound for an unknown one.
func (c *Client) DeleteConsumerGroup(ctx context.Context, queue, name string) error {
	if err := checkQueue(queue); err != nil {
		return err
	}
	if err := c.do(ctx, http.MethodDelete, groupPath(queue, name, ""), nil, nil, nil); err != nil {
		return fmt.Errorf("delete consumer group %s of %s: %w", name, queue, err)
	}
	return nil
}
