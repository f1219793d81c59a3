package streamserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spoolq/spool/internal/stream"
)

// echoBundle is a Server on a loopback port whose handler echoes each
// request, panics on /panic, and words errors as {"kind":…}.
type echoBundle struct {
	srv  *Server
	base string
	ctx  context.Context
}

// echoAnswer is what the test handler answers.
type echoAnswer struct {
	Method, Target, Auth, Body string
	InStream                   bool
}

func newEchoBundle(t *testing.T, maxBody int64) *echoBundle {
	t.Helper()
	var srv *Server
	writeError := func(w http.ResponseWriter, _ *http.Request, err error) {
		status := http.StatusInternalServerError
		if e, ok := err.(*Error); ok && e.Kind == FrameTooLarge {
			status = http.StatusRequestEntityTooLarge
		} else if ok && e.Kind == UpgradeRequired {
			status = http.StatusUpgradeRequired
		} else if ok && e.Kind == InvalidRequest {
			status = http.StatusBadRequest
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == stream.Path {
			srv.Open(w, r)
			return
		}
		if r.URL.Path == "/panic" {
			panic("boom")
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.NewEncoder(w).Encode(echoAnswer{Method: r.Method, Target: r.RequestURI, Auth: r.Header.Get("Authorization"),
			Body: string(body), InStream: r.Context().Value(streamKey{}) != nil})
	})
	srv = New(Options{Handler: handler, WriteError: writeError, MaxBodyBytes: maxBody,
		Logger: slogDiscard()})
	hs := httptest.NewServer(handler)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(func() {
		cancel()
		hs.Close()
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &echoBundle{srv: srv, base: hs.URL, ctx: ctx}
}

func (b *echoBundle) dial(t *testing.T, authz string) *stream.Conn {
	t.Helper()
	c, err := stream.Dial(b.ctx, stream.Config{URL: b.base, Header: http.Header{"Authorization": {authz}}})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Each frame is served by the handler as a request with the upgrade's
// Authorization, marked as coming from a stream; the answer to HEAD has
// no body; a panic is answered as an internal error and the stream goes
// on; a stream cannot be opened inside a stream.
func TestFramesRunThroughTheHandler(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "Bearer x")
	a, err := c.Do(b.ctx, "POST", "/v1/jobs?x=1", []byte(`{"kind":"k"}`))
	var got echoAnswer
	if err != nil || a.Status != http.StatusOK || json.Unmarshal(a.Body, &got) != nil {
		t.Fatalf("POST frame: %v %d %s", err, a.Status, a.Body)
	}
	if want := (echoAnswer{Method: "POST", Target: "/v1/jobs?x=1", Auth: "Bearer x", Body: `{"kind":"k"}`, InStream: true}); got != want {
		t.Errorf("served %+v, want %+v", got, want)
	}
	if a, err := c.Do(b.ctx, "HEAD", "/anything", nil); err != nil || a.Status != http.StatusOK || len(a.Body) != 0 {
		t.Errorf("HEAD frame: %v %d %q, want 200 and no body", err, a.Status, a.Body)
	}
	if a, err := c.Do(b.ctx, "GET", "/panic", nil); err != nil || a.Status != http.StatusInternalServerError || !strings.Contains(string(a.Body), "internal server error") {
		t.Errorf("panicking frame: %v %d %s", err, a.Status, a.Body)
	}
	if a, err := c.Do(b.ctx, "GET", stream.Path, nil); err != nil || a.Status != http.StatusBadRequest {
		t.Errorf("stream inside a stream: %v %d %s", err, a.Status, a.Body)
	}
	if a, err := c.Do(b.ctx, "GET", "/after", nil); err != nil || a.Status != http.StatusOK {
		t.Errorf("after the panic: %v %d %s", err, a.Status, a.Body)
	}
}

// A GET of the stream's path that does not ask to upgrade is refused with
// the Upgrade headers.
func TestOpenNeedsUpgrade(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	resp, err := http.Get(b.base + stream.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired || resp.Header.Get("Upgrade") != stream.Protocol {
		t.Fatalf("GET without Upgrade: %d, Upgrade %q", resp.StatusCode, resp.Header.Get("Upgrade"))
	}
}

// A frame longer than the body limit and the frame header is answered
// FrameTooLarge, and then the stream closes.
func TestFrameTooLargeClosesTheStream(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 16)
	c := b.dial(t, "")
	a, err := c.Do(b.ctx, "POST", "/x", []byte(strings.Repeat("y", 17+stream.MaxRequestHeader)))
	if err != nil || a.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("long frame: %v %d %s", err, a.Status, a.Body)
	}
	select {
	case <-c.Done():
	case <-b.ctx.Done():
		t.Fatal("the stream stayed open after a frame too long")
	}
}

// Close ends the open streams and refuses new ones.
func TestCloseEndsStreams(t *testing.T) {
	t.Parallel()
	b := newEchoBundle(t, 1024)
	c := b.dial(t, "")
	if err := b.srv.Close(b.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-b.ctx.Done():
		t.Fatal("the stream stayed open after Close")
	}
	nc, err := net.Dial("tcp", strings.TrimPrefix(b.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", stream.Path, stream.Protocol)
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatalf("upgrade after Close: %v %v", resp, err)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
