package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
	"github.com/spoolq/spool/internal/store"
)

// enqueueJSON is one job to enqueue, as sent.
type enqueueJSON struct {
	ID          string              `json:"id"`
	Queue       string              `json:"queue"`
	Kind        string              `json:"kind"`
	Payload     json.RawMessage     `json:"payload"`
	Priority    int                 `json:"priority"`
	RunAt       *time.Time          `json:"run_at"`
	DelayMS     int64               `json:"delay_ms"`
	MaxAttempts int                 `json:"max_attempts"`
	Backoff     *backoffRequestJSON `json:"backoff"`
	LeaseMS     int64               `json:"lease_ms"`
	UniqueKey   string              `json:"unique_key"`
	UniqueForMS int64               `json:"unique_for_ms"`
	Tags        []string            `json:"tags"`
}

type backoffRequestJSON struct {
	Type   job.BackoffKind `json:"type"`
	BaseMS *int64          `json:"base_ms"`
	MaxMS  *int64          `json:"max_ms"`
	Jitter *float64        `json:"jitter"`
}

func (j *enqueueJSON) request() queue.EnqueueRequest {
	req := queue.EnqueueRequest{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority,
		Delay: millis(j.DelayMS), MaxAttempts: j.MaxAttempts, LeaseDuration: millis(j.LeaseMS),
		UniqueKey: j.UniqueKey, UniqueFor: millis(j.UniqueForMS), Tags: j.Tags,
	}
	if j.RunAt != nil {
		req.RunAt = *j.RunAt
	}
	if b := j.Backoff; b != nil {
		req.Backoff.Kind = b.Type
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
	return req
}

// enqueueResultJSON answers one enqueued job.
type enqueueResultJSON struct {
	ID        string    `json:"id"`
	State     job.State `json:"state"`
	Duplicate bool      `json:"duplicate"`
}

func (a *API) enqueue(w http.ResponseWriter, r *http.Request) {
	var in enqueueJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.engine.Enqueue(r.Context(), in.request())
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

type enqueueBatchJSON struct {
	Jobs []enqueueJSON `json:"jobs"`
}

type enqueueBatchResultJSON struct {
	Jobs []enqueueResultJSON `json:"jobs"`
}

func (a *API) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	var in enqueueBatchJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	reqs := make([]queue.EnqueueRequest, len(in.Jobs))
	for i := range in.Jobs {
		reqs[i] = in.Jobs[i].request()
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
	j, err := a.engine.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toJobJSON(j))
}

type jobPageJSON struct {
	Jobs       []jobJSON `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.JobListParams{Queue: q.Get("queue"), State: job.State(q.Get("state")), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			a.writeError(w, r, newError(CodeInvalidArgument, "limit", "limit: must be an integer between 1 and %d", queue.MaxListLimit))
			return
		}
		p.Limit = n
	}
	page, err := a.engine.List(r.Context(), p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, jobPageJSON{Jobs: toJobsJSON(page.Jobs), NextCursor: page.Next})
}

func (a *API) deleteJob(w http.ResponseWriter, r *http.Request) {
	if err := a.engine.Delete(r.Context(), r.PathValue("id")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request) {
	if err := a.decode(w, r, &struct{}{}, true); err != nil {
		a.writeError(w, r, err)
		return
	}
	j, err := a.engine.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toJobJSON(j))
}

func (a *API) retryJob(w http.ResponseWriter, r *http.Request) {
	if err := a.decode(w, r, &struct{}{}, true); err != nil {
		a.writeError(w, r, err)
		return
	}
	j, err := a.engine.Retry(r.Context(), r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toJobJSON(j))
}
