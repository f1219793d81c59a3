package client

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// WorkerInfo is a worker a server has seen fetch (a FetchParams.Worker,
// such as a Worker's WorkerConfig.Name), and what it holds.
type WorkerInfo struct {
	// Name is the worker's name as its fetches give it.
	Name string `json:"name"`
	// FirstSeenAt is when the server first saw it fetch, since the server
	// started or last forgot it.
	FirstSeenAt time.Time `json:"first_seen_at"`
	// LastSeenAt is when the server last saw one of its fetches begin.
	LastSeenAt time.Time `json:"last_seen_at"`
	// Active is how many active jobs the worker holds (List with State
	// StateActive and Worker lists them).
	Active int `json:"active"`
}

// Workers lists the workers the server has seen fetch (GET /v1/workers),
// sorted by name, with how many active jobs each holds. Each server node
// keeps its own list, in memory, of at most 10,000 workers, forgetting the
// one seen least recently first: a restart empties it, and a worker that
// fetches from other nodes only is missing. With auth on, a token limited
// to namespaces gets ErrForbidden: the list spans every namespace.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	var out struct {
		Workers []WorkerInfo `json:"workers"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/workers", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return out.Workers, nil
}
