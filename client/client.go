package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultUserAgent is the User-Agent a Client sends unless WithUserAgent
// sets another.
const DefaultUserAgent = "spool-go-client/1"

// maxErrorBody bounds how much of an error answer is read, and how much of
// any answer is drained so that its connection can be reused.
const maxErrorBody = 64 << 10

// Client speaks Spool's HTTP API (docs/protocol.md) for producers, workers
// and admins, as HTTP requests or, with WithStream, as frames of one
// multiplexed connection. It is safe for concurrent use and reuses
// connections, so one Client per server is enough for a whole program.
//
// Every method takes a context that bounds the call, long polls included.
// Errors the server answers are *Error values that match the package's
// sentinel errors with errors.Is; transport failures are returned wrapped
// with the operation that failed.
type Client struct {
	base      string
	http      *http.Client
	token     string
	userAgent string
	mode      transportMode
	tr        transport
}

// transportMode is how a Client carries its calls.
type transportMode int

const (
	// modeAuto is the default: the stream where it can be used (see New),
	// else HTTP.
	modeAuto transportMode = iota
	// modeHTTP is WithHTTP: one HTTP request per call.
	modeHTTP
	// modeStream is WithStream: the stream, whatever the URL.
	modeStream
)

// Option configures a Client in New.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc instead of
// its own tuned client, as one HTTP request per call unless WithStream is
// given too. A Timeout set on hc bounds every call, fetches included, so it
// must be longer than the longest long poll (up to 60 s); prefer contexts
// for deadlines.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithToken makes the Client send "Authorization: Bearer token" with every
// call, for servers that require authentication.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// WithUserAgent replaces DefaultUserAgent, to tell callers apart in server
// logs.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a Client for the server at baseURL, such as
// "http://127.0.0.1:7311". It does not contact the server; a malformed
// baseURL shows as an error of the first call.
//
// By default the Client carries its calls over the stream transport (see
// WithStream), which costs both sides far less per call than HTTP, when it
// can: for an http:// URL that no proxy of the environment
// (HTTP_PROXY, NO_PROXY) covers, and without WithHTTPClient. It falls back
// to HTTP for good when the server refuses the stream as unknown (an
// older server, or a proxy in the way that does not pass it), and for one
// call when it refuses it for that call's reason (a missing or bad token,
// an overloaded or stopping server), so that every call gets the answer
// it would get over HTTP. WithHTTP and WithStream choose one for good.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		userAgent: DefaultUserAgent,
	}
	custom := false
	for _, opt := range opts {
		opt(c)
	}
	if c.http == nil {
		c.http = &http.Client{Transport: newTransport()}
	} else {
		custom = true
	}
	switch {
	case c.mode == modeStream:
		c.tr = newStreamTransport(c)
	case c.mode == modeAuto && !custom && streamable(c.base):
		c.tr = &autoTransport{stream: newStreamTransport(c), http: &httpTransport{c: c}}
	default:
		c.tr = &httpTransport{c: c}
	}
	return c
}

// WithHTTP makes the Client send every call as an HTTP request of its own,
// never over the stream transport.
func WithHTTP() Option {
	return func(c *Client) { c.mode = modeHTTP }
}

// newTransport is a transport that keeps enough idle connections per host
// for a busy worker (heartbeats, acks and a long poll at once) and bounds
// connection set-up, but not answers: a long poll legitimately takes up to
// a minute to answer.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// CloseIdleConnections closes the connections the Client keeps open for
// reuse, for a program that is done with the Client (or a test about to
// stop its server). With WithStream it closes the stream connection once
// the calls in flight on it are answered. Calls made afterwards open new
// connections.
func (c *Client) CloseIdleConnections() {
	c.tr.closeIdle()
}

// Health asks whether the server process runs (GET /healthz). It returns
// nil when it does.
func (c *Client) Health(ctx context.Context) error {
	if err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil); err != nil {
		return fmt.Errorf("check health: %w", err)
	}
	return nil
}

// Ready asks whether the server can serve (GET /readyz): nil when its store
// answers, an error matching ErrUnavailable when it does not.
func (c *Client) Ready(ctx context.Context) error {
	if err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil); err != nil {
		return fmt.Errorf("check readiness: %w", err)
	}
	return nil
}

// do sends one request and decodes a 2xx answer into out (when out is not
// nil and the answer has a body). A body in is sent as JSON when not nil.
// A 4xx/5xx answer becomes an *Error. The transport (HTTP, or the stream
// of WithStream) only carries the call, so both give the same results and
// errors.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	_, err := c.call(ctx, method, path, query, in, out)
	return err
}

// call is do that also returns the status of a 2xx answer, for the calls
// whose status carries meaning (201 Created or 200 OK).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, in, out any) (int, error) {
	var data []byte
	if in != nil {
		var err error
		if data, err = json.Marshal(in); err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
	}
	status, body, err := c.tr.roundTrip(ctx, method, path, query, data)
	if err != nil {
		return 0, err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
		_ = body.Close()
	}()
	if status >= 400 {
		return 0, decodeError(status, body)
	}
	if out == nil || status == http.StatusNoContent {
		return status, nil
	}
	if err := decodeBody(body, out); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return status, nil
}

// decodeBody decodes the JSON answer body into out: in place when the
// body is whole in memory already, else through a decoder.
func decodeBody(body io.Reader, out any) error {
	if whole, ok := body.(*wholeBody); ok && whole.Len() == len(whole.data) {
		if err := json.Unmarshal(whole.data, out); err != nil {
			return err
		}
		whole.Reset(nil)
		return nil
	}
	return json.NewDecoder(body).Decode(out)
}

// decodeError reads an error answer of status. A body that is not a Spool
// error (from a proxy, say) still gives an *Error, with an empty Code and
// the start of the body as Message.
func decodeError(status int, body io.Reader) error {
	data, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var wire struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(data, &wire) == nil && wire.Error != nil && wire.Error.Code != "" {
		return &Error{Status: status, Code: wire.Error.Code, Message: wire.Error.Message, Field: wire.Error.Field}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Message: msg}
}

// msec converts d to whole milliseconds for a `_ms` field, rounding a
// positive d up so that a short duration never turns into 0 ("use the
// default").
func msec(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return ms
}

// jobPath is the path of one job's resource, plus suffix.
func jobPath(id, suffix string) string {
	return "/v1/jobs/" + url.PathEscape(id) + suffix
}

// queuePath is the path of one queue's resource, plus suffix.
func queuePath(name, suffix string) string {
	return "/v1/queues/" + url.PathEscape(name) + suffix
}
