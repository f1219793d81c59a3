package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/loadgen"
)

// pending is how many jobs of q are not final yet.
func pending(q *client.Queue) int {
	c := q.Counts
	return c.Scheduled + c.Available + c.Active + c.Retrying
}

// waitDrained waits, up to limit, until queue holds no job that is not
// final (the consumers must still run). It returns the last counts seen.
func waitDrained(ctx context.Context, c *client.Client, queue string, limit time.Duration) (client.QueueCounts, error) {
	deadline := time.Now().Add(limit)
	var last client.QueueCounts
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		q, err := c.Queue(cctx, queue)
		cancel()
		if err == nil {
			last = q.Counts
			if pending(q) == 0 {
				return last, nil
			}
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("queue %s not drained within %v: counts %+v (last error %v)", queue, limit, last, err)
		}
		loadgen.Sleep(ctx, 100*time.Millisecond)
	}
}

// listStates lists every job of queue and returns each one's state.
func listStates(ctx context.Context, c *client.Client, queue string) (map[string]string, error) {
	out := map[string]string{}
	for j, err := range c.ListAll(ctx, client.ListParams{Queue: queue, Limit: 1000}) {
		if err != nil {
			return nil, fmt.Errorf("list jobs of %s: %w", queue, err)
		}
		out[j.ID] = string(j.State)
	}
	return out, nil
}
