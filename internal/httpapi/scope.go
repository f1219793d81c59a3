package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/job"
)

// This file is where auth is enforced: the guard of every route checks
// the token and its role, and the queues of the route's path; the
// endpoints that decode a request hand it to checkDecoded or
// itemsInScope before their handler sees it. What each route is checked
// for is what the route table declares (see register); no handler checks
// anything itself.

// scope is a route's declaration of where its queues come from, with what
// reads them from a decoded request.
type scope struct {
	Scope
	// in is the type of decoded request name or names reads, for the
	// scopes of bodies and queries.
	in reflect.Type
	// name returns the one queue name a decoded request of type in holds,
	// for a Field without [].
	name func(in any) string
	// names returns the queue names, or the job ids, a decoded request of
	// type in holds, in the order of Field's [].
	names func(in any) []string
	// leases returns the items of a transaction decoded into an in, with
	// the jobs they name, in the order the transaction checks them.
	leases func(in any) []leaseRef
}

// leaseRef is an item of a transaction that names a leased job.
type leaseRef struct {
	// item names the item in the request: "ack[2]".
	item string
	id   string
	// token is the item's lease token; the request was checked to hold
	// one.
	token int64
}

// The scopes of routes whose queues are not in a decoded request.
var (
	// noQueue is the scope of a route that names no queue.
	noQueue = scope{Scope: Scope{Source: ScopeNone}}
	// queueInPath is the scope of a route with a queue {name}.
	queueInPath = scope{Scope: Scope{Source: ScopePathQueue, Field: "name"}}
	// jobInPath is the scope of a route with a job {id}.
	jobInPath = scope{Scope: Scope{Source: ScopePathJob, Field: "id"}}
	// queueList is the scope of a route answering a list of queues.
	queueList = scope{Scope: Scope{Source: ScopeQueueList}}
	// scheduleInPath is the scope of a route with a schedule {name} and
	// no body.
	scheduleInPath = scope{Scope: Scope{Source: ScopePathSchedule, Field: "name"}}
	// scheduleList is the scope of a route answering a list of schedules.
	scheduleList = scope{Scope: Scope{Source: ScopeScheduleList}}
	// allQueues is the scope of a route answering about every queue.
	allQueues = scope{Scope: Scope{Source: ScopeAllQueues}}
)

// scheduleJobField is where the body of a route with scope
// ScopePathSchedule names its job's queue.
const scheduleJobField = "job.queue"

// scheduleWithBody is the scope of a route with a schedule {name} whose
// body, decoded into an In, holds a job template: queue returns the queue
// the template names ("" for the default queue).
func scheduleWithBody[In any](queue func(*In) string) scope {
	return scope{Scope: Scope{Source: ScopePathSchedule, Field: "name"}, in: reflect.TypeFor[In](),
		name: func(in any) string { return queue(in.(*In)) }}
}

// queueInPathAndBody is the scope of a route with a queue {name} whose
// body, decoded into an In, may name another queue at field: name
// returns it, "" when the body names none.
func queueInPathAndBody[In any](field string, name func(*In) string) scope {
	return scope{Scope: Scope{Source: ScopePathQueue, Field: "name", BodyField: field}, in: reflect.TypeFor[In](),
		name: func(in any) string { return name(in.(*In)) }}
}

// queueInBody is the scope of a route whose body, decoded into an In,
// names one queue at field: name returns it ("" for a job that names none,
// which goes to the default queue).
func queueInBody[In any](field string, name func(*In) string) scope {
	return scope{Scope: Scope{Source: ScopeBodyQueues, Field: field}, in: reflect.TypeFor[In](),
		name: func(in any) string { return name(in.(*In)) }}
}

// queuesInBody is the scope of a route whose body, decoded into an In,
// names queues in an array: names lists them in the order of field's []
// ("" for a job that names none, which goes to the default queue).
func queuesInBody[In any](field string, names func(*In) []string) scope {
	return scope{Scope: Scope{Source: ScopeBodyQueues, Field: field}, in: reflect.TypeFor[In](),
		names: func(in any) []string { return names(in.(*In)) }}
}

