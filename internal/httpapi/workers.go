package httpapi

import (
	"net/http"
	"time"
)

// workerJSON is one worker of GET /v1/workers.
type workerJSON struct {
	Name        string    `json:"name"`
	FirstSeenAt time.Time `json:"first_seen_at"`
	LastSeenAt  time.Time `json:"last_seen_at"`
	Active      int       `json:"active"`
}

// workersJSON is the answer of GET /v1/workers.
type workersJSON struct {
	Workers []workerJSON `json:"workers"`
}

// listWorkers answers the workers this node has seen fetch, by name, with
// the active jobs each holds. Its route spans every namespace, so a token
// limited to some never reaches it (ScopeAllQueues).
func (a *API) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := a.engine.Workers(r.Context())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := workersJSON{Workers: make([]workerJSON, len(ws))}
	for i, wk := range ws {
		out.Workers[i] = workerJSON{Name: wk.Name, FirstSeenAt: wk.FirstSeen.UTC(), LastSeenAt: wk.LastSeen.UTC(), Active: wk.Active}
	}
	a.writeJSON(w, http.StatusOK, out)
}
