// Package httpapi serves Spool's JSON HTTP API (docs/protocol.md,
// api/openapi.json). Its route table declares, for every route, the
// permission a token needs and where the route's queues come from, and
// one guard enforces both (route.go, scope.go). Its handlers validate
// requests at the edge and call the engine; it holds no queue logic. It
// answers every error from one catalog (errors.go). Bodies are read and
// jobs written by its codec (package wire), tokens are checked by package
// auth, and streams are carried by package streamserver, whose frames run
// through this API's own handler.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/streamserver"
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
	// Metrics serves GET /metrics (the Prometheus text format, see package
	// metrics). Defaults to nil: the route answers 404 not_found.
	Metrics http.Handler
	// MaxEventReaders bounds the GET /v1/events streams served at once;
	// one more is answered 503 unavailable. Defaults to
	// DefaultMaxEventReaders.
	MaxEventReaders int
	// ObserveRequest, when set, is told of every request the API
	// answered, the frames of streams included: the route pattern it
	// matched ("POST /v1/jobs/{id}/ack", "" for none), the status and
	// how long it took. It runs on the request's goroutine and must not
	// block. Defaults to nil.
	ObserveRequest func(route string, status int, elapsed time.Duration)
}

// API is the HTTP handler of a Spool node.
type API struct {
	engine  *engine.Engine
	opts    Options
	mux     *http.ServeMux
	routes  []Route
	streams *streamserver.Server

	enqueueScope scope // the scope of POST /v1/jobs, for serveEnqueues
	// eventReaders holds a place for each event stream being served; its
	// capacity is Options.MaxEventReaders.
	eventReaders chan struct{}
}

// New returns the API on e.
func New(e *engine.Engine, opts Options) *API {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxEventReaders <= 0 {
		opts.MaxEventReaders = DefaultMaxEventReaders
	}
	a := &API{engine: e, opts: opts, mux: http.NewServeMux(), enqueueScope: enqueueScope(),
		eventReaders: make(chan struct{}, opts.MaxEventReaders)}
	a.streams = streamserver.New(streamserver.Options{
		Handler: a, WriteError: a.writeError, MaxBodyBytes: opts.MaxBodyBytes, Logger: opts.Logger,
		Inline: waitsOnlyForStore, Batchable: batchable, ServeBatch: a.serveEnqueues,
	})
	a.register()
	return a
}

