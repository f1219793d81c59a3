package httpapi

import (
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
)

// consumerGroupStartJSON is where a consumer group starts, or moves to with a
// seek: the body of PUT /v1/queues/{name}/consumer-groups/{group} and of
// its seek.
type consumerGroupStartJSON struct {
	// Start is "beginning" (the default), "new" or "time".
	Start string `json:"start"`
	// From is the first creation time for "time".
	From *time.Time `json:"from"`
}

// request is the engine's form of in for the consumer group of r's path.
func (in *consumerGroupStartJSON) request(r *http.Request) (engine.ConsumerGroupRequest, error) {
	req := engine.ConsumerGroupRequest{Queue: r.PathValue("name"), Name: r.PathValue("group")}
	switch in.Start {
	case "", "beginning":
		req.Start = job.StartBeginning
	case "new":
		req.Start = job.StartNew
	case "time":
		req.Start = job.StartAt
		if in.From == nil {
			return req, job.Invalid("from", "is required with \"start\": \"time\"")
		}
		req.From = *in.From
	default:
		return req, job.Invalid("start", "must be beginning, new or time")
	}
	if in.From != nil && req.Start != job.StartAt {
		return req, job.Invalid("from", "goes only with \"start\": \"time\"")
	}
	return req, nil
}

// consumerGroupJSON is a consumer group on the wire, with its lag.
type consumerGroupJSON struct {
	Queue     string              `json:"queue"`
	Name      string              `json:"name"`
	CreatedAt time.Time           `json:"created_at"`
	Counts    map[job.State]int64 `json:"counts"`
	// Pending is how many jobs the consumer group has not finished.
	Pending int64 `json:"pending"`
	// OldestPendingAt is when the oldest of them was enqueued; LagMS is
	// its age.
	OldestPendingAt *time.Time `json:"oldest_pending_at,omitempty"`
	LagMS           int64      `json:"lag_ms"`
	// Replayed is, in a seek's answer, how many jobs the consumer group
	// has to do again.
	Replayed *int `json:"replayed,omitempty"`
}

func toConsumerGroupJSON(g *job.ConsumerGroup, now time.Time) consumerGroupJSON {
	counts := make(map[job.State]int64, len(job.States))
	var pending int64
	for _, s := range job.States {
		counts[s] = g.Counts[s]
		if s.Pending() {
			pending += g.Counts[s]
		}
	}
	out := consumerGroupJSON{Queue: g.Queue, Name: g.Name, CreatedAt: g.CreatedAt, Counts: counts, Pending: pending,
		OldestPendingAt: timeOrNil(g.OldestPending)}
	if !g.OldestPending.IsZero() {
		out.LagMS = max(0, now.Sub(g.OldestPending).Milliseconds())
	}
	return out
}

func (a *API) putConsumerGroup(w http.ResponseWriter, r *http.Request, in *consumerGroupStartJSON) {
	req, err := in.request(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	g, created, err := a.engine.CreateConsumerGroup(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, createdStatus(created), toConsumerGroupJSON(g, a.engine.Now()))
}

func (a *API) seekConsumerGroup(w http.ResponseWriter, r *http.Request, in *consumerGroupStartJSON) {
	req, err := in.request(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	g, n, err := a.engine.SeekConsumerGroup(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := toConsumerGroupJSON(g, a.engine.Now())
	out.Replayed = &n
	a.writeJSON(w, http.StatusOK, out)
}

func (a *API) getConsumerGroup(w http.ResponseWriter, r *http.Request) {
	g, err := a.engine.ConsumerGroup(r.Context(), r.PathValue("name"), r.PathValue("group"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toConsumerGroupJSON(g, a.engine.Now()))
}

func (a *API) listConsumerGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := a.engine.ConsumerGroups(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	now := a.engine.Now()
	out := struct {
		ConsumerGroups []consumerGroupJSON `json:"consumer_groups"`
	}{ConsumerGroups: make([]consumerGroupJSON, len(gs))}
	for i := range gs {
		out.ConsumerGroups[i] = toConsumerGroupJSON(&gs[i], now)
	}
	a.writeJSON(w, http.StatusOK, out)
}

func (a *API) deleteConsumerGroup(w http.ResponseWriter, r *http.Request) {
	if err := a.engine.DeleteConsumerGroup(r.Context(), r.PathValue("name"), r.PathValue("group")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
