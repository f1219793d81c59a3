package httpapi

import (
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

func (a *API) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := a.engine.Queues(r.Context())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	p := a.namespaced(r)
	out := queuesJSON{Queues: make([]queueJSON, 0, len(qs))}
	for i := range qs {
		if p == nil || p.AllowsQueue(qs[i].Name) {
			out.Queues = append(out.Queues, toQueueJSON(&qs[i]))
		}
	}
	a.writeJSON(w, http.StatusOK, out)
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
	if err := a.decode(w, r, &struct{}{}, true); err != nil {
		a.writeError(w, r, err)
		return
	}
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
func (a *API) setQueueDurability(w http.ResponseWriter, r *http.Request) {
	var in durabilityJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.writeError(w, r, err)
		return
	}
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
	if err := a.decode(w, r, &struct{}{}, true); err != nil {
		a.writeError(w, r, err)
		return
	}
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

func (a *API) retryQueue(w http.ResponseWriter, r *http.Request) {
	a.bulk(w, r, func(b bulkJSON) (int, error) { return a.engine.RetryMany(r.Context(), r.PathValue("name"), b.State) })
}

func (a *API) deleteQueueJobs(w http.ResponseWriter, r *http.Request) {
	a.bulk(w, r, func(b bulkJSON) (int, error) { return a.engine.DeleteMany(r.Context(), r.PathValue("name"), b.State) })
}

func (a *API) bulk(w http.ResponseWriter, r *http.Request, run func(bulkJSON) (int, error)) {
	var in bulkJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	if in.State == "" {
		a.writeError(w, r, job.Invalid("state", "is required"))
		return
	}
	n, err := run(in)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, countJSON{Count: n})
}
