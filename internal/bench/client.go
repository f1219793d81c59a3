package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/stream"
)

// requestTimeout bounds one request; a fetch long-polls for at most
// fetchWait of it.
const requestTimeout = 2 * time.Minute

// newHTTPClient returns a client that keeps a connection per concurrent
// caller alive for the whole run, so that no request pays for a dial.
func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

// post sends body to path and reads the answer into out (reset first),
// over HTTP or the stream of the run's transport. On success it records
// the latency from since in h (when h is set) and counts the request; a
// failure is counted as an error of the run unless ctx ended, which is the
// run stopping rather than the server failing.
func (r *runner) post(ctx context.Context, path string, body []byte, out *bytes.Buffer, h *Histogram, since time.Time) error {
	send := r.postHTTP
	if r.stream != nil {
		send = r.postStream
	}
	status, err := send(ctx, path, body, out)
	if err != nil {
		return r.fail(ctx, fmt.Errorf("POST %s: %w", path, err))
	}
	if status != http.StatusOK && status != http.StatusCreated {
		return r.fail(ctx, fmt.Errorf("POST %s: %d %s: %s", path, status, http.StatusText(status), bytes.TrimSpace(out.Bytes())))
	}
	if h != nil {
		h.Record(time.Since(since))
	}
	if r.inWindow.Load() {
		r.requests.Add(1)
	}
	return nil
}

// postHTTP sends one HTTP request and reads its answer into out.
func (r *runner) postHTTP(ctx context.Context, path string, body []byte, out *bytes.Buffer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, err
	}
	out.Reset()
	_, err = out.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, nil
}

// postStream sends one request frame on the run's stream and copies its
// answer into out.
func (r *runner) postStream(ctx context.Context, path string, body []byte, out *bytes.Buffer) (int, error) {
	a, err := r.stream.Do(r.streamDeadline.within(ctx), http.MethodPost, path, body)
	if err != nil {
		return 0, err
	}
	out.Reset()
	out.Write(a.Body)
	return a.Status, nil
}

// newStreamClient returns the stream of a run with TransportStream, dialled
// on its first request and again if it breaks.
func newStreamClient(base, auth string) *stream.Client {
	h := http.Header{}
	if auth != "" {
		h.Set("Authorization", auth)
	}
	return stream.NewClient(stream.Config{URL: base, Header: h})
}

// fail counts err as an error of the run, unless ctx has ended, and
// returns it.
func (r *runner) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.countError(err.Error())
	return err
}

// setLimits puts the run's limits on every queue before the load starts.
func (r *runner) setLimits(ctx context.Context) error {
	if r.o.Limits.IsZero() {
		return nil
	}
	body, err := json.Marshal(limitsBody(r.o.Limits))
	if err != nil {
		return fmt.Errorf("encode limits: %w", err)
	}
	for _, q := range r.queues {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, r.base+"/v1/queues/"+q+"/limits", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if r.auth != "" {
			req.Header.Set("Authorization", r.auth)
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return fmt.Errorf("set limits of %s: %w", q, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("set limits of %s: %d %s", q, resp.StatusCode, bytes.TrimSpace(answer))
		}
	}
	return nil
}

// limitsBody is the wire form of l.
func limitsBody(l job.Limits) map[string]any {
	out := map[string]any{}
	rate := func(name string, r job.Rate) {
		if !r.IsZero() {
			out[name] = map[string]any{"limit": r.Limit, "period_ms": r.Period.Milliseconds()}
		}
	}
	rate("rate", l.Rate)
	rate("group_rate", l.GroupRate)
	if l.MaxActive > 0 {
		out["max_active"] = l.MaxActive
	}
	if l.GroupMaxActive > 0 {
		out["group_max_active"] = l.GroupMaxActive
	}
	if l.Ordered {
		out["ordered"] = true
	}
	return out
}

// sharedDeadline gives the requests of a run a deadline without a timer
// each: the requests that start within half of requestTimeout share one
// context, which ends requestTimeout after the first of them started. So
// no request waits more than requestTimeout, and none less than half of
// it, while the load generator sets one timer a minute rather than one a
// request (a timer was about a tenth of its CPU at 50 producers).
type sharedDeadline struct {
	cur atomic.Pointer[deadlineContext]
}

// deadlineContext is a context that ends at deadline, made under parent.
type deadlineContext struct {
	parent   context.Context
	ctx      context.Context
	deadline time.Time
}

// within returns a context under parent that ends at least
// requestTimeout/2 from now and at most requestTimeout.
func (d *sharedDeadline) within(parent context.Context) context.Context {
	if c := d.cur.Load(); c != nil && c.parent == parent && time.Until(c.deadline) > requestTimeout/2 {
		return c.ctx
	}
	deadline := time.Now().Add(requestTimeout)
	ctx, cancel := context.WithDeadline(parent, deadline)
	context.AfterFunc(ctx, cancel) // releases it once it ends
	d.cur.Store(&deadlineContext{parent: parent, ctx: ctx, deadline: deadline})
	return ctx
}
