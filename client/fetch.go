package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// FetchParams asks for jobs to work on.
type FetchParams struct {
	// Queues to take jobs from, 1 to 100 names. Jobs come in priority
	// order, then by run time, then in enqueue order, across the queues.
	Queues []string
	// Max is the most jobs to lease: 1 to 1000. Defaults to 1.
	Max int
	// Wait makes the fetch a long poll: when no job is available the call
	// waits up to Wait (at most 60 s) and returns as soon as one is.
	// Defaults to 0 (answer at once).
	Wait time.Duration
	// Lease overrides each job's own lease duration for this hand-out
	// (100 ms to 24 h) when set.
	Lease time.Duration
	// Worker names the caller for display (at most 256 bytes).
	Worker string
	// ConsumerGroup, when set, takes the jobs of that consumer group of
	// each queue (see CreateConsumerGroup) instead of the queues' own;
	// every queue must have the group (ErrNotFound otherwise).
	ConsumerGroup string
	// Group, when set, takes only the jobs of that group
	// (EnqueueParams.Group: a tenant, or one group of an ordered queue),
	// never a job without a group: 1 to 256 bytes of Unicode
	// without NUL. The queues' limits and the group's hold as for any
	// fetch. Defaults to every group.
	Group string
	// Runs lets a free group of an ordered queue (none of its jobs active
	// or waiting out a retry) hand out several of its jobs at once, a run,
	// in claim order while each was enqueued after the one before it;
	// Max is shared round-robin over the free groups. Each job keeps its
	// own lease. Run a run's jobs one after another, in order, and stop
	// at the first that fails with retries left or is released: the
	// server has then sent the rest of the run back, and their acks get
	// ErrLeaseLost. A job that completes, dies or is cancelled lets the
	// run go on. Queues that are not ordered ignore it. Defaults to false:
	// an ordered group hands out one job at a time.
	Runs bool
	// MaxGroups, when set, takes the jobs of at most this many groups of
	// each queue (EnqueueParams.Group; the jobs without a group are one
	// group): 1 to 1000. With Runs, 1 takes one free group's run, up to
	// Max, whichever group, as a consumer takes one partition. Defaults to
	// 0: any number of groups.
	MaxGroups int
}

// Fetch leases up to p.Max jobs (POST /v1/fetch). Each job comes back
// active with its Lease; the caller must ack, fail, extend or release it
// with Lease.Token before the lease runs out, or the job is handed out
// again. With p.Wait the call long-polls; it may return no jobs (and a nil
// error) when the wait ends. Paused queues hand out nothing. A queue with
// flow control (see Limits) hands out only what its limits let start now,
// round-robin over its jobs' groups, after the queues without it, so the
// call may return fewer than p.Max jobs while more are available; a long
// poll on it also wakes when a place frees or a rate lets the next job
// start.
func (c *Client) Fetch(ctx context.Context, p FetchParams) ([]*Job, error) {
	body := struct {
		Queues    []string `json:"queues"`
		Max       int      `json:"max,omitempty"`
		WaitMS    int64    `json:"wait_ms,omitempty"`
		LeaseMS   int64    `json:"lease_ms,omitempty"`
		Worker    string   `json:"worker,omitempty"`
		CGroup    string   `json:"consumer_group,omitempty"`
		Group     string   `json:"group,omitempty"`
		Runs      bool     `json:"runs,omitempty"`
		MaxGroups int      `json:"max_groups,omitempty"`
	}{Queues: p.Queues, Max: p.Max, WaitMS: msec(p.Wait), LeaseMS: msec(p.Lease), Worker: p.Worker, CGroup: p.ConsumerGroup,
		Group: p.Group, Runs: p.Runs, MaxGroups: p.MaxGroups}
	if body.Queues == nil {
		body.Queues = []string{}
	}
	// The jobs decode into their wire form in one pass over the answer,
	// not through Job.UnmarshalJSON, which would scan each job again.
	var out struct {
		Jobs []wireJob `json:"jobs"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/fetch", nil, body, &out); err != nil {
		return nil, fmt.Errorf("fetch jobs: %w", err)
	}
	jobs := make([]Job, len(out.Jobs))
	ptrs := make([]*Job, len(out.Jobs))
	for i := range out.Jobs {
		out.Jobs[i].to(&jobs[i])
		ptrs[i] = &jobs[i]
	}
	return ptrs, nil
}
