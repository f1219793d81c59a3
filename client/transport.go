package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// transport carries one API call to the server and returns its answer's
// status and body, which the caller reads and closes. Each form of the
// Client's connection implements it: plain HTTP requests (httpTransport)
// or frames of one multiplexed stream (streamTransport, see WithStream).
// Encoding the request and decoding the answer happen in Client.do, the
// same for both.
type transport interface {
	// roundTrip sends method path?query with body (JSON, or nil for
	// none). A call lost to the network fails with a *url.Error naming
	// the method and URL, so that callers (temporary, the Worker) treat
	// it as a network error whatever the transport.
	roundTrip(ctx context.Context, method, path string, query url.Values, body []byte) (status int, answer io.ReadCloser, err error)
	// closeIdle closes the connections that no call uses.
	closeIdle()
}

// httpTransport sends each call as one HTTP request through the Client's
// http.Client.
type httpTransport struct {
	c *Client
}

func (t *httpTransport) roundTrip(ctx context.Context, method, path string, query url.Values, data []byte) (int, io.ReadCloser, error) {
	c := t.c
	var body io.Reader
	if data != nil {
		body = bytes.NewReader(data)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err // a *url.Error naming the method and URL
	}
	return resp.StatusCode, resp.Body, nil
}

func (t *httpTransport) closeIdle() { t.c.http.CloseIdleConnections() }
