package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Rate bounds job starts: at most Limit starts in any window of Period.
// The server holds it exactly, over a sliding window: a job starts only
// at a moment when fewer than Limit jobs started in the Period before
// it. A start is a hand-out by a fetch, so a job handed out again counts
// again. The zero Rate sets no limit. Period is a time.Duration here and
// milliseconds (period_ms) on the wire; Rate's JSON methods convert.
type Rate struct {
	// Limit is the most starts in any window: 1 to 100,000. For a faster
	// rate, take a shorter Period.
	Limit int
	// Period is the window: 1 ms to 24 h, in whole milliseconds (a
	// fraction of a millisecond is rounded up).
	Period time.Duration
}

// IsZero reports whether r sets no limit.
func (r Rate) IsZero() bool { return r.Limit == 0 && r.Period == 0 }

// wireRate is Rate on the wire.
type wireRate struct {
	Limit    int   `json:"limit"`
	PeriodMS int64 `json:"period_ms"`
}

// MarshalJSON encodes r in the protocol's form.
func (r Rate) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireRate{Limit: r.Limit, PeriodMS: msec(r.Period)})
}

// UnmarshalJSON decodes the protocol's form of a rate.
func (r *Rate) UnmarshalJSON(data []byte) error {
	var w wireRate
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*r = Rate{Limit: w.Limit, Period: time.Duration(w.PeriodMS) * time.Millisecond}
	return nil
}

// Limits are a queue's flow control (docs/protocol.md, "Flow control"):
// rates and caps for the whole queue and for each group of its jobs (see
// EnqueueParams.Group), the jobs without a group counting as one group.
// A zero field sets no limit; the zero Limits set none. They hold across
// every node that shares the server's store; a job starts only when every
// limit that applies lets it, and one held back stays available, so a
// fetch may get fewer jobs than it asked for.
type Limits struct {
	// Rate bounds the starts of the queue's jobs.
	Rate Rate `json:"rate,omitzero"`
	// MaxActive bounds the queue's jobs active (leased) at once: 1 to
	// 1,000,000. A place frees when a job is acked, failed or released, or
	// when its lease runs out.
	MaxActive int `json:"max_active,omitempty"`
	// GroupRate bounds the starts of each group's jobs, every group on its
	// own.
	GroupRate Rate `json:"group_rate,omitzero"`
	// GroupMaxActive bounds each group's jobs active at once: 1 to
	// 1,000,000; 1 runs a group's jobs one at a time.
	GroupMaxActive int `json:"group_max_active,omitempty"`
	// Ordered makes every group ordered: its jobs run one at a time in
	// enqueue order, and a job that failed or whose lease ran out holds
	// its group until it completes, dies or is cancelled, so that a
	// group's jobs finish in order. GroupMaxActive is then 1 (the
	// server sets it).
	Ordered bool `json:"ordered,omitempty"`
}

// IsZero reports whether l sets no limit.
func (l Limits) IsZero() bool {
	return l.Rate.IsZero() && l.MaxActive == 0 && l.GroupRate.IsZero() && l.GroupMaxActive == 0 && !l.Ordered
}

// SetQueueLimits replaces the queue's flow control with l, as a whole
// (PUT /v1/queues/{name}/limits), and returns the queue: a zero field of
// l removes that limit, and zero Limits remove them all. Fetches parked
// on the queue look again at once. Setting the limits of a queue that
// holds no jobs creates it. A value out of its range gives
// ErrInvalidArgument whose Field names it, such as "rate.limit" or
// "group_max_active", and changes nothing.
func (c *Client) SetQueueLimits(ctx context.Context, name string, l Limits) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodPut, name, "/limits", l, &q); err != nil {
		return nil, fmt.Errorf("set limits of queue %s: %w", name, err)
	}
	return &q, nil
}

// ClearQueueLimits removes the queue's flow control (DELETE
// /v1/queues/{name}/limits) and returns the queue. Its jobs still go out
// round-robin over their groups. Clearing the limits of a queue that
// holds no jobs creates it.
func (c *Client) ClearQueueLimits(ctx context.Context, name string) (*Queue, error) {
	var q Queue
	if err := c.queueCall(ctx, http.MethodDelete, name, "/limits", nil, &q); err != nil {
		return nil, fmt.Errorf("clear limits of queue %s: %w", name, err)
	}
	return &q, nil
}
