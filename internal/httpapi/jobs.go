package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

// enqueueRequest is the engine's form of j; field names a wire field in
// errors.
func enqueueRequest(j *wire.EnqueueJob, field func(string) string) (engine.EnqueueRequest, error) {
	req := engine.EnqueueRequest{
		Kind: j.Kind, Payload: j.Payload, PayloadValid: true, Priority: j.Priority,
		Delay: millis(j.DelayMS), UniqueFor: millis(j.UniqueForMS), Tags: j.Tags,
	}
	var leaseMS int64
	if err := optional(j.ID, &req.ID, field, "id", "must be a name"); err != nil {
		return req, err
	}
	if err := optional(j.Queue, &req.Queue, field, "queue", "must be a name"); err != nil {
		return req, err
	}
	if err := optional(j.UniqueKey, &req.UniqueKey, field, "unique_key", "must be 1-%d bytes", engine.MaxUniqueKeyBytes); err != nil {
		return req, err
	}
	if err := optional(j.Group, &req.Group, field, "group", "must be 1-%d bytes", engine.MaxGroupBytes); err != nil {
		return req, err
	}
	if err := optional(j.MaxAttempts, &req.MaxAttempts, field, "max_attempts", "must be between 1 and %d", engine.MaxAttempts); err != nil {
		return req, err
	}
	if err := optional(j.LeaseMS, &leaseMS, field, "lease_ms", leaseRule, engine.MinLease.Milliseconds(), engine.MaxLease.Milliseconds()); err != nil {
		return req, err
	}
	if err := optional(j.Durability, &req.Durability, field, "durability", durabilityRule); err != nil {
		return req, err
	}
	if err := optional(j.TraceParent, &req.TraceParent, field, "traceparent", engine.TraceParentRule); err != nil {
		return req, err
	}
	req.LeaseDuration = millis(leaseMS)
	if j.RunAt != nil {
		req.RunAt = *j.RunAt
	}
	if b := j.Backoff; b != nil {
		if err := optional(b.Type, &req.Backoff.Kind, field, "backoff.type", "must be fixed or exponential"); err != nil {
			return req, err
		}
		if b.BaseMS != nil {
			d := millis(*b.BaseMS)
			req.Backoff.Base = &d
		}
		if b.MaxMS != nil {
			d := millis(*b.MaxMS)
			req.Backoff.Max = &d
		}
		req.Backoff.Jitter = b.Jitter
	}
	return req, nil
}

// leaseRule is the range of every lease_ms field.
const leaseRule = "must be between %d and %d"

// durabilityRule is the rule of every durability field.
const durabilityRule = "must be full, process or memory"

// optional copies into dst a field the client may leave out to take its
// default (src is nil then, and dst keeps its zero value, which the engine
// reads as "use the default"). A field sent with that zero value is
// refused with the field's rule instead: the wire accepts only values
// within the documented ranges. field(name) names the field in the error;
// it is called only then.
func optional[T comparable](src *T, dst *T, field func(string) string, name, rule string, args ...any) error {
	if src == nil {
		return nil
	}
	var zero T
	if *src == zero {
		return job.Invalid(field(name), rule+"; leave the field out for its default", args...)
	}
	*dst = *src
	return nil
}

// fieldName returns the wire name of a top-level field.
func fieldName(name string) string { return name }

// enqueueResultJSON answers one enqueued job.
type enqueueResultJSON struct {
	ID        string    `json:"id"`
	State     job.State `json:"state"`
	Duplicate bool      `json:"duplicate"`
}

func (a *API) enqueue(w http.ResponseWriter, r *http.Request, in *wire.EnqueueJob) {
	req, err := enqueueRequest(in, fieldName)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.engine.Enqueue(r.Context(), req)
	a.answerEnqueue(w, r, res, err)
}

// answerEnqueue answers the single enqueue r: its job's result, or err.
func (a *API) answerEnqueue(w http.ResponseWriter, r *http.Request, res engine.EnqueueResult, err error) {
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	a.writeJSON(w, status, enqueueResultJSON{ID: res.ID, State: res.State, Duplicate: res.Duplicate})
}

// enqueuePattern is the route of a single enqueue.
const enqueuePattern = "POST /v1/jobs"

// enqueueScope is the scope of a single enqueue: the queue of its body.
func enqueueScope() scope { return queueInBody("queue", (*wire.EnqueueJob).QueueName) }

// batchable reports whether a stream frame's request may be served in a
// batch (serveEnqueues): a single enqueue.
func batchable(method, target string) bool {
	return method == http.MethodPost && target == "/v1/jobs"
}

// serveEnqueues serves single enqueues that came together on a stream
// (streamserver.Options.ServeBatch) as the route serves each: the same
// token check, body, scope, answers and observation. Only their jobs are
// stored together, by one call to the engine (engine.Engine.EnqueueEach),
// which gives each job the outcome its own enqueue would have.
func (a *API) serveEnqueues(ctx context.Context, rs []*http.Request, ws []http.ResponseWriter) {
	start := time.Now()
	if a.opts.ObserveRequest != nil {
		sws := make([]*statusWriter, len(ws))
		for i := range ws {
			sws[i] = &statusWriter{ResponseWriter: ws[i]}
			ws[i] = sws[i]
		}
		defer func() {
			for _, sw := range sws {
				a.opts.ObserveRequest(enqueuePattern, sw.status(), time.Since(start))
			}
		}()
	}
	s := &a.enqueueScope
	work := enqueuesPool.Get().(*enqueuesWork)
	defer work.release()
	reqs, index := work.reqs[:0], work.index[:0] // index: the request of each of reqs
	ins := slices.Grow(work.ins[:0], len(rs))[:len(rs)]
	work.ins = ins
	for i, r := range rs {
		r.Pattern = enqueuePattern
		if a.opts.Auth != nil {
			var ok bool
			if r, ok = a.authorize(ws[i], r, auth.PermEnqueue, s); !ok {
				continue
			}
			rs[i] = r
		}
		in := &ins[i]
		if !a.decodeChecked(ws[i], r, s, in) {
			continue
		}
		req, err := enqueueRequest(in, fieldName)
		if err != nil {
			a.writeError(ws[i], r, err)
			continue
		}
		reqs = append(reqs, req)
		index = append(index, i)
	}
	work.reqs, work.index = reqs, index
	if len(reqs) == 0 {
		return
	}
	for k, o := range a.engine.EnqueueEach(ctx, reqs) {
		a.answerEnqueue(ws[index[k]], rs[index[k]], o.Result, o.Err)
	}
}

