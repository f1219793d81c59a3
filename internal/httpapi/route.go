package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

// Route is one registered method and path pattern, as the route table
// declares it.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Pattern is the path pattern, with {name} wildcards.
	Pattern string
	// Permission is what the route requires of a token when auth is on.
	Permission auth.Permission
	// Scope is where the route's queues come from: what is checked
	// against the namespaces of a token limited to some.
	Scope Scope
}

// Scope says where a route names its queues, so that one guard can check
// them against a token's namespaces on every route alike.
type Scope struct {
	// Source is where the queues are named.
	Source ScopeSource
	// Field names them on the wire: the path wildcard ("name", "id"), the
	// query parameter ("queue"), or the body field, with [] standing for
	// every element of an array ("jobs[].queue", "queues[]",
	// "items[].id"). It is empty when the route names no queue.
	Field string
	// BodyField names, for a route with a queue in its path, the body
	// field that names another queue the route touches
	// ("dead_letter_queue"): a queue there outside the namespaces is 403
	// forbidden naming the field. It is empty for other routes.
	BodyField string
}

// ScopeSource is where a route names its queues.
type ScopeSource string

// The sources of scopes, with what a token limited to namespaces gets when
// a queue lies outside them (docs/protocol.md, "Auth").
const (
	// ScopeNone routes name no queue: the health checks, the OpenAPI
	// document, and the stream, each of whose frames is checked as its
	// own route.
	ScopeNone ScopeSource = "none"
	// ScopePathQueue routes name a queue in the path, and may name
	// another in the body (Scope.BodyField): 403 forbidden.
	ScopePathQueue ScopeSource = "path-queue"
	// ScopePathJob routes name a job by id in the path: a job outside the
	// namespaces is answered exactly like a missing one, 404 not_found.
	ScopePathJob ScopeSource = "path-job"
	// ScopeQuery routes name a queue in a query parameter, which a
	// limited token must give: 403 forbidden.
	ScopeQuery ScopeSource = "query"
	// ScopeBodyQueues routes name queues in the body, checked as soon as
	// it is decoded: 403 forbidden naming the field. A job without a
	// queue goes to the default queue, which is checked then.
	ScopeBodyQueues ScopeSource = "body-queues"
	// ScopeBodyJobs routes name jobs by id in the items of a batch: an
	// item whose job lies outside the namespaces is not applied and is
	// answered like a missing job, not_found; the other items are
	// applied.
	ScopeBodyJobs ScopeSource = "body-jobs"
	// ScopeBodyTransaction routes name queues and jobs in the body of a
	// transaction, which applies all of its items or none: the queues of
	// the jobs to enqueue (Field, "enqueue[].queue") are checked as soon
	// as the body is decoded, 403 forbidden naming the field; the jobs of
	// the items to ack and fail ("ack[].id", "fail[].id") once the items
	// are read, where a job outside the namespaces is answered exactly
	// like a missing job, 404 not_found naming the item, and nothing of
	// the transaction is applied.
	ScopeBodyTransaction ScopeSource = "body-transaction"
	// ScopeQueueList routes answer a list of queues, cut to those inside
	// the namespaces.
	ScopeQueueList ScopeSource = "queue-list"
	// ScopePathSchedule routes name a cron schedule in the path. A
	// schedule belongs to the namespaces its name and the queue of its
	// job template both lie in: a name outside the token's namespaces is
	// 403 forbidden; a schedule whose job goes to a queue outside them is
	// answered exactly like a missing one, 404 not_found, and may not be
	// redefined, 403; a job template in the body naming such a queue is
	// 403 forbidden naming job.queue.
	ScopePathSchedule ScopeSource = "path-schedule"
	// ScopeScheduleList routes answer a list of schedules, cut to those
	// the namespaces hold.
	ScopeScheduleList ScopeSource = "schedule-list"
	// ScopeAllQueues routes answer about every queue at once and cannot
	// be cut to some (the metrics; the workers seen fetching, whatever
	// queues they fetch from): a token limited to namespaces is 403
	// forbidden, whatever it asks.
	ScopeAllQueues ScopeSource = "all-queues"
)

// schedulePath is the start of the path of every route that names a
// schedule.
const schedulePath = "/v1/schedules/{name}"

// route is one entry of the route table: what it requires of a token,
// where its queues come from, and how it is served.
type route struct {
	method, pattern string
	perm            auth.Permission
	scope           scope
	serve           endpoint
}

// endpointKind is how an endpoint reads its request, which decides the
// scopes it can be declared with.
type endpointKind int

