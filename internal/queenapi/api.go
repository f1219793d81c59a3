// Package queenapi serves Queen's HTTP API v1 on Spool's engine, closely
// enough for Queen's own clients (the queen-mq Python package among them)
// to push, pop, ack, extend leases, run transactions and manage consumer
// groups against a Spool server unmodified. Queen is a message queue on
// PostgreSQL built around ordered partitions and consumer groups; this
// package maps each of its calls onto Spool's native features (ordered
// queues, groups, consumer groups, transactions, queue settings: a Queen
// partition is a Spool group, the group a job is enqueued with) and
// holds no queue logic of its own: there is one engine.
//
// It is off unless the server runs with --queen-compat, and it sits
// behind the same tokens as Spool's own API: each route needs the
// permission of the native route it maps to, and every queue it names must
// lie in the token's namespaces. Errors come from the same catalog, in
// Queen's shape: {"error": message, "code": code, "field": field}.
// docs/queen.md lists the routes and what each maps to.
package queenapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// DefaultMaxBodyBytes bounds a request body unless Options say otherwise.
const DefaultMaxBodyBytes = 64 << 20

// Options configure the API.
type Options struct {
	// Auth, when not nil, requires a bearer token of the right role and
	// namespaces, as Spool's own API does. Defaults to nil: no auth.
	Auth *auth.Authenticator
	// MaxBodyBytes bounds one request body. Defaults to
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Logger receives internal errors. Defaults to slog.Default().
	Logger *slog.Logger
}

// API is the handler of Queen's routes.
type API struct {
	engine *engine.Engine
	opts   Options
	mux    *http.ServeMux
}

// New returns the API on e.
func New(e *engine.Engine, opts Options) *API {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	a := &API{engine: e, opts: opts, mux: http.NewServeMux()}
	for _, rt := range []struct {
		pattern string
		perm    auth.Permission
		serve   handler
	}{
		{"GET /health", auth.PermPublic, a.health},
		{"POST /api/v1/configure", auth.PermManage, a.configure},
		{"POST /api/v1/push", auth.PermEnqueue, a.push},
		{"GET /api/v1/pop/queue/{queue}", auth.PermWork, a.pop},
		{"GET /api/v1/pop/queue/{queue}/partition/{partition}", auth.PermWork, a.pop},
		{"GET /api/v1/pop", auth.PermWork, a.popWithoutQueue},
		{"POST /api/v1/ack", auth.PermWork, a.ack},
		{"POST /api/v1/ack/batch", auth.PermWork, a.ackBatch},
		{"POST /api/v1/lease/{lease}/extend", auth.PermWork, a.extend},
		{"POST /api/v1/transaction", auth.PermTransact, a.transaction},
		{"GET /api/v1/dlq", auth.PermRead, a.deadLetters},
		{"GET /api/v1/consumer-groups", auth.PermRead, a.listGroups},
		{"DELETE /api/v1/consumer-groups/{group}", auth.PermManage, a.deleteGroup},
		{"POST /api/v1/consumer-groups/{group}/subscription", auth.PermManage, a.moveSubscription},
		{"DELETE /api/v1/consumer-groups/{group}/queues/{queue}", auth.PermManage, a.deleteQueueGroup},
		{"POST /api/v1/consumer-groups/{group}/queues/{queue}/seek", auth.PermManage, a.seek},
	} {
		a.mux.HandleFunc(rt.pattern, a.guard(rt.perm, rt.serve))
	}
	a.mux.HandleFunc("/api/v1/", a.noRoute)
	return a
}

// Serves reports whether path is one of this API's: Queen's routes live
// under /api/v1/, beside its health check.
func Serves(path string) bool { return path == "/health" || strings.HasPrefix(path, "/api/v1/") }

// ChangesOnGet reports whether a GET of path changes something: a pop
// (GET /api/v1/pop/...) leases messages and may create its consumer
// group. siteguard refuses such a GET from another site as it refuses a
// POST. No other GET route of this API changes anything.
func ChangesOnGet(p string) bool {
	clean := path.Clean(p)
	return clean == "/api/v1/pop" || strings.HasPrefix(clean, "/api/v1/pop/")
}

// Refuse answers a request that siteguard refused as this API answers
// every error: the catalog's code and status in Queen's shape.
func (a *API) Refuse(w http.ResponseWriter, r *http.Request, err error) { a.fail(w, r, err) }

