package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/httpapi/wire"
)

// decode reads the request body, which must be exactly one JSON object of
// the shape of dst with no unknown fields (see wire.DecodeBody). An absent
// or empty body decodes as {} when emptyOK is set.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any, emptyOK bool) error {
	return wire.DecodeBody(w, r, a.opts.MaxBodyBytes, dst, emptyOK)
}

// writeJSON answers status with v as JSON.
func (a *API) writeJSON(w http.ResponseWriter, status int, v any) {
	if err := wire.WriteJSON(w, status, v); err != nil {
		a.opts.Logger.Error("answer not written", "err", err)
		a.writeError(w, nil, newError(CodeInternal, "", "internal server error"))
	}
}

// writeError answers err: a catalog error as it is, anything else through
// classify. Internal errors are logged with detail and answered without it.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e, internal := classify(err)
	if internal {
		method, path := "", ""
		if r != nil {
			method, path = r.Method, r.URL.Path
		}
		a.opts.Logger.Error("request failed", "method", method, "path", path, "code", e.Code, "err", err)
	}
	status := e.Status()
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if e.Code == CodeUnavailable || e.Code == CodeStorageFull {
		w.Header().Set("Retry-After", "1")
	}
	a.writeJSON(w, status, errorBody{Error: *e})
}

// millis turns wire milliseconds into a duration, saturating instead of
// overflowing so that absurd values fail validation rather than wrap.
func millis(ms int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64
	case ms < -limit:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// timeOrNil is t for an answer field that is left out when t is zero.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// createdStatus is the status of a put that created what it names (201)
// or replaced it (200).
func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}
