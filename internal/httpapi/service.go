package httpapi

import (
	"net/http"
	"strconv"

	"github.com/spoolq/spool/api"
)

// statusJSON answers the health routes.
type statusJSON struct {
	Status string `json:"status"`
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	a.writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	if err := a.engine.Ping(r.Context()); err != nil {
		a.opts.Logger.Warn("not ready", "err", err)
		a.writeError(w, r, newError(CodeUnavailable, "", "the store cannot serve requests now"))
		return
	}
	a.writeJSON(w, http.StatusOK, statusJSON{Status: "ready"})
}

// metrics serves the Prometheus metrics, when the API was given them.
func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if a.opts.Metrics == nil {
		a.writeError(w, r, newError(CodeNotFound, "", "this server does not serve metrics"))
		return
	}
	a.opts.Metrics.ServeHTTP(w, r)
}

func (a *API) openapi(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(api.OpenAPI)))
	_, _ = w.Write(api.OpenAPI)
}