const (
	// servesRequest endpoints read the request themselves, if at all.
	servesRequest endpointKind = iota + 1
	// servesBody endpoints are handed the decoded JSON body.
	servesBody
	// servesQuery endpoints are handed the parsed query.
	servesQuery
	// servesItems endpoints apply the items of a batch body.
	servesItems
	// servesTransaction endpoints apply a transaction body.
	servesTransaction
	// servesQueueList endpoints answer a list of queues.
	servesQueueList
	// servesScheduleList endpoints answer a list of schedules.
	servesScheduleList
)

// endpoint is how a route is served. Endpoints that decode a request run
// the scope's check of the decoded request themselves, between decoding
// and the handler, so that no handler can skip it.
type endpoint struct {
	kind endpointKind
	// in is the type of the decoded request, for the endpoints that
	// decode one: a scope reading the request must read this type.
	in reflect.Type
	// build makes the route's handler, which checks the request against
	// s where the request is decoded.
	build func(a *API, s *scope) http.HandlerFunc
}

// plain serves a route with h, which reads nothing a scope checks: the
// route's queues come from its path, or it names none.
func plain(h http.HandlerFunc) endpoint {
	return endpoint{kind: servesRequest, build: func(*API, *scope) http.HandlerFunc { return h }}
}

// emptyBody serves a route whose body is empty or {} with h.
func emptyBody(h http.HandlerFunc) endpoint {
	return endpoint{kind: servesRequest, build: func(a *API, _ *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if err := a.decode(w, r, &struct{}{}, true); err != nil {
				a.writeError(w, r, err)
				return
			}
			h(w, r)
		}
	}}
}

// withBody serves a route whose body is a JSON object of type In: it
// decodes the body, checks the queues it names as the route's scope
// declares, and only then hands it to h.
func withBody[In any](h func(w http.ResponseWriter, r *http.Request, in *In)) endpoint {
	return endpoint{kind: servesBody, in: reflect.TypeFor[In](), build: func(a *API, s *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var in In
			if a.decodeChecked(w, r, s, &in) {
				h(w, r, &in)
			}
		}
	}}
}

// withMergePatch serves a route whose body is a JSON merge patch (RFC
// 7396) of type In: as withBody, except that members may be null, and h
// is handed the paths of the null members with the decoded body.
func withMergePatch[In any](h func(w http.ResponseWriter, r *http.Request, in *In, nulls []string)) endpoint {
	return endpoint{kind: servesBody, in: reflect.TypeFor[In](), build: func(a *API, s *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var in In
			nulls, err := wire.DecodeMergePatch(w, r, a.opts.MaxBodyBytes, &in)
			if err == nil {
				err = a.checkDecoded(r, s, &in)
			}
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			h(w, r, &in, nulls)
		}
	}}
}

// decodeChecked decodes r's body into in and checks the queues it names
// as the route's scope declares; it answers the error and reports false
// when either fails.
func (a *API) decodeChecked(w http.ResponseWriter, r *http.Request, s *scope, in any) bool {
	if err := a.decode(w, r, in, false); err != nil {
		a.writeError(w, r, err)
		return false
	}
	if err := a.checkDecoded(r, s, in); err != nil {
		a.writeError(w, r, err)
		return false
	}
	return true
}

// withQuery serves a route whose query parse reads into an In: parse
// refuses what the query may not hold, then the queue the In names is
// checked as the route's scope declares, and only then is it handed to h.
func withQuery[In any](parse func(url.Values) (In, error), h func(w http.ResponseWriter, r *http.Request, in *In)) endpoint {
	return endpoint{kind: servesQuery, in: reflect.TypeFor[In](), build: func(a *API, s *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			in, err := parse(r.URL.Query())
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			if err := a.checkDecoded(r, s, &in); err != nil {
				a.writeError(w, r, err)
				return
			}
			h(w, r, &in)
		}
	}}
}

// queueListing serves a route that answers the queues list returns: it
// cuts them to those the caller may see, then writes them.
func queueListing(list func(r *http.Request) ([]job.QueueInfo, error)) endpoint {
	return listing(servesQueueList, list, (*API).queuesInScope, func(qs []job.QueueInfo) any {
		out := queuesJSON{Queues: make([]queueJSON, len(qs))}
		for i := range qs {
			out.Queues[i] = toQueueJSON(&qs[i])
		}
		return out
	})
}

// scheduleListing serves a route that answers the schedules list
// returns: it cuts them to those the caller may see, then writes them.
func scheduleListing(list func(r *http.Request) ([]*job.Schedule, error)) endpoint {
	return listing(servesScheduleList, list, (*API).schedulesInScope, func(ss []*job.Schedule) any {
		out := schedulesJSON{Schedules: make([]scheduleJSON, len(ss))}
		for i, s := range ss {
			out.Schedules[i] = toScheduleJSON(s)
		}
		return out
	})
}