// queueInQuery is the scope of a route whose query, parsed into an In,
// names a queue in parameter param: name returns it, "" when it is not
// given.
func queueInQuery[In any](param string, name func(*In) string) scope {
	return scope{Scope: Scope{Source: ScopeQuery, Field: param}, in: reflect.TypeFor[In](),
		name: func(in any) string { return name(in.(*In)) }}
}

// jobsInBody is the scope of a route whose body, decoded into an In, names
// jobs by id in the items of a batch: ids lists them in item order.
func jobsInBody[In any](field string, ids func(*In) []string) scope {
	return scope{Scope: Scope{Source: ScopeBodyJobs, Field: field}, in: reflect.TypeFor[In](),
		names: func(in any) []string { return ids(in.(*In)) }}
}

// transactionInBody is the scope of a transaction route, whose body,
// decoded into an In, names the queues of the jobs it enqueues at field:
// names lists them ("" for a job that names none, which goes to the
// default queue); and the jobs of its items: leases lists them, as the
// transaction checks them.
func transactionInBody[In any](field string, names func(*In) []string, leases func(*In) []leaseRef) scope {
	return scope{Scope: Scope{Source: ScopeBodyTransaction, Field: field}, in: reflect.TypeFor[In](),
		names:  func(in any) []string { return names(in.(*In)) },
		leases: func(in any) []leaseRef { return leases(in.(*In)) }}
}

// fieldAt is the scope's Field for its i-th name: "jobs[3].queue".
func (s *scope) fieldAt(i int) string {
	return strings.Replace(s.Field, "[]", "["+strconv.Itoa(i)+"]", 1)
}

// principalKey holds, in a request's context, the caller whose token is
// limited to namespaces.
type principalKey struct{}

// jobKey holds, in a request's context, the job the guard loaded for the
// route's {id}.
type jobKey struct{}

// guard wraps the handler of a route that requires perm and has scope s.
// With auth off, and for public routes, it returns h itself, so that auth
// costs nothing when it is not used. Otherwise it answers 401 without a
// valid token and 403 when the token's role lacks perm. For a token
// limited to namespaces it checks the queue named by the route's path: a
// {name} outside the namespaces is 403; a job {id} whose queue is outside
// them gets the very answer of a job that does not exist. The queues of
// bodies and queries are checked once they are decoded (checkDecoded,
// itemsInScope), with the caller the guard leaves in the context. A
// route about every namespace at once is 403 to such a token.
func (a *API) guard(perm auth.Permission, s *scope, h http.HandlerFunc) http.HandlerFunc {
	au := a.opts.Auth
	if au == nil || perm == auth.PermPublic {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if r, ok := a.authorize(w, r, perm, s); ok {
			h(w, r)
		}
	}
}

