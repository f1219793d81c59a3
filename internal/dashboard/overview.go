package dashboard

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// maxOverviewQueues bounds the queues the overview lists.
const maxOverviewQueues = 500

// queueRow is one queue on the overview.
type queueRow struct {
	Name   string
	Paused bool
	Counts map[job.State]int64
	// Completed and Failed are jobs per second over the last minute.
	Completed, Failed float64
	// OldestAvailable is when the longest-waiting available job became
	// available (job.QueueInfo.OldestAvailable); zero when none is.
	OldestAvailable time.Time
}

// overviewPage is the overview's data.
type overviewPage struct {
	page
	Queues []queueRow
	// Hidden counts the queues left out past maxOverviewQueues.
	Hidden int64
	Totals map[job.State]int64
	// Completed and Failed are the node's jobs per second over the last
	// minute (of the viewer's queues when its token is limited).
	Completed, Failed float64
	Now               time.Time
}

// overview is the page at /: every queue (that the viewer may see) with
// its counts, rates, oldest available job and pause, the node's totals
// and the throughput chart. ?part=live answers only the part that
// refreshes itself. Everything comes from one queue listing: a render
// reads no job.
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request, v *viewer) {
	qs, err := d.engine.Queues(r.Context())
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	now := d.engine.Now()
	data := &overviewPage{page: page{Title: "Overview", Viewer: v, Chart: true, Nav: "overview"}, Totals: map[job.State]int64{}, Now: now}
	for i := range qs {
		q := &qs[i]
		if !v.Allows(q.Name) {
			continue
		}
		for s, n := range q.Counts {
			data.Totals[s] += n
		}
		if len(data.Queues) >= maxOverviewQueues {
			data.Hidden++
			continue
		}
		row := queueRow{Name: q.Name, Paused: q.Paused, Counts: q.Counts, OldestAvailable: q.OldestAvailable}
		row.Completed, row.Failed = d.sampler.rate(q.Name, now)
		data.Queues = append(data.Queues, row)
	}
	if allow := v.allowFunc(); allow == nil {
		data.Completed, data.Failed = d.sampler.rate("", now)
	} else {
		for _, row := range data.Queues {
			data.Completed += row.Completed
			data.Failed += row.Failed
		}
	}
	if r.URL.Query().Get("part") == "live" {
		d.renderFragment(w, http.StatusOK, "overview", "live", data)
		return
	}
	d.render(w, r, http.StatusOK, "overview", data)
}

// throughputJSON answers the chart's data: per second over the last
// ?span= seconds (at most ten minutes), completed and failed, of ?queue=
// or of the node (of the viewer's queues when its token is limited).
func (d *Dashboard) throughputJSON(w http.ResponseWriter, r *http.Request, v *viewer) {
	q := r.URL.Query()
	span, _ := strconv.Atoi(q.Get("span"))
	name := q.Get("queue")
	if name != "" && !v.Allows(name) {
		name = "-" // no queue has this name: an empty series
	}
	data := d.sampler.series(name, v.allowFunc(), d.engine.Now(), span)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(data); err != nil {
		d.opts.Logger.Debug("dashboard: write throughput", "err", err)
	}
}
