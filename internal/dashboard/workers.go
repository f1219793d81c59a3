package dashboard

import (
	"net/http"
	"net/url"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of the workers page.
const (
	// maxWorkerRows bounds the workers the page lists (the engine
	// remembers up to engine.MaxWorkers of them).
	maxWorkerRows = 500
	// heldPerPage is how many of a worker's active jobs one page of its
	// listing shows.
	heldPerPage = 100
)

// workersPage is the data of the workers page.
type workersPage struct {
	page
	// Workers are the workers this node has seen fetch, by name, at most
	// maxWorkerRows of them; Hidden counts the ones left out.
	Workers []engine.WorkerInfo
	Hidden  int
	// Worker is the worker whose active jobs the page lists (?worker=);
	// empty for none. Selected is its entry in the node's registry, nil
	// when this node has not seen it fetch.
	Worker   string
	Selected *engine.WorkerInfo
	// Held is one page of the active jobs Worker holds, from Cursor;
	// NextURL and FirstURL page through them.
	Held     []*job.Job
	Cursor   string
	NextURL  string
	FirstURL string
	// LiveURL refreshes the page's live part, on the same page of jobs.
	LiveURL string
	Now     time.Time
}

// workersPage lists the workers this node has seen fetch, with when it
// first and last saw each and how many active jobs each holds; with
// ?worker= it also lists one page of the active jobs that worker holds
// (?cursor= pages on). ?part=live answers only the part that refreshes
// itself. A worker's name and jobs span every queue, so a token limited
// to namespaces is refused (403), as the API refuses it GET /v1/workers.
func (d *Dashboard) workersPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	if !v.SeesWorkers() {
		d.message(w, r, v, http.StatusForbidden, "A token limited to namespaces may not see the workers: their names and the jobs they hold span every queue.")
		return
	}
	ctx := r.Context()
	query := r.URL.Query()
	ws, err := d.engine.Workers(ctx)
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	data := &workersPage{
		page:   page{Title: "Workers", Viewer: v, Nav: "workers"},
		Worker: query.Get("worker"), Cursor: query.Get("cursor"), Now: d.engine.Now(),
	}
	live := url.Values{"part": {"live"}}
	if data.Worker != "" {
		data.Title = "Worker " + cut(80, data.Worker)
		name := job.WorkerName(data.Worker)
		for i := range ws {
			if ws[i].Name == name {
				sel := ws[i]
				data.Selected = &sel
				break
			}
		}
		held, err := d.engine.List(ctx, job.ListParams{State: job.StateActive, Worker: data.Worker, Cursor: data.Cursor, Limit: heldPerPage})
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		data.Held = held.Jobs
		data.FirstURL = workersURL(url.Values{"worker": {data.Worker}})
		if held.Next != "" {
			data.NextURL = workersURL(url.Values{"worker": {data.Worker}, "cursor": {held.Next}})
		}
		live.Set("worker", data.Worker)
		if data.Cursor != "" {
			live.Set("cursor", data.Cursor)
		}
	}
	data.LiveURL = workersURL(live)
	if len(ws) > maxWorkerRows {
		data.Hidden = len(ws) - maxWorkerRows
		ws = ws[:maxWorkerRows]
	}
	data.Workers = ws
	if query.Get("part") == "live" {
		d.renderFragment(w, http.StatusOK, "workers", "live", data)
		return
	}
	d.render(w, r, http.StatusOK, "workers", data)
}

// workersURL is the URL of the workers page with the parameters q.
func workersURL(q url.Values) string {
	if len(q) == 0 {
		return "/ui/workers"
	}
	return "/ui/workers?" + q.Encode()
}