// authorize is guard's check of r, with auth on, for a route that
// requires perm and has scope s. It returns r, with the caller in its
// context for a token limited to namespaces (and the job of a {id}), and
// true when the route may go on; else it answers the refusal and reports
// false.
func (a *API) authorize(w http.ResponseWriter, r *http.Request, perm auth.Permission, s *scope) (*http.Request, bool) {
	p, err := a.opts.Auth.Authenticate(r.Header.Get("Authorization"))
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="spool"`)
		a.writeError(w, r, err)
		return r, false
	}
	if err := p.CheckPermission(perm, r.Method, r.URL.Path); err != nil {
		a.writeError(w, r, err)
		return r, false
	}
	if !p.Limited() {
		return r, true
	}
	ctx := context.WithValue(r.Context(), principalKey{}, p)
	switch s.Source {
	case ScopeAllQueues:
		a.writeError(w, r, &auth.ForbiddenError{Message: "this token is limited to namespaces, and this route answers about every queue at once"})
		return r, false
	case ScopePathQueue:
		if err := checkQueue(p, r.PathValue(s.Field), ""); err != nil {
			a.writeError(w, r, err)
			return r, false
		}
	case ScopePathJob:
		j, err := a.jobInScope(r.Context(), p, r.PathValue(s.Field))
		if err != nil {
			a.writeError(w, r, err)
			return r, false
		}
		ctx = context.WithValue(ctx, jobKey{}, j)
	case ScopePathSchedule:
		if err := a.scheduleInScope(r.Context(), p, r.PathValue(s.Field), s.name != nil); err != nil {
			a.writeError(w, r, err)
			return r, false
		}
	}
	return r.WithContext(ctx), true
}

// namespaced returns the caller when auth is on and its token is limited
// to namespaces, else nil. With auth off it costs one comparison.
func (a *API) namespaced(r *http.Request) *auth.Principal {
	if a.opts.Auth == nil {
		return nil
	}
	p, _ := r.Context().Value(principalKey{}).(*auth.Principal)
	return p
}

// checkedJob returns the job the guard loaded for the route's {id}, if it
// loaded one.
func (a *API) checkedJob(r *http.Request) *job.Job {
	if a.opts.Auth == nil {
		return nil
	}
	j, _ := r.Context().Value(jobKey{}).(*job.Job)
	return j
}

// checkDecoded checks the queues that in, a request decoded for a route
// of scope s, names against the namespaces of the caller: forbidden,
// naming the field, for the first queue outside them. A body's job that
// names no queue goes to the default queue, which is checked then; a
// query must name its queue.
func (a *API) checkDecoded(r *http.Request, s *scope, in any) error {
	p := a.namespaced(r)
	if p == nil {
		return nil
	}
	switch {
	case s.Source == ScopePathSchedule && s.name != nil:
		return checkQueue(p, s.name(in), scheduleJobField)
	case s.Source == ScopePathQueue && s.name != nil:
		if name := s.name(in); name != "" {
			return p.CheckQueue(name, s.BodyField)
		}
	case s.Source == ScopeBodyQueues && s.name != nil:
		return checkQueue(p, s.name(in), s.Field)
	case s.Source == ScopeBodyQueues || s.Source == ScopeBodyTransaction:
		for i, name := range s.names(in) {
			if name == "" {
				name = engine.DefaultQueue
			}
			if !p.AllowsQueue(name) {
				return p.CheckQueue(name, s.fieldAt(i))
			}
		}
	case s.Source == ScopeQuery:
		name := s.name(in)
		if name == "" {
			return &auth.ForbiddenError{Field: s.Field, Message: s.Field + ": is required with a token limited to namespaces"}
		}
		return p.CheckQueue(name, s.Field)
	}
	return nil
}

// checkQueue answers forbidden, naming field, unless the principal may
// touch queueName; an empty name is the default queue.
func checkQueue(p *auth.Principal, queueName, field string) error {
	if queueName == "" {
		queueName = engine.DefaultQueue
	}
	return p.CheckQueue(queueName, field)
}

// jobInScope loads the job id for a principal limited to namespaces. A job
// in a queue outside them is reported exactly as a job that does not
// exist, so that a token learns nothing of other namespaces' jobs.
func (a *API) jobInScope(ctx context.Context, p *auth.Principal, id string) (*job.Job, error) {
	j, err := a.engine.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.AllowsQueue(j.Queue) {
		return nil, notFound(id)
	}
	return j, nil
}

// scheduleInScope checks the schedule name for a principal limited to
// namespaces: a name outside them is forbidden, whatever the store
// holds; a schedule whose job goes to a queue outside them is reported
// exactly as a schedule that does not exist, except to a route that
// redefines it (redefine), which it may not: forbidden. A name the store
// does not hold passes: a PUT creates it.
func (a *API) scheduleInScope(ctx context.Context, p *auth.Principal, name string, redefine bool) error {
	if !p.AllowsQueue(name) {
		return &auth.ForbiddenError{Message: fmt.Sprintf("this token may not use schedule %q", name)}
	}
	s, err := a.engine.GetSchedule(ctx, name)
	switch {
	case errors.Is(err, job.ErrNotFound):
		return nil
	case err != nil:
		return err
	case allowsTemplate(p, s):
		return nil
	case redefine:
		return &auth.ForbiddenError{Message: fmt.Sprintf("this token may not redefine schedule %q", name)}
	}
	return fmt.Errorf("schedule %q: %w", name, job.ErrNotFound)
}

// allowsTemplate reports whether the queue of s's job lies in p's
// namespaces.
func allowsTemplate(p *auth.Principal, s *job.Schedule) bool {
	q := templateQueue(s.Job)
	if q == "" {
		q = engine.DefaultQueue
	}
	return p.AllowsQueue(q)
}

// schedulesInScope cuts ss, the answer of a route listing schedules, to
// the schedules the caller may see: name and job queue in its
// namespaces.
func (a *API) schedulesInScope(r *http.Request, ss []*job.Schedule) []*job.Schedule {
	p := a.namespaced(r)
	if p == nil {
		return ss
	}
	var in []*job.Schedule
	for _, s := range ss {
		if p.AllowsQueue(s.Name) && allowsTemplate(p, s) {
			in = append(in, s)
		}
	}
	return in
}

// notFound is the error of a job that does not exist.
func notFound(id string) error {
	return fmt.Errorf("job %q: %w", id, job.ErrNotFound)
}

// itemsInScope reports which items of in, a batch decoded for a route of
// scope s, the caller may touch: keep[i] is false for an item whose job
// does not exist or lies outside its namespaces, which must not be
// applied. keep is nil when every item may be. Each distinct id is looked
// up once.
func (a *API) itemsInScope(r *http.Request, s *scope, in any) (keep []bool, err error) {
	p := a.namespaced(r)
	if p == nil {
		return nil, nil
	}
	ids := s.names(in)
	keep = make([]bool, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		ok, done := seen[id]
		if !done {
			j, err := a.engine.Get(r.Context(), id)
			switch {
			case err == nil:
				ok = p.AllowsQueue(j.Queue)
			case errors.Is(err, job.ErrNotFound):
				ok = false
			default:
				return nil, err
			}
			seen[id] = ok
		}
		keep[i] = ok
	}
	return keep, nil
}

// leasesInScope checks the jobs that in, a transaction decoded for a
// route of scope s, names in its items, for a caller limited to
// namespaces. The transaction refuses its first item that holds no
// current lease; a job outside the namespaces must be refused exactly as
// a missing one would be, so the items are walked in that order: the
// first whose job is missing or outside the namespaces is refused here as
// the store refuses a missing job, a *job.ItemError naming its id, unless
// an item before it holds no current lease, which the transaction then
// refuses itself. Nil when the transaction may go on.
func (a *API) leasesInScope(r *http.Request, s *scope, in any) error {
	p := a.namespaced(r)
	if p == nil {
		return nil
	}
	for _, l := range s.leases(in) {
		j, err := a.engine.Get(r.Context(), l.id)
		switch {
		case errors.Is(err, job.ErrNotFound) || (err == nil && !p.AllowsQueue(j.Queue)):
			return fmt.Errorf("transact: %w", &job.ItemError{Field: job.MissField(l.item, job.ErrNotFound), Err: job.ErrNotFound})
		case err != nil:
			return err
		case j.State != job.StateActive || j.LeaseToken != l.token:
			return nil
		}
	}
	return nil
}

// queuesInScope cuts qs, the answer of a route listing queues, to the
// queues the caller may see.
func (a *API) queuesInScope(r *http.Request, qs []job.QueueInfo) []job.QueueInfo {
	p := a.namespaced(r)
	if p == nil {
		return qs
	}
	in := qs[:0:0]
	for _, q := range qs {
		if p.AllowsQueue(q.Name) {
			in = append(in, q)
		}
	}
	return in
}
