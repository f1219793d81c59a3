package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// verifyTimeout bounds the count check after a run.
const verifyTimeout = 30 * time.Second

// queueAnswer is the part of GET /v1/queues/{name} the check reads.
type queueAnswer struct {
	Counts map[string]int64 `json:"counts"`
}

// verify reads the run's queues from the server and checks that every job
// the run enqueued is where the mode leaves it, once: completed after the
// worker modes, available after the enqueue modes. A mismatch counts as
// an error of the run.
func (r *runner) verify() {
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	v := &Verification{Expected: r.enqueued.Load(), Counts: map[string]int64{}}
	for _, q := range r.queues {
		counts, err := r.queueCounts(ctx, q)
		if err != nil {
			r.countError(fmt.Sprintf("verify: %v", err))
			return
		}
		for state, n := range counts {
			v.Counts[state] += n
		}
	}
	want := "completed"
	if !workerMode(r.o.Mode) {
		want = "available"
	}
	v.OK = v.Counts[want] == v.Expected
	var elsewhere int64
	for state, n := range v.Counts {
		if state != want {
			elsewhere += n
		}
	}
	v.OK = v.OK && elsewhere == 0
	if workerMode(r.o.Mode) && r.processed.Load() != v.Expected {
		v.OK = false
	}
	r.res.Verification = v
	if !v.OK {
		r.countError(fmt.Sprintf("verify: enqueued %d jobs and acked %d, but the server counts %v",
			v.Expected, r.processed.Load(), v.Counts))
	}
}

// queueCounts returns the job counts by state of queue q; a queue the
// server does not know holds no jobs.
func (r *runner) queueCounts(ctx context.Context, q string) (map[string]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/v1/queues/"+url.PathEscape(q), nil)
	if err != nil {
		return nil, err
	}
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET queue %s: %w", q, err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		return nil, fmt.Errorf("GET queue %s: read answer: %w", q, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET queue %s: %s: %s", q, resp.Status, bytes.TrimSpace(out.Bytes()))
	}
	var a queueAnswer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		return nil, fmt.Errorf("decode queue %s: %w", q, err)
	}
	return a.Counts, nil
}
