package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// awaitHold is how long one request of Await asks the server to hold it:
// the server's longest wait.
const awaitHold = 60 * time.Second

// Await returns job id once it is in a final state (completed, dead or
// cancelled), as long as ctx lets it wait. Each request asks the server
// to hold it until the job is final or a minute passes (GET
// /v1/jobs/{id}?wait_ms=), then asks again, so a wait costs a request a
// minute, not a poll. When ctx ends first it returns ctx's error, wrapped;
// a job that does not exist (or is deleted) gives an error matching
// ErrNotFound.
func (c *Client) Await(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("await job %s: %w", id, err)
	}
	for {
		hold := awaitHold
		if deadline, ok := ctx.Deadline(); ok {
			hold = min(hold, time.Until(deadline))
		}
		if hold <= 0 {
			return nil, fmt.Errorf("await job %s: %w", id, context.DeadlineExceeded)
		}
		var j Job
		q := url.Values{"wait_ms": {fmt.Sprint(hold.Milliseconds())}}
		if err := c.do(ctx, http.MethodGet, jobPath(id, ""), q, nil, &j); err != nil {
			return nil, fmt.Errorf("await job %s: %w", id, err)
		}
		if j.State.Final() {
			return &j, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("await job %s: %w", id, err)
		}
	}
}

// EnqueueAndWait enqueues a job (see Enqueue) and waits for it to reach a
// final state (see Await): a producer's call that returns the job's
// Result, or its Errors when it died. For a duplicate it waits for the
// existing job. ctx bounds the whole call.
func (c *Client) EnqueueAndWait(ctx context.Context, p EnqueueParams) (*Job, error) {
	res, err := c.Enqueue(ctx, p)
	if err != nil {
		return nil, err
	}
	return c.Await(ctx, res.ID)
}
