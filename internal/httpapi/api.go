// Package httpapi serves Spool's JSON HTTP API (docs/protocol.md,
// api/openapi.json). It decodes and validates requests at the edge, calls
// the engine, and encodes answers and errors from one error catalog. It
// holds no queue logic.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/streamserver"
	"github.com/spoolq/spool/internal/queue"
)

// DefaultMaxBodyBytes bounds a request body unless Options say otherwise.
const DefaultMaxBodyBytes = 64 << 20

// Options configure the API.
type Options struct {
	// MaxBodyBytes bounds one request body; larger bodies get 413
	// payload_too_large. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives internal errors. Defaults to slog.Default().
	Logger *slog.Logger
	// Auth, when not nil, requires a bearer token of the right role and
	// namespace on every route that is not public (docs/protocol.md,
	// "Auth"). Defaults to nil: no auth.
	Auth *auth.Authenticator
}

// Route is one registered method and path pattern.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Pattern is the path pattern, with {name} wildcards.
	Pattern string
	// Permission is what the route requires of a token when auth is on.
	Permission auth.Permission
}

// API is the HTTP handler of a Spool node.
type API struct {
	engine  *queue.Engine
	opts    Options
	mux     *http.ServeMux
	routes  []Route
	streams *streamserver.Server
}

// New returns the API on e.
func New(e *queue.Engine, opts Options) *API {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &API{engine: e, opts: opts, mux: http.NewServeMux()}
	a.streams = streamserver.New(streamserver.Options{
		Handler: a, WriteError: a.writeError, MaxBodyBytes: opts.MaxBodyBytes, Logger: opts.Logger,
	})
	a.register()
	return a
}

// register installs every route with the permission it requires. Each is
// listed once here, so that the route table (Routes) is the router's own,
// not a copy kept by hand.
func (a *API) register() {
	for _, r := range []struct {
		method, pattern string
		perm            auth.Permission
		h               http.HandlerFunc
	}{
		{"GET", "/healthz", auth.PermPublic, a.healthz},
		{"GET", "/readyz", auth.PermPublic, a.readyz},
		{"GET", "/v1/openapi.json", auth.PermPublic, a.openapi},
		// The stream needs a token to open; each of its frames then needs
		// its own route's permission.
		{"GET", "/v1/stream", auth.PermRead, a.streams.Open},

		{"POST", "/v1/jobs", auth.PermEnqueue, a.enqueue},
		{"POST", "/v1/jobs/batch", auth.PermEnqueue, a.enqueueBatch},
		{"GET", "/v1/jobs", auth.PermRead, a.listJobs},
		{"GET", "/v1/jobs/{id}", auth.PermRead, a.getJob},
		{"DELETE", "/v1/jobs/{id}", auth.PermManage, a.deleteJob},
		{"POST", "/v1/jobs/{id}/cancel", auth.PermManage, a.cancelJob},
		{"POST", "/v1/jobs/{id}/retry", auth.PermManage, a.retryJob},

		{"POST", "/v1/fetch", auth.PermWork, a.fetch},
		{"POST", "/v1/jobs/{id}/ack", auth.PermWork, a.ackOne},
		{"POST", "/v1/jobs/{id}/fail", auth.PermWork, a.failOne},
		{"POST", "/v1/jobs/{id}/extend", auth.PermWork, a.extendOne},
		{"POST", "/v1/jobs/{id}/release", auth.PermWork, a.releaseOne},
		{"POST", "/v1/jobs/{id}/progress", auth.PermWork, a.progress},
		{"POST", "/v1/jobs/ack", auth.PermWork, a.ackBatch},
		{"POST", "/v1/jobs/fail", auth.PermWork, a.failBatch},
		{"POST", "/v1/jobs/extend", auth.PermWork, a.extendBatch},
		{"POST", "/v1/jobs/release", auth.PermWork, a.releaseBatch},

		{"GET", "/v1/queues", auth.PermRead, a.listQueues},
		{"GET", "/v1/queues/{name}", auth.PermRead, a.getQueue},
		{"POST", "/v1/queues/{name}/pause", auth.PermManage, a.pauseQueue},
		{"POST", "/v1/queues/{name}/resume", auth.PermManage, a.resumeQueue},
		{"POST", "/v1/queues/{name}/durability", auth.PermManage, a.setQueueDurability},
		{"POST", "/v1/queues/{name}/purge", auth.PermManage, a.purgeQueue},
		{"POST", "/v1/queues/{name}/retry", auth.PermManage, a.retryQueue},
		{"POST", "/v1/queues/{name}/delete", auth.PermManage, a.deleteQueueJobs},
	} {
		a.handle(r.method, r.pattern, r.perm, r.h)
	}
	a.mux.HandleFunc("/", a.noRoute)
}

// handle registers one route behind the auth check of its permission. A
// route without a valid permission is a programmer error: it panics, so
// that no route can be added without deciding who may call it.
func (a *API) handle(method, pattern string, perm auth.Permission, h http.HandlerFunc) {
	if !perm.Valid() {
		panic(fmt.Sprintf("httpapi: route %s %s has no valid permission", method, pattern))
	}
	a.mux.HandleFunc(method+" "+pattern, a.guard(perm, pattern, h))
	a.routes = append(a.routes, Route{Method: method, Pattern: pattern, Permission: perm})
}

// Routes lists every registered route.
func (a *API) Routes() []Route { return append([]Route(nil), a.routes...) }

// noRoute answers requests that match no route: 405 with Allow when the
// path exists for other methods, else 404.
func (a *API) noRoute(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "/" && pattern != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) == 0 {
		a.writeError(w, r, newError(CodeNotFound, "", "no route for %s %s", r.Method, r.URL.Path))
		return
	}
	sort.Strings(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	a.writeError(w, r, newError(CodeMethodNotAllowed, "", "%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, ", ")))
}

// CloseStreams closes every open stream and refuses new ones, for a server
// shutting down after its listener closed: http.Server.Shutdown does not
// track the connections streams took over. The requests in flight are
// cancelled and answered; CloseStreams waits for that until ctx ends, then
// closes the connections at once and returns ctx's error (see
// streamserver.Server.Close). It is idempotent.
func (a *API) CloseStreams(ctx context.Context) error { return a.streams.Close(ctx) }
