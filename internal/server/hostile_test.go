package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/config"
)

// These tests attack a real server on a real port with hostile input and
// hostile clients, and check that each gets a clear answer while other
// clients are served as usual.

// startHostile starts a server whose header timeout is headerTimeout.
func startHostile(t *testing.T, headerTimeout time.Duration, change ...func(*config.Config)) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Data = t.TempDir()
	for _, c := range change {
		c(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv.headerTimeout = headerTimeout
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("start server: %v", err)
	}
	b := &bundle{t: t, srv: srv, cfg: cfg, base: "http://" + srv.Addr()}
	t.Cleanup(b.stop)
	return b
}

// errorCodeOf returns the code of an error answer, or "".
func errorCodeOf(body obj) string {
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// served checks that a normal client still enqueues, fetches and acks,
// each call within limit.
func (b *bundle) served(limit time.Duration, queue string) {
	b.t.Helper()
	for _, step := range []func() (string, int, obj){
		func() (string, int, obj) {
			s, o := b.call("POST", "/v1/jobs", map[string]any{"queue": queue, "kind": "k"})
			return "enqueue", s, o
		},
		func() (string, int, obj) {
			s, o := b.call("POST", "/v1/fetch", map[string]any{"queues": []string{queue}})
			return "fetch", s, o
		},
	} {
		start := time.Now()
		what, status, out := step()
		if took := time.Since(start); status >= 300 || took > limit {
			b.t.Fatalf("%s took %v and answered %d %v; want a 2xx within %v", what, took, status, out, limit)
		}
	}
}

func TestHostileJSON(t *testing.T) {
	t.Parallel()
	b := setup(t)
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	for _, c := range []struct {
		name, path, body string
		code, field      string
	}{
		{"deep payload", "/v1/jobs", `{"kind":"k","payload":` + deep + `}`, "invalid_json", ""},
		{"deep body", "/v1/jobs", deep, "invalid_json", ""},
		{"deep object", "/v1/fetch", strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000), "invalid_json", ""},
		{"invalid UTF-8 in a name", "/v1/jobs", "{\"kind\":\"k\xff\"}", "invalid_json", ""},
		{"invalid UTF-8 in a payload", "/v1/jobs", "{\"kind\":\"k\",\"payload\":\"\xc3\x28\"}", "invalid_json", ""},
		{"lone surrogate in a name", "/v1/jobs", `{"kind":"\ud800"}`, "invalid_argument", "kind"},
		{"1e400 in an int", "/v1/jobs", `{"kind":"k","priority":1e400}`, "invalid_json", "priority"},
		{"2^70 in an int", "/v1/jobs", `{"kind":"k","max_attempts":1180591620717411303424}`, "invalid_json", "max_attempts"},
		{"2^70 in a duration", "/v1/jobs", `{"kind":"k","delay_ms":1180591620717411303424}`, "invalid_json", "delay_ms"},
		{"1e400 in a float", "/v1/jobs", `{"kind":"k","backoff":{"jitter":1e400}}`, "invalid_json", "backoff.jitter"},
		{"max int64 delay", "/v1/jobs", `{"kind":"k","delay_ms":9223372036854775807}`, "invalid_argument", "delay_ms"},
		{"2^70 token", "/v1/jobs/x/ack", `{"token":1180591620717411303424}`, "invalid_json", "token"},
		{"1e400 wait", "/v1/fetch", `{"queues":["q"],"wait_ms":1e400}`, "invalid_json", "wait_ms"},
		{"NUL in a name", "/v1/jobs", `{"kind":"k\u0000"}`, "invalid_argument", "kind"},
		{"case-folded key", "/v1/jobs", `{"KIND":"k"}`, "invalid_json", "KIND"},
		{"null field", "/v1/jobs", `{"kind":"k","queue":null}`, "invalid_json", "queue"},
	} {
		status, out := b.call("POST", c.path, c.body)
		if status != http.StatusBadRequest || errorCodeOf(out) != c.code {
			t.Errorf("%s: %d %v, want 400 %s", c.name, status, out, c.code)
			continue
		}
		if field, _ := out["error"].(map[string]any)["field"].(string); field != c.field {
			t.Errorf("%s: field %q, want %q", c.name, field, c.field)
		}
	}
	b.served(5*time.Second, "after-hostile-json")
}

