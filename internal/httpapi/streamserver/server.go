// Package streamserver is the server side of spool-stream/1, the
// multiplexed transport of Spool's API (docs/protocol.md, "Stream
// transport"): the handler of GET /v1/stream that upgrades an HTTP/1.1
// connection, and the connection that then reads request frames, serves
// each through the API's own http.Handler on a goroutine of its own (or,
// for frames the API can serve together, hands those that arrive together
// to one goroutine as a batch), and writes the answer frames. A frame is
// served exactly as the same request over HTTP, with the Authorization of
// the upgrade, so permissions, namespaces and errors are the same. The
// frame codec is in internal/stream.
package streamserver

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spoolq/spool/internal/stream"
)

// Options configure a Server.
type Options struct {
	// Handler serves the request of each frame: the API's own handler. It
	// must not change a request's Header or URL, which the requests of a
	// stream share (the upgrade's headers, the targets the stream parsed),
	// nor should ServeBatch.
	Handler http.Handler
	// WriteError writes err as the API's error answer. The stream server
	// words its own refusals as *Error; every other error comes from the
	// handler's side. r is nil for the refusal of a frame that is not a
	// request.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// MaxBodyBytes bounds the body of a request frame, as it bounds a
	// request body over HTTP.
	MaxBodyBytes int64
	// Logger receives the stream's protocol errors and the panics of the
	// handler. Defaults to slog.Default().
	Logger *slog.Logger
	// Inline reports whether the request of a frame waits for nothing but
	// the store (never, as a long poll does, for other requests). Such a
	// frame, when it is its stream's only request in flight and no other
	// frame has been read, runs on the stream's reader, which saves a lone
	// caller two goroutine hand-overs; so does a batch of such frames
	// (Batchable) that are the stream's only requests in flight. Nil: no
	// frame does.
	Inline func(method, target string) bool
	// Batchable reports whether the requests of frames with this method
	// and target may be served together by ServeBatch. A stream's reader
	// that reads such frames one after another without waiting for the
	// connection (they came in together) hands them to one goroutine as a
	// batch, which saves each frame its own goroutine and its own trip
	// through the store. Nil: no frame is.
	Batchable func(method, target string) bool
	// ServeBatch serves the requests rs of a batch, answering each into
	// its ws[i], exactly as Handler would serve each on its own; ctx ends
	// with the stream. Required with Batchable.
	ServeBatch func(ctx context.Context, rs []*http.Request, ws []http.ResponseWriter)
}

// Server upgrades connections to streams and keeps the open ones:
// http.Server.Shutdown does not track the connections a handler took
// over, so Close must. It is safe for concurrent use.
type Server struct {
	opts Options

	mu     sync.Mutex
	closed bool
	open   map[*conn]struct{}

	// inlined counts the frames run on their stream's reader
	// (conn.handleInline, conn.runsInline), for tests.
	inlined atomic.Int64
	// batched counts the frames served in batches (conn.handleBatch).
	batched atomic.Int64
}

// Batched is the number of frames the server has served in batches
// (Options.Batchable) so far.
func (s *Server) Batched() int64 { return s.batched.Load() }

// New returns a Server serving frames with opts.Handler.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Server{opts: opts}
}

// streamKey marks the context of every request that came in a frame.
type streamKey struct{}

// Open is the handler of GET /v1/stream: it upgrades the connection to
// spool-stream/1 and serves its frames until the connection ends. The
// route's guard has checked the token, if auth is on; each frame's route
// checks it again for its own permission.
func (s *Server) Open(w http.ResponseWriter, r *http.Request) {
	if r.Context().Value(streamKey{}) != nil {
		s.opts.WriteError(w, r, &Error{Kind: InvalidRequest, Message: fmt.Sprintf("GET %s cannot be called inside a stream", stream.Path)})
		return
	}
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", stream.Protocol) {
		s.refuseUpgrade(w, r)
		return
	}
	if s.isClosed() {
		s.opts.WriteError(w, r, &Error{Kind: ShuttingDown, Message: "the server is shutting down"})
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.refuseUpgrade(w, r)
		return
	}
	_ = nc.SetDeadline(time.Time{}) // the server's deadlines were for one request
	c := newConn(s, nc, brw.Reader, r)
	if !s.add(c) {
		_ = nc.Close() // shutdown began since the check above
		return
	}
	defer s.remove(c)
	if err := c.switchProtocols(); err != nil {
		s.opts.Logger.Debug("stream upgrade failed", "remote", r.RemoteAddr, "err", err)
		c.cancel()
		_ = nc.Close()
		close(c.done)
		return
	}
	c.serve()
}

// refuseUpgrade answers a request for the stream that cannot be upgraded.
func (s *Server) refuseUpgrade(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Upgrade", stream.Protocol)
	w.Header().Set("Connection", "Upgrade")
	s.opts.WriteError(w, r, &Error{Kind: UpgradeRequired, Message: fmt.Sprintf(
		"GET %s opens a stream: send it over HTTP/1.1 with Connection: Upgrade and Upgrade: %s", stream.Path, stream.Protocol)})
}

// hasToken reports whether the comma-separated header name holds token,
// in any case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// add registers c, unless the server is closed.
func (s *Server) add(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.open == nil {
		s.open = make(map[*conn]struct{})
	}
	s.open[c] = struct{}{}
	return true
}

// remove forgets c, which has ended.
func (s *Server) remove(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.open, c)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes every open stream and refuses new ones, for a server
// shutting down after its listener closed. Each stream stops reading
// frames and lets the requests in flight finish, as an HTTP server's
// shutdown does (the caller closes the engine first, so that long polls
// answer at once with what they have); it writes their answers and closes.
// Close waits for that until ctx ends, then closes the connections at once
// and returns ctx's error. It is idempotent.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	open := make([]*conn, 0, len(s.open))
	for c := range s.open {
		open = append(open, c)
	}
	s.mu.Unlock()
	for _, c := range open {
		c.stop()
	}
	for _, c := range open {
		select {
		case <-c.done:
		case <-ctx.Done():
			for _, c := range open {
				_ = c.nc.Close()
			}
			return fmt.Errorf("close streams: %w", ctx.Err())
		}
	}
	return nil
}

// switchProtocols answers the upgrade with 101.
func (c *conn) switchProtocols() error {
	w := bufio.NewWriterSize(c.nc, 256)
	_, _ = w.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + stream.Protocol + "\r\n\r\n")
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write 101: %w", err)
	}
	return nil
}

// InFrame reports whether the request of ctx came in a frame of a stream,
// for the routes that cannot be served there (those that stream
// themselves).
func InFrame(ctx context.Context) bool { return ctx.Value(streamKey{}) != nil }
