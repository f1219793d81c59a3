package httpapi

import (
	"context"
	"net/http"

	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// queueJSON is a queue on the wire.
type queueJSON struct {
	Name       string              `json:"name"`
	Paused     bool                `json:"paused"`
	Durability job.Durability      `json:"durability"`
	Counts     map[job.State]int64 `json:"counts"`
}

func toQueueJSON(q *store.QueueInfo) queueJSON {
	counts := make(map[job.State]int64, len(job.States))
	for _, s := range job.States {
		counts[s] = q.Counts[s]
	}
	return queueJSON{Name: q.Name, Paused: q.Paused, Durability: wire.DurabilityOf(q.Durability), Counts: counts}
}

// countJSON answers bulk operations.
type countJSON struct {
	Count int `json:"count"`
}

type queuesJSON struct {
	Queues []queueJSON `json:"queues"`
}

// listQueues returns every queue; its route's endpoint cuts the list to
// the queues the caller may see.
func (a *API) listQueues(r *http.Request) ([]store.QueueInfo, error) {
	return a.engine.Queues(r.Context())
}

func (a *API) getQueue(w http.ResponseWriter, r *http.Request) {
	q, err := a.engine.Queue(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (a *API) pauseQueue(w http.ResponseWriter, r *http.Request)  { a.setPaused(w, r, true) }
func (a *API) resumeQueue(w http.ResponseWriter, r *http.Request) { a.setPaused(w, r, false) }

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	q, err := a.engine.SetPaused(r.Context(), r.PathValue("name"), paused)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// durabilityJSON is the body of a queue's durability route.
type durabilityJSON struct {
	Durability *job.Durability `json:"durability"`
}

// setQueueDurability sets the level of the jobs later enqueued into the
// queue without one of their own; the queue's jobs keep theirs.
func (a *API) setQueueDurability(w http.ResponseWriter, r *http.Request, in *durabilityJSON) {
	if in.Durability == nil {
		a.writeError(w, r, job.Invalid("durability", "is required"))
		return
	}
	q, err := a.engine.SetDurability(r.Context(), r.PathValue("name"), *in.Durability)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (a *API) purgeQueue(w http.ResponseWriter, r *http.Request) {
	n, err := a.engine.Purge(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, countJSON{Count: n})
}

// bulkJSON selects the jobs of a bulk retry or delete.
type bulkJSON struct {
	State job.State `json:"state"`
}

func (a *API) retryQueue(w http.ResponseWriter, r *http.Request, in *bulkJSON) {
	a.bulk(w, r, in, a.engine.RetryMany)
}

func (a *API) deleteQueueJobs(w http.ResponseWriter, r *http.Request, in *bulkJSON) {
	a.bulk(w, r, in, a.engine.DeleteMany)
}

// bulk runs a bulk operation on the jobs of the path's queue in the
// state in selects.
func (a *API) bulk(w http.ResponseWriter, r *http.Request, in *bulkJSON, run func(ctx context.Context, queueName string, state job.State) (int, error)) {
	if in.State == "" {
		a.writeError(w, r, job.Invalid("state", "is required"))
		return
	}
	n, err := run(r.Context(), r.PathValue("name"), in.State)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, countJSON{Count: n})
}