// A body over the limit is refused with 413 after at most the limit is
// read, whether its length is declared or streamed, and the server's
// memory grows by about the limit, not the body.
func TestHostileOversizedBody(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	const limit = 1 << 20
	const huge = 200 << 20
	b := setup(t, func(c *config.Config) { c.MaxBodyBytes = limit; c.MaxPayloadBytes = limit })
	for _, declared := range []bool{true, false} {
		var sent atomic.Int64
		body := &endlessBody{left: huge, sent: &sent}
		req, err := http.NewRequest("POST", b.base+"/v1/jobs", body)
		if err != nil {
			t.Fatal(err)
		}
		if declared {
			req.ContentLength = huge
		} else {
			req.ContentLength = -1 // chunked
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("declared %v: %v", declared, err)
		}
		data, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		runtime.ReadMemStats(&after)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(data, []byte("payload_too_large")) {
			t.Errorf("declared %v: %d %s, want 413 payload_too_large", declared, resp.StatusCode, data)
		}
		grew := after.TotalAlloc - before.TotalAlloc
		t.Logf("declared %v: answered in %v after the client sent %d MiB; the process allocated %d MiB",
			declared, time.Since(start).Round(time.Millisecond), sent.Load()>>20, grew>>20)
		if sent.Load() > huge/4 {
			t.Errorf("declared %v: the client got to send %d MiB of a %d MiB body before the answer", declared, sent.Load()>>20, huge>>20)
		}
		if grew > 16<<20 {
			t.Errorf("declared %v: the process allocated %d MiB for a body limited to %d MiB", declared, grew>>20, limit>>20)
		}
	}
	b.served(5*time.Second, "after-oversized")
}

// endlessBody is a request body of left bytes of JSON-ish filler, made as
// it is read.
type endlessBody struct {
	left int64
	sent *atomic.Int64
}

func (e *endlessBody) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), e.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	if e.sent.Load() == 0 && n > 0 {
		p[0] = '{'
	}
	e.left -= n
	e.sent.Add(n)
	return int(n), nil
}

// Clients that send their headers slower than the header timeout are cut
// off, while a normal client is served at its usual pace.
func TestHostileSlowHeaders(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	b := startHostile(t, timeout)
	const slow = 50
	var wg sync.WaitGroup
	cut := make(chan time.Duration, slow)
	for range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", b.srv.Addr())
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer conn.Close()
			start := time.Now()
			head := "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Padding: " + strings.Repeat("x", 200) + "\r\n\r\n"
			for i := 0; i < len(head); i++ {
				if _, err := conn.Write([]byte{head[i]}); err != nil {
					cut <- time.Since(start)
					return
				}
				time.Sleep(20 * time.Millisecond)
				if time.Since(start) > 20*timeout {
					break
				}
			}
			// The writes may all land in socket buffers; the server's
			// close shows on the read side.
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = conn.Read(make([]byte, 1))
			if err == nil {
				t.Error("a slow client got an answer instead of being cut off")
			}
			cut <- time.Since(start)
		}()
	}
	for i := 0; i < 10; i++ {
		b.served(time.Second, fmt.Sprintf("beside-slow-%d", i))
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	close(cut)
	for d := range cut {
		if d > 20*timeout {
			t.Errorf("a slow client held its connection for %v with a header timeout of %v", d, timeout)
		}
	}
}

// raiseFileLimit lifts the process's open file limit to at least n, or
// skips the test when the hard limit forbids it.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("read the file limit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("the hard file limit %d is below the %d this test needs", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("raise the file limit: %v", err)
	}
}

// Thousands of idle connections, some never sending a byte and some idle
// between requests, do not slow a normal client down.
func TestHostileIdleConnections(t *testing.T) {
	// Not parallel: thousands of connections load the machine, which would
	// disturb the timing of other tests and this test's own latency figure.
	const idle = 3000
	// Both ends of every connection live in this process.
	raiseFileLimit(t, 2*idle+1024)
	b := setup(t)
	conns := make([]net.Conn, 0, idle)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := range idle {
		conn, err := net.Dial("tcp", b.srv.Addr())
		if err != nil {
			t.Fatalf("dial connection %d: %v", i, err)
		}
		conns = append(conns, conn)
		if i%2 == 1 {
			continue // never sends a byte
		}
		// One request, then idle with keep-alive.
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"); err != nil {
			t.Fatalf("request on connection %d: %v", i, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("answer on connection %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("health on connection %d: %d", i, resp.StatusCode)
		}
	}
	var worst time.Duration
	for i := 0; i < 20; i++ {
		start := time.Now()
		b.served(time.Second, "beside-idle")
		worst = max(worst, time.Since(start))
	}
	t.Logf("%d idle connections open; slowest enqueue+fetch pair took %v", idle, worst)
	// Every idle connection is still open: the server dropped none.
	alive := 0
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) {
			continue
		}
		alive++
	}
	if alive < idle {
		t.Errorf("%d of %d idle connections were dropped within their timeouts", idle-alive, idle)
	}
}

// Answers to hostile input are the protocol's error bodies.
func TestHostileAnswersAreErrorBodies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req, err := http.NewRequest("POST", b.base+"/v1/jobs", strings.NewReader(`{"kind":`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code, Message string
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer: %v, Content-Type %q", err, resp.Header.Get("Content-Type"))
	}
	if resp.StatusCode != 400 || body.Error.Code != "invalid_json" || body.Error.Message == "" {
		t.Fatalf("truncated body: %d %+v", resp.StatusCode, body)
	}
}
