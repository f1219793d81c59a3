package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// ListParams filters and pages a job listing. Zero values do not filter.
type ListParams struct {
	// Queue limits the listing to one queue.
	Queue string
	// ConsumerGroup lists the jobs of that consumer group of Queue
	// instead of the queue's own.
	ConsumerGroup string
	// State limits the listing to one state.
	State State
	// Worker, with State StateActive only, lists the active jobs that
	// worker holds: those whose Job.Worker is its name (at most 256
	// bytes; with another State the server answers ErrInvalidArgument).
	Worker string
	// Cursor continues a listing where a previous page ended (its
	// NextCursor); empty starts from the beginning.
	Cursor string
	// Limit is the page size: 1 to 1000. Defaults to 100.
	Limit int
}

// JobPage is one page of a job listing, in enqueue order.
type JobPage struct {
	// Jobs are the page's jobs.
	Jobs []*Job `json:"jobs"`
	// NextCursor is passed back as ListParams.Cursor for the next page; it
	// is empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// Get returns one job (GET /v1/jobs/{id}), or an error matching
// ErrNotFound.
func (c *Client) Get(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	var j Job
	if err := c.do(ctx, http.MethodGet, jobPath(id, ""), nil, nil, &j); err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return &j, nil
}

// List returns one page of jobs (GET /v1/jobs) in enqueue order. ListAll
// walks every page.
func (c *Client) List(ctx context.Context, p ListParams) (*JobPage, error) {
	q := url.Values{}
	if p.Queue != "" {
		q.Set("queue", p.Queue)
	}
	if p.ConsumerGroup != "" {
		q.Set("consumer_group", p.ConsumerGroup)
	}
	if p.State != "" {
		q.Set("state", string(p.State))
	}
	if p.Worker != "" {
		q.Set("worker", p.Worker)
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	var page JobPage
	if err := c.do(ctx, http.MethodGet, "/v1/jobs", q, nil, &page); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return &page, nil
}

// ListAll iterates over every job matching p, from p.Cursor on, fetching
// pages of p.Limit as it goes. On an error it yields (nil, err) once and
// stops; breaking out of the loop stops fetching. Jobs enqueued during the
// walk may or may not appear.
//
//	for j, err := range c.ListAll(ctx, client.ListParams{Queue: "emails"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(j.ID, j.State)
//	}
func (c *Client) ListAll(ctx context.Context, p ListParams) iter.Seq2[*Job, error] {
	return func(yield func(*Job, error) bool) {
		for {
			page, err := c.List(ctx, p)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, j := range page.Jobs {
				if !yield(j, nil) {
					return
				}
			}
			if page.NextCursor == "" || page.NextCursor == p.Cursor {
				return
			}
			p.Cursor = page.NextCursor
		}
	}
}

// Cancel cancels a job (POST /v1/jobs/{id}/cancel) and returns it as it is
// after the call. A scheduled, available or retrying job is cancelled at
// once; an active job gets CancelRequested, its worker learns of it at its
// next heartbeat or ack, and it ends cancelled. Cancelling a cancelled job
// changes nothing; a completed or dead job gives ErrInvalidState.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	var j Job
	if err := c.do(ctx, http.MethodPost, jobPath(id, "/cancel"), nil, nil, &j); err != nil {
		return nil, fmt.Errorf("cancel job %s: %w", id, err)
	}
	return &j, nil
}

// Retry makes a dead, cancelled, retrying or scheduled job available now
// with its attempt count reset to 0 (POST /v1/jobs/{id}/retry) and returns
// it. Other states give ErrInvalidState.
func (c *Client) Retry(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("retry job %s: %w", id, err)
	}
	var j Job
	if err := c.do(ctx, http.MethodPost, jobPath(id, "/retry"), nil, nil, &j); err != nil {
		return nil, fmt.Errorf("retry job %s: %w", id, err)
	}
	return &j, nil
}

// Delete removes a job (DELETE /v1/jobs/{id}). An active job gives
// ErrInvalidState: cancel it first.
func (c *Client) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return fmt.Errorf("delete job %s: %w", id, err)
	}
	if err := c.do(ctx, http.MethodDelete, jobPath(id, ""), nil, nil, nil); err != nil {
		return fmt.Errorf("delete job %s: %w", id, err)
	}
	return nil
}