// enqueuesWork holds the arrays serveEnqueues works in, which
// enqueuesPool keeps between batches: each job's body, request and
// frame. Nothing keeps a pointer into them once a batch is answered.
type enqueuesWork struct {
	ins   []wire.EnqueueJob
	reqs  []engine.EnqueueRequest
	index []int
}

var enqueuesPool = sync.Pool{New: func() any { return new(enqueuesWork) }}

// release clears the arrays, so that they keep nothing alive, and
// returns them to enqueuesPool.
func (w *enqueuesWork) release() {
	clear(w.ins)
	clear(w.reqs)
	enqueuesPool.Put(w)
}

type enqueueBatchResultJSON struct {
	Jobs []enqueueResultJSON `json:"jobs"`
}

// enqueueBatchQueues are the queues of a batch's jobs in order, for its
// route's scope.
func enqueueBatchQueues(in *wire.EnqueueBatch) []string {
	names := make([]string, len(in.Jobs))
	for i := range in.Jobs {
		names[i] = in.Jobs[i].QueueName()
	}
	return names
}

func (a *API) enqueueBatch(w http.ResponseWriter, r *http.Request, in *wire.EnqueueBatch) {
	reqs := make([]engine.EnqueueRequest, len(in.Jobs))
	for i := range in.Jobs {
		var err error
		reqs[i], err = enqueueRequest(&in.Jobs[i], func(name string) string { return fmt.Sprintf("jobs[%d].%s", i, name) })
		if err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	res, err := a.engine.EnqueueBatch(r.Context(), reqs)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := enqueueBatchResultJSON{Jobs: make([]enqueueResultJSON, len(res))}
	for i, x := range res {
		out.Jobs[i] = enqueueResultJSON{ID: x.ID, State: x.State, Duplicate: x.Duplicate}
	}
	a.writeJSON(w, http.StatusOK, out)
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request) {
	j := a.checkedJob(r)
	if q := r.URL.Query(); q.Has("wait_ms") {
		ms, err := strconv.ParseInt(q.Get("wait_ms"), 10, 64)
		if err != nil {
			a.writeError(w, r, job.Invalid("wait_ms", "must be a whole number of milliseconds"))
			return
		}
		if j, err = a.engine.Await(r.Context(), r.PathValue("id"), millis(ms)); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	if j == nil {
		var err error
		if j, err = a.engine.Get(r.Context(), r.PathValue("id")); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	wire.WriteJob(w, j)
}

// jobsQuery is the query of GET /v1/jobs.
type jobsQuery struct {
	params job.ListParams
	limit  string // checked by listJobs
}

// parseJobsQuery reads the query of GET /v1/jobs, whose parameters may be
// left out but not sent empty.
func parseJobsQuery(q url.Values) (jobsQuery, error) {
	for _, name := range []string{"queue", "state", "limit", "consumer_group", "worker"} {
		if q.Has(name) && q.Get(name) == "" {
			return jobsQuery{}, job.Invalid(name, "must not be empty; leave the parameter out instead")
		}
	}
	queue := q.Get("queue")
	if g := q.Get("consumer_group"); g != "" {
		// The jobs of a consumer group are those of its lane, the queue
		// that holds its copies.
		if queue == "" {
			return jobsQuery{}, job.Invalid("consumer_group", "goes only with queue")
		}
		if !job.ValidName(queue) || !job.ValidName(g) {
			return jobsQuery{}, job.Invalid("consumer_group", "must be a consumer group name of a queue name")
		}
		queue = job.LaneName(queue, g)
	}
	return jobsQuery{
		params: job.ListParams{Queue: queue, State: job.State(q.Get("state")), Worker: q.Get("worker"), Cursor: q.Get("cursor")},
		limit:  q.Get("limit"),
	}, nil
}

// jobsQueryQueue is the queue a listing names, for its route's scope.
func jobsQueryQueue(q *jobsQuery) string { return q.params.Queue }

func (a *API) listJobs(w http.ResponseWriter, r *http.Request, q *jobsQuery) {
	p := q.params
	if s := q.limit; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			a.writeError(w, r, newError(CodeInvalidArgument, "limit", "limit: must be an integer between 1 and %d", engine.MaxListLimit))
			return
		}
		p.Limit = n
	}
	page, err := a.engine.List(r.Context(), p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wire.WriteJobs(w, page.Jobs, page.Next)
}

func (a *API) deleteJob(w http.ResponseWriter, r *http.Request) {
	if err := a.engine.Delete(r.Context(), r.PathValue("id")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) {
	j, err := a.engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wire.WriteJob(w, j)
}

func (a *API) retryJob(w http.ResponseWriter, r *http.Request) {
	j, err := a.engine.Retry(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	wire.WriteJob(w, j)
}
