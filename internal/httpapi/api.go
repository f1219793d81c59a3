// Package httpapi serves Spool's JSON HTTP API (docs/protocol.md,
// api/openapi.json). It decodes and validates requests at the edge, calls
// the engine, and encodes answers and errors from one error catalog. It
// holds no queue logic.
package httpapi

import (
	"log/slog"
	"net/http"
	"sort"
	"strings"

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
}

// Route is one registered method and path pattern.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Pattern is the path pattern, with {name} wildcards.
	Pattern string
}

// API is the HTTP handler of a Spool node.
type API struct {
	engine *queue.Engine
	opts   Options
	mux    *http.ServeMux
	routes []Route
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
	a.register()
	return a
}

// register installs every route. Each is listed once here, so that the
// route table (Routes) is the router's own, not a copy kept by hand.
func (a *API) register() {
	for _, r := range []struct {
		method, pattern string
		h               http.HandlerFunc
	}{
		{"GET", "/healthz", a.healthz},
		{"GET", "/readyz", a.readyz},
		{"GET", "/v1/openapi.json", a.openapi},

		{"POST", "/v1/jobs", a.enqueue},
		{"POST", "/v1/jobs/batch", a.enqueueBatch},
		{"GET", "/v1/jobs", a.listJobs},
		{"GET", "/v1/jobs/{id}", a.getJob},
		{"DELETE", "/v1/jobs/{id}", a.deleteJob},
		{"POST", "/v1/jobs/{id}/cancel", a.cancelJob},
		{"POST", "/v1/jobs/{id}/retry", a.retryJob},

		{"POST", "/v1/fetch", a.fetch},
		{"POST", "/v1/jobs/{id}/ack", a.ackOne},
		{"POST", "/v1/jobs/{id}/fail", a.failOne},
		{"POST", "/v1/jobs/{id}/extend", a.extendOne},
		{"POST", "/v1/jobs/{id}/release", a.releaseOne},
		{"POST", "/v1/jobs/{id}/progress", a.progress},
		{"POST", "/v1/jobs/ack", a.ackBatch},
		{"POST", "/v1/jobs/fail", a.failBatch},
		{"POST", "/v1/jobs/extend", a.extendBatch},
		{"POST", "/v1/jobs/release", a.releaseBatch},

		{"GET", "/v1/queues", a.listQueues},
		{"GET", "/v1/queues/{name}", a.getQueue},
		{"POST", "/v1/queues/{name}/pause", a.pauseQueue},
		{"POST", "/v1/queues/{name}/resume", a.resumeQueue},
		{"POST", "/v1/queues/{name}/purge", a.purgeQueue},
		{"POST", "/v1/queues/{name}/retry", a.retryQueue},
		{"POST", "/v1/queues/{name}/delete", a.deleteQueueJobs},
	} {
		a.mux.HandleFunc(r.method+" "+r.pattern, r.h)
		a.routes = append(a.routes, Route{Method: r.method, Pattern: r.pattern})
	}
	a.mux.HandleFunc("/", a.noRoute)
}

// Routes lists every registered route.
func (a *API) Routes() []Route { return append([]Route(nil), a.routes...) }

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mux.ServeHTTP(w, r)
}

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
