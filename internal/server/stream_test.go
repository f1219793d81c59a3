package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/stream"
)

// Stopping the server closes its streams, which http.Server.Shutdown does
// not track: the call in flight returns, later calls fail, and Stop does
// not wait for the stream's client to leave.
func TestStopClosesStreams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := stream.Dial(ctx, stream.Config{URL: b.base})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if a, err := c.Do(ctx, "POST", "/v1/jobs", []byte(`{"queue":"s","kind":"k"}`)); err != nil || a.Status != http.StatusCreated {
		t.Fatalf("enqueue over the stream: %v %d %s", err, a.Status, a.Body)
	}
	type result struct {
		a   stream.Answer
		err error
	}
	polled := make(chan result, 1)
	go func() {
		a, err := c.Do(ctx, "POST", "/v1/fetch", []byte(`{"queues":["empty"],"wait_ms":30000}`))
		polled <- result{a, err}
	}()
	b.waitFor("the fetch to park", 5*time.Second, func() bool { return b.srv.Engine().Waiting() == 1 })

	began := time.Now()
	b.stop()
	if took := time.Since(began); took > 3*time.Second {
		t.Fatalf("stop took %v with a stream open", took)
	}
	select {
	case r := <-polled:
		// The parked fetch ends as over HTTP: answered with no jobs, or as
		// a request cancelled before it was served when the stream's close
		// reaches it first, unless the connection closed before any answer.
		noJobs := r.a.Status == http.StatusOK && string(r.a.Body) == "{\"jobs\":[]}\n"
		cancelled := r.a.Status == http.StatusServiceUnavailable && strings.Contains(string(r.a.Body), `"code":"unavailable"`)
		if r.err == nil && !noJobs && !cancelled {
			t.Fatalf("the fetch in flight: %d %s", r.a.Status, r.a.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fetch in flight did not return")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the stream is still open after Stop")
	}
	if _, err := c.Do(ctx, "GET", "/healthz", nil); err == nil {
		t.Fatal("a call on the closed stream succeeded")
	}
}
