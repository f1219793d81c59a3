package client

import (
	"context"
	"fmt"
	"net/http"
)

// Queue is a queue, its settings and how many of its jobs are in each
// state. A queue exists once a job was enqueued into it, it was paused, or
// its durability, limits or settings were set.
type Queue struct {
	// Name is the queue's name.
	Name string `json:"name"`
	// Paused reports that fetches hand out none of the queue's jobs.
	Paused bool `json:"paused"`
	// Durability is the level of the jobs enqueued into the queue without
	// one of their own: DurabilityFull unless set.
	Durability Durability `json:"durability"`
	// Limits are the queue's flow control; zero when it has none (see
	// Client.SetQueueLimits).
	Limits Limits `json:"limits,omitzero"`
	// Settings are the queue's dead-letter queue, maximum wait and job
	// defaults; zero when it has none (see Client.SetQueueSettings).
	Settings QueueSettings `json:"settings,omitzero"`
	// Counts is how many jobs are in each state.
	Counts QueueCounts `json:"counts"`
}

// QueueCounts is how many jobs of a queue are in each state.
type QueueCounts struct {
	// Scheduled counts jobs waiting for their run time.
	Scheduled int `json:"scheduled"`
	// Available counts jobs ready to be fetched.
	Available int `json:"available"`
	// Active counts jobs leased to workers.
	Active int `json:"active"`
	// Retrying counts failed jobs waiting out their backoff.
	Retrying int `json:"retrying"`
	// Completed counts acked jobs not yet pruned.
	Completed int `json:"completed"`
	// Dead counts jobs that used up their attempts or failed for good.
	Dead int `json:"dead"`
	// Cancelled counts cancelled jobs not yet pruned.
	Cancelled int `json:"cancelled"`
}

// Queues lists every queue with its counts (GET /v1/queues).
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	var out struct {
		Queues []Queue `json:"queues"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/queues", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out.Queues, nil
}

// Queue returns one queue (GET /v1/queues/{name}), or an error matching
// ErrNotFound.
func (c *Client) Queue(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodGet, name, "", nil, &q); err != nil {
		return nil, fmt.Errorf("get queue %s: %w", name, err)
	}
	return &q, nil
}

// PauseQueue stops fetches from handing out the queue's jobs (POST
// /v1/queues/{name}/pause) and returns the queue. Active jobs run on;
// enqueues still succeed. Pausing a queue that holds no jobs creates it.
func (c *Client) PauseQueue(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPost, name, "/pause", nil, &q); err != nil {
		return nil, fmt.Errorf("pause queue %s: %w", name, err)
	}
	return &q, nil
}

// ResumeQueue undoes PauseQueue (POST /v1/queues/{name}/resume) and returns
// the queue; parked fetches wake at once.
func (c *Client) ResumeQueue(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPost, name, "/resume", nil, &q); err != nil {
		return nil, fmt.Errorf("resume queue %s: %w", name, err)
	}
	return &q, nil
}

// SetQueueDurability sets the level of the jobs later enqueued into the
// queue without one of their own (POST /v1/queues/{name}/durability) and
// returns the queue. Jobs already in the queue keep theirs. Setting the
// level of a queue that holds no jobs creates it. An unknown level gives
// ErrInvalidArgument with Field "durability".
func (c *Client) SetQueueDurability(ctx context.Context, name string, d Durability) (*Queue, error) {
	body := struct {
		Durability Durability `json:"durability"`
	}{Durability: d}
	var q Queue
	if err := c.queueCall(ctx, http.MethodPost, name, "/durability", body, &q); err != nil {
		return nil, fmt.Errorf("set durability of queue %s: %w", name, err)
	}
	return &q, nil
}

// PurgeQueue deletes the queue's available jobs (POST
// /v1/queues/{name}/purge) and returns how many it deleted.
func (c *Client) PurgeQueue(ctx context.Context, name string) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	if err := c.queueCall(ctx, http.MethodPost, name, "/purge", nil, &out); err != nil {
		return 0, fmt.Errorf("purge queue %s: %w", name, err)
	}
	return out.Count, nil
}

// RetryQueueJobs retries every job of the queue in state — dead,
// cancelled, retrying or scheduled (POST /v1/queues/{name}/retry) — as
// Retry does one, and returns how many it moved. Other states give
// ErrInvalidArgument.
func (c *Client) RetryQueueJobs(ctx context.Context, name string, state State) (int, error) {
	n, err := c.bulk(ctx, name, "/retry", state)
	if err != nil {
		return 0, fmt.Errorf("retry %s jobs of queue %s: %w", state, name, err)
	}
	return n, nil
}

// DeleteQueueJobs deletes every job of the queue in state (POST
// /v1/queues/{name}/delete) and returns how many it deleted. Active jobs
// cannot be deleted (ErrInvalidArgument): cancel them first.
func (c *Client) DeleteQueueJobs(ctx context.Context, name string, state State) (int, error) {
	n, err := c.bulk(ctx, name, "/delete", state)
	if err != nil {
		return 0, fmt.Errorf("delete %s jobs of queue %s: %w", state, name, err)
	}
	return n, nil
}

func (c *Client) bulk(ctx context.Context, name, action string, state State) (int, error) {
	body := struct {
		State State `json:"state"`
	}{State: state}
	var out struct {
		Count int `json:"count"`
	}
	if err := c.queueCall(ctx, http.MethodPost, name, action, body, &out); err != nil {
		return 0, err
	}
	return out.Count, nil
}

// queueCall sends a request to one queue's resource.
func (c *Client) queueCall(ctx context.Context, method, name, action string, body, out any) error {
	if err := checkQueue(name); err != nil {
		return err
	}
	return c.do(ctx, method, queuePath(name, action), nil, body, out)
}
