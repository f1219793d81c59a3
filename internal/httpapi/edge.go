package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The answers the HTTP server would write itself, outside any handler,
// are the catalog's JSON errors too: a request for a path that is not in
// canonical form gets 404 (net/http's router would redirect it), a request
// for "*" gets 400, and the plain-text answers net/http writes to requests
// it cannot parse are rewritten on their way out (see CatalogListener).

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.opts.ObserveRequest == nil {
		a.serve(w, r)
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	a.serve(sw, r)
	a.opts.ObserveRequest(routeOf(r), sw.status(), time.Since(start))
}

// Observed wraps h, a handler routed by an http.ServeMux (Queen's API),
// so that observe is told of each request it answers as
// Options.ObserveRequest is.
func Observed(h http.Handler, observe func(route string, status int, elapsed time.Duration)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		observe(routeOf(r), sw.status(), time.Since(start))
	})
}

// routeOf is the route pattern r matched, "" for none: the router sets
// it on the request it was handed; the catch-all of unknown paths counts
// as none.
func routeOf(r *http.Request) string {
	if r.Pattern == "/" {
		return ""
	}
	return r.Pattern
}

// serve answers r: the edge rules, then the router.
func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	if r.RequestURI == "*" {
		a.writeError(w, r, newError(CodeBadRequest, "", "the request target * names no resource of this server"))
		return
	}
	if p := r.URL.Path; !CanonicalPath(p) {
		a.writeError(w, r, newError(CodeNotFound, "", "no route for %s %q: the path is not in canonical form (no empty, . or .. segments)", r.Method, p))
		return
	}
	a.mux.ServeHTTP(w, r)
}

// Refuse answers a request that siteguard refused (a foreign Host: 421
// host_not_allowed; a cross-site change: 403 forbidden) as the catalog's
// JSON error, as every other answer of this API is.
func (a *API) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	a.writeError(w, r, err)
}

// ChangesOnGet reports whether a GET of path changes something: the
// upgrade of GET /v1/stream carries frames that enqueue, ack and manage.
// siteguard refuses such a GET from another site as it refuses a POST.
// No other GET route of this API changes anything.
func ChangesOnGet(path string) bool { return path == "/v1/stream" }

// CanonicalPath reports whether p is a path net/http's router serves as it
// is rather than redirecting it to its cleaned form: rooted, with no
// empty, "." or ".." segment (a trailing slash is kept). The API and
// Queen's answer other paths 404.
func CanonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// CatalogListener wraps ln so that the answers net/http writes by itself
// to requests it cannot read (headers too large, a malformed request line
// or URI, an unsupported transfer coding or version, an Expect it cannot
// meet) go out as the catalog's JSON errors instead of plain text:
// headers_too_large (431) or bad_request (400). Everything else passes
// through untouched.
func CatalogListener(ln net.Listener) net.Listener {
	return catalogListener{ln}
}

type catalogListener struct{ net.Listener }

// Accept implements net.Listener.
func (l catalogListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &catalogConn{Conn: c}, nil
}

// catalogConn rewrites net/http's own plain-text error answers.
type catalogConn struct {
	net.Conn
}

// Write implements net.Conn.
func (c *catalogConn) Write(p []byte) (int, error) {
	out, ok := rewriteServerAnswer(p)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite shuts down the writing side of the connection, when the
// wrapped one can (TCP and TLS connections can), and otherwise fails with
// errors.ErrUnsupported, leaving the connection as it is: net/http and the
// stream server close that side first so that a close does not reset the
// connection and drop answers the client has not read yet.
func (c *catalogConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// SyscallConn returns the raw connection of the wrapped one, when it has
// one (a TCP connection has), and otherwise fails with
// errors.ErrUnsupported: the stream server asks it how many bytes wait
// unread.
func (c *catalogConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// plainErrorHeaders are the headers of every plain-text error answer of
// net/http's connection loop, between its status line and its text.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// rewriteServerAnswer returns the JSON form of p when p is one of the
// answers net/http writes by itself, whole (each is one write).
func rewriteServerAnswer(p []byte) ([]byte, bool) {
	const proto = "HTTP/1.1 "
	if len(p) < len(proto)+4 || !bytes.HasPrefix(p, []byte(proto)) || p[len(proto)] < '4' {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[len(proto) : len(proto)+3]))
	if err != nil {
		return nil, false
	}
	if status == http.StatusExpectationFailed {
		// An Expect header other than 100-continue; the answer has no text.
		return catalogAnswer(newError(CodeBadRequest, "", "the Expect header asks for something this server does not do; only 100-continue is supported")), true
	}
	headers := bytes.Index(p, []byte(plainErrorHeaders))
	if headers < 0 || bytes.Contains(p[:headers], []byte("\r\n")) {
		return nil, false
	}
	text := string(p[headers+len(plainErrorHeaders):])
	if status == http.StatusRequestHeaderFieldsTooLarge {
		return catalogAnswer(newError(CodeHeadersTooLarge, "", "the request's headers are larger than this server reads")), true
	}
	// "400 Bad Request: malformed HTTP request", or the status alone.
	detail := text
	if _, after, ok := strings.Cut(text, ": "); ok {
		detail = after
	}
	return catalogAnswer(newError(CodeBadRequest, "", "the request is not valid HTTP/1.1: %s", strings.ToLower(detail))), true
}

// catalogAnswer is a whole HTTP/1.1 answer carrying e, closing the
// connection as net/http does after such an answer.
func catalogAnswer(e *apiError) []byte {
	body, err := json.Marshal(errorBody{Error: *e})
	if err != nil {
		body = []byte(`{"error":{"code":"internal_error","message":"internal server error"}}`)
	}
	status := e.Status()
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		status, http.StatusText(status), len(body)+1, append(body, '\n'))
}

// statusWriter records the status of the answer written through it, for
// ObserveRequest. What the handlers reach through http.ResponseController
// (flushes, deadlines, the stream's hijack) reaches the writer beneath.
type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader implements http.ResponseWriter.
func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is the writer beneath, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack takes the connection over, for the stream's upgrade, whose
// answer is then 101.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return c, rw, err
}

// status is the status written, 200 when the handler wrote nothing.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
