package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/queue"
	"github.com/spoolq/spool/internal/store"
)

type fetchJSON struct {
	Queues  []string `json:"queues"`
	Max     int      `json:"max"`
	WaitMS  int64    `json:"wait_ms"`
	LeaseMS int64    `json:"lease_ms"`
	Worker  string   `json:"worker"`
}

type fetchResultJSON struct {
	Jobs []jobJSON `json:"jobs"`
}

// releaseTimeout bounds the hand-back of jobs claimed for a caller that
// left before its answer.
const releaseTimeout = 5 * time.Second

func (a *API) fetch(w http.ResponseWriter, r *http.Request) {
	var in fetchJSON
	if err := a.decode(w, r, &in, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	jobs, err := a.engine.Fetch(r.Context(), queue.FetchRequest{
		Queues: in.Queues, Max: in.Max, Wait: millis(in.WaitMS), LeaseDuration: millis(in.LeaseMS), Worker: in.Worker,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if r.Context().Err() != nil && len(jobs) > 0 {
		// The caller is gone: hand its jobs back at once rather than let
		// them wait out their leases.
		a.releaseAbandoned(jobs)
		return
	}
	a.writeJSON(w, http.StatusOK, fetchResultJSON{Jobs: toJobsJSON(jobs)})
}

func (a *API) releaseAbandoned(jobs []*job.Job) {
	items := make([]store.JobReleaseItem, len(jobs))
	for i, j := range jobs {
		items[i] = store.JobReleaseItem{ID: j.ID, Token: j.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := a.engine.Release(ctx, items); err != nil {
		a.opts.Logger.Warn("release jobs of a departed fetch; they return when their leases end", "jobs", len(jobs), "err", err)
	}
}