// register installs every route with the permission it requires and
// the scope its queues come from. Each is listed once here, so that the
// route table (Routes) is the router's own, not a copy kept by hand, and
// so that what a token may do on a route is read in one line: the guard
// and the route's endpoint enforce exactly this (see scope.go).
func (a *API) register() {
	for _, rt := range []route{
		{"GET", "/healthz", auth.PermPublic, noQueue, plain(a.healthz)},
		{"GET", "/readyz", auth.PermPublic, noQueue, plain(a.readyz)},
		{"GET", "/v1/openapi.json", auth.PermPublic, noQueue, plain(a.openapi)},
		// The stream needs a token to open; each of its frames then needs
		// its own route's permission and scope.
		{"GET", "/v1/stream", auth.PermRead, noQueue, plain(a.streams.Open)},
		// The event stream names queues only to filter; every event it
		// sends is cut to the token's namespaces (events.go).
		{"GET", "/v1/events", auth.PermRead, noQueue, plain(a.events)},
		// The metrics name every queue: a token limited to namespaces may
		// not read them.
		{"GET", "/metrics", auth.PermRead, allQueues, plain(a.metrics)},

		{"POST", "/v1/jobs", auth.PermEnqueue, a.enqueueScope, withBody(a.enqueue)},
		{"POST", "/v1/jobs/batch", auth.PermEnqueue, queuesInBody("jobs[].queue", enqueueBatchQueues), withBody(a.enqueueBatch)},
		{"GET", "/v1/jobs", auth.PermRead, queueInQuery("queue", jobsQueryQueue), withQuery(parseJobsQuery, a.listJobs)},
		{"GET", "/v1/jobs/{id}", auth.PermRead, jobInPath, plain(a.getJob)},
		{"DELETE", "/v1/jobs/{id}", auth.PermManage, jobInPath, plain(a.deleteJob)},
		{"POST", "/v1/jobs/{id}/cancel", auth.PermManage, jobInPath, emptyBody(a.cancelJob)},
		{"POST", "/v1/jobs/{id}/retry", auth.PermManage, jobInPath, emptyBody(a.retryJob)},

		{"POST", "/v1/fetch", auth.PermWork, queuesInBody("queues[]", fetchQueues), withBody(a.fetch)},
		{"POST", "/v1/jobs/{id}/ack", auth.PermWork, jobInPath, withBody(leaseOne(a, a.ackOp()))},
		{"POST", "/v1/jobs/{id}/fail", auth.PermWork, jobInPath, withBody(leaseOne(a, a.failOp()))},
		{"POST", "/v1/jobs/{id}/extend", auth.PermWork, jobInPath, withBody(leaseOne(a, a.extendOp()))},
		{"POST", "/v1/jobs/{id}/release", auth.PermWork, jobInPath, withBody(leaseOne(a, a.releaseOp()))},
		{"POST", "/v1/jobs/{id}/progress", auth.PermWork, jobInPath, withBody(a.progress)},
		{"POST", "/v1/jobs/ack", auth.PermWork, jobsInBody("items[].id", itemIDs[ackItem]), leaseBatch(a.ackOp())},
		{"POST", "/v1/jobs/fail", auth.PermWork, jobsInBody("items[].id", itemIDs[failItem]), leaseBatch(a.failOp())},
		{"POST", "/v1/jobs/extend", auth.PermWork, jobsInBody("items[].id", itemIDs[extendItem]), leaseBatch(a.extendOp())},
		{"POST", "/v1/jobs/release", auth.PermWork, jobsInBody("items[].id", itemIDs[releaseItem]), leaseBatch(a.releaseOp())},
		{"POST", "/v1/transactions", auth.PermTransact, transactionInBody("enqueue[].queue", transactionQueues, transactionLeases),
			transaction(a.transact)},

		{"GET", "/v1/queues", auth.PermRead, queueList, queueListing(a.listQueues)},
		{"GET", "/v1/queues/{name}", auth.PermRead, queueInPath, plain(a.getQueue)},
		{"POST", "/v1/queues/{name}/pause", auth.PermManage, queueInPath, emptyBody(a.pauseQueue)},
		{"POST", "/v1/queues/{name}/resume", auth.PermManage, queueInPath, emptyBody(a.resumeQueue)},
		{"POST", "/v1/queues/{name}/durability", auth.PermManage, queueInPath, withBody(a.setQueueDurability)},
		{"PUT", "/v1/queues/{name}/limits", auth.PermManage, queueInPath, withBody(a.setQueueLimits)},
		{"PATCH", "/v1/queues/{name}/limits", auth.PermManage, queueInPath, withMergePatch(a.patchQueueLimits)},
		{"DELETE", "/v1/queues/{name}/limits", auth.PermManage, queueInPath, plain(a.clearQueueLimits)},
		{"PUT", "/v1/queues/{name}/settings", auth.PermManage, queueInPathAndBody("dead_letter_queue", (*settingsJSON).deadLetterQueue),
			withBody(a.setQueueSettings)},
		{"PATCH", "/v1/queues/{name}/settings", auth.PermManage, queueInPathAndBody("dead_letter_queue", (*settingsJSON).deadLetterQueue),
			withMergePatch(a.patchQueueSettings)},
		{"DELETE", "/v1/queues/{name}/settings", auth.PermManage, queueInPath, plain(a.clearQueueSettings)},
		{"POST", "/v1/queues/{name}/purge", auth.PermManage, queueInPath, emptyBody(a.purgeQueue)},
		{"POST", "/v1/queues/{name}/retry", auth.PermManage, queueInPath, withBody(a.retryQueue)},
		{"POST", "/v1/queues/{name}/delete", auth.PermManage, queueInPath, withBody(a.deleteQueueJobs)},
		{"GET", "/v1/queues/{name}/consumer-groups", auth.PermRead, queueInPath, plain(a.listConsumerGroups)},
		{"GET", "/v1/queues/{name}/consumer-groups/{group}", auth.PermRead, queueInPath, plain(a.getConsumerGroup)},
		{"PUT", "/v1/queues/{name}/consumer-groups/{group}", auth.PermManage, queueInPath, withBody(a.putConsumerGroup)},
		{"DELETE", "/v1/queues/{name}/consumer-groups/{group}", auth.PermManage, queueInPath, plain(a.deleteConsumerGroup)},
		{"POST", "/v1/queues/{name}/consumer-groups/{group}/seek", auth.PermManage, queueInPath, withBody(a.seekConsumerGroup)},

		{"GET", "/v1/schedules", auth.PermRead, scheduleList, scheduleListing(a.listSchedules)},

		// The workers seen fetching are those of every namespace.
		{"GET", "/v1/workers", auth.PermRead, allQueues, plain(a.listWorkers)},
		{"GET", "/v1/schedules/{name}", auth.PermRead, scheduleInPath, plain(a.getSchedule)},
		{"PUT", "/v1/schedules/{name}", auth.PermManage, scheduleWithBody((*scheduleBody).jobQueue), withBody(a.putSchedule)},
		{"DELETE", "/v1/schedules/{name}", auth.PermManage, scheduleInPath, plain(a.deleteSchedule)},
		{"POST", "/v1/schedules/{name}/pause", auth.PermManage, scheduleInPath, emptyBody(a.pauseSchedule)},
		{"POST", "/v1/schedules/{name}/resume", auth.PermManage, scheduleInPath, emptyBody(a.resumeSchedule)},
		{"POST", "/v1/schedules/{name}/trigger", auth.PermManage, scheduleInPath, emptyBody(a.triggerSchedule)},
	} {
		a.handle(rt)
	}
	a.mux.HandleFunc("/", a.noRoute)
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

// waitsOnlyForStore reports whether a request is an enqueue, the
// single-job hot path, which waits for the store's commit and for nothing
// else. A fetch may wait for jobs; the calls on leases come from workers,
// whose next fetch, sent while an ack commits, must not wait for it to be
// read; the rest are rare. The stream runs those on goroutines of their
// own.
func waitsOnlyForStore(method, target string) bool {
	return method == http.MethodPost && (target == "/v1/jobs" || target == "/v1/jobs/batch")
}
