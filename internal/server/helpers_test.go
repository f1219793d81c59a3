package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
)

// bundle is one real server on a real SQLite file, reached over HTTP.
type bundle struct {
	t    *testing.T
	srv  *Server
	cfg  config.Config
	base string
}

// setup starts a server on a fresh data folder and a free loopback port;
// change adjusts its config first.
func setup(t *testing.T, change ...func(*config.Config)) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	for _, c := range change {
		c(&cfg)
	}
	return start(t, cfg)
}

func start(t *testing.T, cfg config.Config) *bundle {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := New(cfg, logger)
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	b := &bundle{t: t, srv: srv, cfg: cfg, base: "http://" + srv.Addr()}
	t.Cleanup(func() { b.stop() })
	return b
}

func (b *bundle) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Stop(ctx); err != nil {
		b.t.Errorf("stop server: %v", err)
	}
}

// restart stops the server and starts a new one on the same data folder.
func (b *bundle) restart() *bundle {
	b.t.Helper()
	b.stop()
	cfg := b.cfg
	return start(b.t, cfg)
}

// obj is a decoded JSON object.
type obj = map[string]any

// call sends a request and decodes the JSON answer (nil for an empty body).
func (b *bundle) call(method, path string, body any) (int, obj) {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	default:
		data, err := json.Marshal(v)
		if err != nil {
			b.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return resp.StatusCode, nil
	}
	var out obj
	if err := json.Unmarshal(data, &out); err != nil {
		b.t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, data)
	}
	return resp.StatusCode, out
}

// must sends a request and fails the test unless the status is want.
func (b *bundle) must(want int, method, path string, body any) obj {
	b.t.Helper()
	status, out := b.call(method, path, body)
	if status != want {
		b.t.Fatalf("%s %s: status %d, want %d; body %v", method, path, status, want, out)
	}
	return out
}

// enqueue enqueues one job and returns its id.
func (b *bundle) enqueue(job obj) string {
	b.t.Helper()
	status, out := b.call("POST", "/v1/jobs", job)
	if status != http.StatusCreated {
		b.t.Fatalf("enqueue %v: status %d, body %v", job, status, out)
	}
	return out["id"].(string)
}

// fetch leases up to max jobs of queue, waiting up to wait.
func (b *bundle) fetch(queue string, max int, wait time.Duration) []obj {
	b.t.Helper()
	out := b.must(200, "POST", "/v1/fetch", obj{"queues": []string{queue}, "max": max, "wait_ms": wait.Milliseconds()})
	return objs(out["jobs"])
}

// get returns a job by id.
func (b *bundle) get(id string) obj {
	b.t.Helper()
	return b.must(200, "GET", "/v1/jobs/"+id, nil)
}

// counts returns the per-state counts of a queue.
func (b *bundle) counts(queue string) map[string]int {
	b.t.Helper()
	out := b.must(200, "GET", "/v1/queues/"+queue, nil)
	counts := map[string]int{}
	for k, v := range out["counts"].(obj) {
		counts[k] = int(v.(float64))
	}
	return counts
}

// waitFor polls cond until it holds or the time runs out.
func (b *bundle) waitFor(what string, limit time.Duration, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func objs(v any) []obj {
	list, _ := v.([]any)
	out := make([]obj, len(list))
	for i, x := range list {
		out[i] = x.(obj)
	}
	return out
}

func token(j obj) float64 {
	lease, ok := j["lease"].(obj)
	if !ok {
		panic(fmt.Sprintf("job %v has no lease", j["id"]))
	}
	return lease["token"].(float64)
}

func errorCode(out obj) string {
	e, _ := out["error"].(obj)
	code, _ := e["code"].(string)
	return code
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %v: %v", v, err)
	}
	return ts
}
