package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/spoolq/spool/internal/stream"
)

// WithStream makes the Client send every call over one multiplexed
// connection speaking spool-stream/1 (docs/protocol.md, "Stream
// transport") instead of one HTTP request each: many goroutines share the
// connection, and calls made at about the same time share system calls,
// which saves most of the per-request cost of HTTP for a busy producer or
// worker. Calls, answers and errors are the same as over HTTP.
//
// The connection is dialled on the first call and dialled again on the
// call after it breaks; calls in flight when it breaks fail with a network
// error (a *url.Error), which a Worker retries like any other. The base URL
// must be http:// (the stream does not speak TLS): with https:// every
// call fails with an error saying so. WithHTTPClient does not apply to the
// stream. With auth on, the stream needs a token even for the public calls
// (Health, Ready), since opening it does.
func WithStream() Option {
	return func(c *Client) { c.mode = modeStream }
}

// streamTransport sends each call as a frame of one shared stream.
type streamTransport struct {
	base string
	sc   *stream.Client
}

func newStreamTransport(c *Client) *streamTransport {
	h := make(http.Header)
	if c.userAgent != "" {
		h.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return &streamTransport{base: c.base, sc: stream.NewClient(stream.Config{URL: c.base, Header: h})}
}

// roundTrip sends one frame. A refused upgrade is the call's answer, so
// that a bad token is ErrUnauthorized as over HTTP.
func (t *streamTransport) roundTrip(ctx context.Context, method, path string, query url.Values, data []byte) (int, io.ReadCloser, error) {
	a, err := t.send(ctx, method, path, query, data)
	return t.answer(method, path, query, a, err)
}

// send sends one frame and returns its answer or the stream's error.
func (t *streamTransport) send(ctx context.Context, method, path string, query url.Values, data []byte) (stream.Answer, error) {
	return t.sc.Do(ctx, method, target(path, query), data)
}

// answer turns what send returned into roundTrip's results.
func (t *streamTransport) answer(method, path string, query url.Values, a stream.Answer, err error) (int, io.ReadCloser, error) {
	if err != nil {
		var refused *stream.UpgradeError
		switch {
		case errors.As(err, &refused):
			return refused.Status, io.NopCloser(bytes.NewReader(refused.Body)), nil
		case errors.Is(err, stream.ErrUnsupportedURL):
			return 0, nil, fmt.Errorf("open stream: %w", err)
		}
		return 0, nil, &url.Error{Op: urlOp(method), URL: t.base + target(path, query), Err: err}
	}
	return a.Status, &wholeBody{Reader: bytes.NewReader(a.Body), data: a.Body}, nil
}

// wholeBody is an answer body read whole already, so that its JSON can be
// decoded from data in place rather than copied through a decoder's buffer.
type wholeBody struct {
	*bytes.Reader
	data []byte
}

// Close does nothing: the body is in memory.
func (*wholeBody) Close() error { return nil }

// target is path with query.
func target(path string, query url.Values) string {
	if len(query) > 0 {
		return path + "?" + query.Encode()
	}
	return path
}

func (t *streamTransport) closeIdle() { t.sc.CloseIdle() }

// urlOp is the Op of net/http's errors for method: "Post" for POST.
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// streamable reports whether the default Client may use the stream for
// base: an http:// URL that no proxy of the environment covers.
func streamable(base string) bool {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return false
	}
	proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u})
	return err == nil && proxy == nil
}

// autoTransport is the default Client's: the stream, with HTTP when the
// server refuses the stream (see New).
type autoTransport struct {
	stream *streamTransport
	http   *httpTransport
	plain  atomic.Bool // the server does not serve the stream: HTTP for good
}

func (t *autoTransport) roundTrip(ctx context.Context, method, path string, query url.Values, data []byte) (int, io.ReadCloser, error) {
	if !t.plain.Load() {
		a, err := t.stream.send(ctx, method, path, query, data)
		var refused *stream.UpgradeError
		if !errors.As(err, &refused) {
			return t.stream.answer(method, path, query, a, err)
		}
		if unknownStream(refused.Status) {
			t.plain.Store(true)
		}
	}
	return t.http.roundTrip(ctx, method, path, query, data)
}

func (t *autoTransport) closeIdle() {
	t.stream.closeIdle()
	t.http.closeIdle()
}

// unknownStream reports whether an upgrade refused with status says that
// the server (or something in front of it) does not serve the stream at
// all, rather than refusing it for the moment or for this caller.
func unknownStream(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusUpgradeRequired,
		http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return true
	}
	return false
}
