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
	return func(c *Client) { c.stream = true }
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
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	a, err := t.sc.Do(ctx, method, target, data)
	if err != nil {
		var refused *stream.UpgradeError
		switch {
		case errors.As(err, &refused):
			return refused.Status, io.NopCloser(bytes.NewReader(refused.Body)), nil
		case errors.Is(err, stream.ErrUnsupportedURL):
			return 0, nil, fmt.Errorf("open stream: %w", err)
		}
		return 0, nil, &url.Error{Op: urlOp(method), URL: t.base + target, Err: err}
	}
	return a.Status, io.NopCloser(bytes.NewReader(a.Body)), nil
}

func (t *streamTransport) closeIdle() { t.sc.CloseIdle() }

// urlOp is the Op of net/http's errors for method: "Post" for POST.
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}