// ServeHTTP implements http.Handler. A path not in canonical form (an
// empty, . or .. segment) is not found, as on Spool's own API, rather
// than redirected.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !httpapi.CanonicalPath(r.URL.Path) {
		a.writeJSON(w, http.StatusNotFound, errorJSON{Error: fmt.Sprintf("no route for %s %q: the path is not in canonical form (no empty, . or .. segments)",
			r.Method, r.URL.Path), Code: string(httpapi.CodeNotFound)})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// handler serves one route; p is the caller when auth is on, else nil.
type handler func(w http.ResponseWriter, r *http.Request, p *auth.Principal)

// guard checks the caller's token and permission before h, as the guard
// of Spool's own routes does. The queues a request names are checked by
// its handler with inScope, where they are read.
func (a *API) guard(perm auth.Permission, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		au := a.opts.Auth
		if au == nil || perm == auth.PermPublic {
			h(w, r, nil)
			return
		}
		p, err := au.Authenticate(r.Header.Get("Authorization"))
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spool"`)
			a.fail(w, r, err)
			return
		}
		if err := p.CheckPermission(perm, r.Method, r.URL.Path); err != nil {
			a.fail(w, r, err)
			return
		}
		h(w, r, p)
	}
}

// inScope refuses a queue outside the caller's namespaces (403 naming
// field). A consumer group's lane (the queue that holds its copies) is
// checked as the queue it belongs to.
func inScope(p *auth.Principal, queueName, field string) error {
	if p == nil || !p.Limited() {
		return nil
	}
	if q, _, ok := job.SplitLane(queueName); ok {
		queueName = q
	}
	return p.CheckQueue(queueName, field)
}

// noRoute answers the routes of Queen's API that Spool does not serve.
func (a *API) noRoute(w http.ResponseWriter, r *http.Request) {
	a.writeJSON(w, http.StatusNotFound, errorJSON{Error: fmt.Sprintf("%s %s is not served by Spool's Queen compatibility (docs/queen.md)", r.Method, r.URL.Path), Code: string(httpapi.CodeNotFound)})
}

// popWithoutQueue answers a pop by namespace or task, which Spool has no
// equivalent of.
func (a *API) popWithoutQueue(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
	a.fail(w, r, job.Invalid("queue", "a pop must name its queue: /api/v1/pop/queue/{queue}; pops by namespace or task are not served"))
}

type healthJSON struct {
	Status   string `json:"status"`
	Database string `json:"database"`
	Server   string `json:"server"`
}

func (a *API) health(w http.ResponseWriter, r *http.Request, _ *auth.Principal) {
	if err := a.engine.Ping(r.Context()); err != nil {
		a.writeJSON(w, http.StatusServiceUnavailable, healthJSON{Status: "unhealthy", Database: "disconnected", Server: "spool"})
		return
	}
	a.writeJSON(w, http.StatusOK, healthJSON{Status: "healthy", Database: "connected", Server: "spool"})
}

// errorJSON is an error answer in Queen's shape, with the catalog's code
// and field beside its message.
type errorJSON struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
	Field string `json:"field,omitempty"`
}

// fail answers err as the catalog classifies it. Internal errors are
// logged with their detail and answered without it.
func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	d := httpapi.Describe(err)
	if d.Internal {
		a.opts.Logger.Error("queen request failed", "method", r.Method, "path", r.URL.Path, "code", d.Code, "err", err)
	}
	if d.Code == httpapi.CodeUnavailable || d.Code == httpapi.CodeStorageFull {
		w.Header().Set("Retry-After", "1")
	}
	a.writeJSON(w, d.Status, errorJSON{Error: d.Message, Code: string(d.Code), Field: d.Field})
}

// writeJSON answers status with v as JSON.
func (a *API) writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		a.opts.Logger.Error("queen answer not encoded", "err", err)
		status, body = http.StatusInternalServerError, []byte(`{"error":"internal server error","code":"internal_error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decode reads the body, one JSON object, into dst. Fields dst does not
// know are ignored, as Queen ignores them. An empty body decodes as {}
// when emptyOK is set.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any, emptyOK bool) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.opts.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return job.Invalid("", "the body is larger than %d bytes", a.opts.MaxBodyBytes)
		}
		return fmt.Errorf("read body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if emptyOK {
			return nil
		}
		return job.Invalid("", "the body must be a JSON object")
	}
	if err := json.Unmarshal(body, dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return job.Invalid(typeErr.Field, "must be a JSON %s", typeErr.Type.Kind())
		}
		return job.Invalid("", "the body is not a JSON object: %v", err)
	}
	return nil
}