// listing serves a route of kind that answers what list returns, cut by
// cut to what the caller may see and written as answer makes it.
func listing[T any](kind endpointKind, list func(r *http.Request) ([]T, error),
	cut func(a *API, r *http.Request, items []T) []T, answer func(items []T) any) endpoint {
	return endpoint{kind: kind, build: func(a *API, _ *scope) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			items, err := list(r)
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			a.writeJSON(w, http.StatusOK, answer(cut(a, r, items)))
		}
	}}
}

// handle registers rt behind the guard of its permission and scope. A
// route without a valid permission, or without a scope that fits its
// pattern and its endpoint, is a programmer error: it panics, so that no
// route can be added without deciding who may call it and which queues it
// touches.
func (a *API) handle(rt route) {
	if !rt.perm.Valid() {
		panic(fmt.Sprintf("httpapi: route %s %s has no valid permission", rt.method, rt.pattern))
	}
	if err := rt.check(); err != nil {
		panic(fmt.Sprintf("httpapi: route %s %s: %v", rt.method, rt.pattern, err))
	}
	s := rt.scope
	a.mux.HandleFunc(rt.method+" "+rt.pattern, a.guard(rt.perm, &s, rt.serve.build(a, &s)))
	a.routes = append(a.routes, Route{Method: rt.method, Pattern: rt.pattern, Permission: rt.perm, Scope: s.Scope})
}

// check reports why rt's scope does not fit its pattern, its permission
// or its endpoint.
func (rt *route) check() error {
	s, e := &rt.scope, &rt.serve
	if s.Source == "" {
		return errors.New("no scope: declare where its queues come from (noQueue if it names none)")
	}
	if e.build == nil {
		return errors.New("no endpoint")
	}
	if rt.perm == auth.PermPublic && s.Source != ScopeNone {
		return errors.New("a public route has no token whose namespaces could be checked: its scope must be noQueue")
	}
	schedule := strings.HasPrefix(rt.pattern, schedulePath)
	for _, w := range []struct {
		wildcard string
		source   ScopeSource
		applies  bool
	}{{"{name}", ScopePathQueue, !schedule}, {"{name}", ScopePathSchedule, schedule}, {"{id}", ScopePathJob, true}} {
		if w.applies && strings.Contains(rt.pattern, w.wildcard) != (s.Source == w.source) {
			return fmt.Errorf("a pattern with %s, and only such a pattern, has scope %s; this one has %s", w.wildcard, w.source, s.Source)
		}
	}
	if s.Source == ScopePathSchedule && !schedule {
		return fmt.Errorf("scope %s is for the routes under %s", s.Source, schedulePath)
	}
	want := map[ScopeSource]endpointKind{ScopeQuery: servesQuery, ScopeBodyQueues: servesBody, ScopeBodyJobs: servesItems,
		ScopeBodyTransaction: servesTransaction, ScopeQueueList: servesQueueList, ScopeScheduleList: servesScheduleList}
	if k, ok := want[s.Source]; ok && e.kind != k {
		return fmt.Errorf("scope %s needs an endpoint that hands it the request it reads", s.Source)
	}
	if s.Source == ScopePathSchedule && (s.name != nil) != (e.kind == servesBody) {
		return errors.New("a schedule route with a body must check its job's queue, and only such a route")
	}
	if s.Source == ScopePathQueue && (s.name != nil) != (s.BodyField != "") {
		return errors.New("a queue route checks a queue of its body exactly when it names the body's field")
	}
	if s.Source == ScopePathQueue && s.name != nil && e.kind != servesBody {
		return errors.New("a queue route that checks a queue of its body needs an endpoint that decodes it")
	}
	if (e.kind == servesItems || e.kind == servesTransaction || e.kind == servesQueueList || e.kind == servesScheduleList ||
		e.kind == servesQuery) && want[s.Source] != e.kind {
		return fmt.Errorf("its endpoint needs the scope that checks it, not %s", s.Source)
	}
	if s.Source == ScopeBodyQueues && strings.Contains(s.Field, "[]") != (s.names != nil) {
		return fmt.Errorf("field %q names one queue but the scope reads many, or many but the scope reads one", s.Field)
	}
	if s.Source == ScopeBodyTransaction && (s.names == nil || s.leases == nil || !strings.Contains(s.Field, "[]")) {
		return errors.New("a transaction's scope reads the queues of its jobs to enqueue and the jobs of its items")
	}
	if s.in != nil && s.in != e.in {
		return fmt.Errorf("scope %s reads a %v, but the endpoint decodes a %v", s.Source, s.in, e.in)
	}
	return nil
}
