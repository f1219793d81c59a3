package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// DefaultDialTimeout bounds the connection and the upgrade of Dial unless
// Config.DialTimeout says otherwise.
const DefaultDialTimeout = 10 * time.Second

// bufferSize is the size of each connection's read and write buffers: many
// small frames share one system call.
const bufferSize = 64 << 10

// maxRefusal bounds how much of a refused upgrade's answer is read.
const maxRefusal = 64 << 10

// ErrUnsupportedURL is the error of a base URL the stream cannot reach:
// not http:// (the stream does not speak TLS) or without a host.
var ErrUnsupportedURL = errors.New("the stream transport needs an http://host[:port] base URL")

// Config says where and how to connect.
type Config struct {
	// URL is the server's base URL, "http://host[:port]", optionally with
	// a path prefix that a proxy strips: the upgrade goes to URL + Path,
	// while the frames carry the API's own paths.
	URL string
	// Header is sent with the upgrade request, such as Authorization and
	// User-Agent. Every request of the stream runs with its Authorization.
	Header http.Header
	// MaxAnswer bounds one answer frame. Defaults to DefaultMaxAnswer.
	MaxAnswer int64
	// DialTimeout bounds the connection and the upgrade. Defaults to
	// DefaultDialTimeout.
	DialTimeout time.Duration
}

// UpgradeError is the server's refusal of an upgrade: an answer of its
// HTTP API, such as 401 unauthorized or 503 unavailable, with its body.
type UpgradeError struct {
	// Status is the HTTP status of the answer.
	Status int
	// Body is the start of the answer's body, a JSON error from a Spool
	// server.
	Body []byte
}

// Error implements error.
func (e *UpgradeError) Error() string {
	return fmt.Sprintf("upgrade to %s refused: %d %s: %s", Protocol, e.Status, http.StatusText(e.Status), strings.TrimSpace(string(e.Body)))
}

// Dial connects to the server of cfg.URL and upgrades the connection to a
// stream. ctx bounds the dial and the upgrade only. It fails with an
// *UpgradeError when the server answers the upgrade with anything but 101,
// and with an error wrapping ErrUnsupportedURL for a URL it cannot reach.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("%w, not %q", ErrUnsupportedURL, cfg.URL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	rd, w, err := upgrade(ctx, nc, u, cfg.Header)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	var raw syscall.RawConn // nil when nc has no descriptor
	if sc, ok := nc.(syscall.Conn); ok {
		raw, _ = sc.SyscallConn()
	}
	if rd.Buffered() == 0 { // else keep what rd holds, through nc
		sock := socketOf(nc, raw)
		rd = bufio.NewReaderSize(sock, bufferSize)
		w.Reset(sock)
	}
	maxAnswer := cfg.MaxAnswer
	if maxAnswer <= 0 {
		maxAnswer = DefaultMaxAnswer
	}
	c := &Conn{
		nc: nc, rd: rd, maxAnswer: maxAnswer,
		writes: make(chan []byte, writeQueue),
		done:   make(chan struct{}),
		calls:  make(map[uint32]*call),
		w:      w,
		turn:   make(chan struct{}, 1),
		raw:    raw,
	}
	c.turn <- struct{}{}
	// Armed once set, so that watch sees it.
	c.idle = time.AfterFunc(math.MaxInt64, c.watch)
	c.idle.Reset(idleWatch)
	go c.writeLoop()
	return c, nil
}

// upgrade sends the upgrade request on nc and reads the answer, within
// ctx. It returns the connection's buffered reader and writer.
func upgrade(ctx context.Context, nc net.Conn, base *url.URL, header http.Header) (*bufio.Reader, *bufio.Writer, error) {
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req := &http.Request{
		Method:     http.MethodGet,
		URL:        &url.URL{Scheme: "http", Host: base.Host, Path: strings.TrimRight(base.Path, "/") + Path},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header.Clone(),
		Host:       base.Host,
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Protocol)
	w := bufio.NewWriterSize(nc, bufferSize)
	if err := req.Write(w); err != nil {
		return nil, nil, fmt.Errorf("send upgrade: %w", ctxErr(ctx, err))
	}
	if err := w.Flush(); err != nil {
		return nil, nil, fmt.Errorf("send upgrade: %w", ctxErr(ctx, err))
	}
	rd := bufio.NewReaderSize(nc, bufferSize)
	resp, err := http.ReadResponse(rd, req)
	if err != nil {
		return nil, nil, fmt.Errorf("read upgrade answer: %w", ctxErr(ctx, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusal))
		_ = resp.Body.Close()
		return nil, nil, &UpgradeError{Status: resp.StatusCode, Body: body}
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), Protocol) {
		return nil, nil, fmt.Errorf("server switched to %q, not %s", resp.Header.Get("Upgrade"), Protocol)
	}
	if !stop() {
		return nil, nil, fmt.Errorf("upgrade: %w", context.Cause(ctx))
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, nil, fmt.Errorf("clear deadline: %w", err)
	}
	return rd, w, nil
}

// ctxErr prefers ctx's error to the timeout error its end caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
