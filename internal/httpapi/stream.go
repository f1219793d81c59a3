package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/stream"
)

// openStream is GET /v1/stream: it upgrades the connection to
// spool-stream/1 (docs/protocol.md, "Stream transport") and serves its
// frames until the connection ends. The guard has checked the token, if
// auth is on; each frame's route checks it again for its own permission.
func (a *API) openStream(w http.ResponseWriter, r *http.Request) {
	if r.Context().Value(streamKey{}) != nil {
		a.writeError(w, r, newError(CodeInvalidArgument, "", "GET %s cannot be called inside a stream", stream.Path))
		return
	}
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !hasToken(r.Header, "Connection", "upgrade") || !hasToken(r.Header, "Upgrade", stream.Protocol) {
		a.refuseUpgrade(w, r)
		return
	}
	if a.streams.isClosed() {
		a.writeError(w, r, newError(CodeUnavailable, "", "the server is shutting down"))
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		a.refuseUpgrade(w, r)
		return
	}
	_ = nc.SetDeadline(time.Time{}) // the server's deadlines were for one request
	s := newStreamConn(a, nc, brw.Reader, r)
	if !a.streams.add(s) {
		_ = nc.Close() // shutdown began since the check above
		return
	}
	defer a.streams.remove(s)
	if err := s.switchProtocols(); err != nil {
		a.opts.Logger.Debug("stream upgrade failed", "remote", r.RemoteAddr, "err", err)
		s.cancel()
		_ = nc.Close()
		close(s.done)
		return
	}
	s.serve()
}

// refuseUpgrade answers a request for the stream that cannot be upgraded.
func (a *API) refuseUpgrade(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Upgrade", stream.Protocol)
	w.Header().Set("Connection", "Upgrade")
	a.writeError(w, r, newError(CodeUpgradeRequired, "", "GET %s opens a stream: send it over HTTP/1.1 with Connection: Upgrade and Upgrade: %s", stream.Path, stream.Protocol))
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

// streamKey marks the context of every request that came in a frame.
type streamKey struct{}

// streamSet is the registry of open streams: http.Server.Shutdown does not
// track the connections they took over, so CloseStreams must.
type streamSet struct {
	mu     sync.Mutex
	closed bool
	open   map[*streamConn]struct{}
}

// add registers s, unless the set is closed.
func (ss *streamSet) add(s *streamConn) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return false
	}
	if ss.open == nil {
		ss.open = make(map[*streamConn]struct{})
	}
	ss.open[s] = struct{}{}
	return true
}

func (ss *streamSet) remove(s *streamConn) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.open, s)
}

func (ss *streamSet) isClosed() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closed
}

// CloseStreams closes every open stream and refuses new ones, for a server
// shutting down after its listener closed. Each stream stops reading
// frames and cancels the requests in flight, which answer as the routes
// answer a departed caller (a long poll with what it has, the rest 503
// unavailable); it writes those answers and closes. CloseStreams waits
// for that until ctx ends, then closes the connections at once and
// returns ctx's error. It is idempotent.
func (a *API) CloseStreams(ctx context.Context) error {
	ss := &a.streams
	ss.mu.Lock()
	ss.closed = true
	open := make([]*streamConn, 0, len(ss.open))
	for s := range ss.open {
		open = append(open, s)
	}
	ss.mu.Unlock()
	for _, s := range open {
		s.stop()
	}
	for _, s := range open {
		select {
		case <-s.done:
		case <-ctx.Done():
			for _, s := range open {
				_ = s.nc.Close()
			}
			return fmt.Errorf("close streams: %w", ctx.Err())
		}
	}
	return nil
}

// switchProtocols answers the upgrade with 101.
func (s *streamConn) switchProtocols() error {
	w := bufio.NewWriterSize(s.nc, 256)
	_, _ = w.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + stream.Protocol + "\r\n\r\n")
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write 101: %w", err)
	}
	return nil
}
