package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// step is one moment of a job's timeline.
type step struct {
	At     time.Time
	What   string
	Detail string
	// Bad marks a failure.
	Bad bool
}

// failedAttempt is a failed attempt as the job page lists it.
type failedAttempt struct {
	Attempt int
	At      time.Time
	Message shown
}

// jobPage is the data of a job's page. What it shows of the job's data
// is bounded (see shown.go): the page of a job of any size and shape is
// small.
type jobPage struct {
	page
	Job *job.Job
	// Payload, Result and Progress are the job's JSON values, as shown.
	Payload, Result, Progress shown
	// Failures are the latest maxShownErrors failed attempts, oldest
	// first; EarlierFailures counts the ones before them, those the job
	// no longer keeps (Job.ErrorsDropped) included.
	Failures        []failedAttempt
	EarlierFailures int
	// Worker is the name of the worker whose fetch leased the job most
	// recently (see jobWorker); empty when none did or it gave no name.
	Worker   string
	Timeline []step
	// CanRetry, CanCancel and CanDelete say which actions apply to the
	// job in its state.
	CanRetry, CanCancel, CanDelete bool
	Now                            time.Time
}

// timeline orders what a job's timestamps tell of it: created, due,
// the failures of the latest attempts (failures, the latest of the
// job's errors), the latest start, the end. A job keeps only the latest
// start and one error per failed attempt, so the timeline shows what the
// job records, not every hand-out.
func timeline(j *job.Job, failures []failedAttempt) []step {
	steps := []step{{At: j.CreatedAt, What: "created", Detail: "enqueued into " + j.Queue}}
	if !j.RunAt.IsZero() && !j.RunAt.Equal(j.CreatedAt) {
		steps = append(steps, step{At: j.RunAt, What: "due", Detail: "available to fetches from then"})
	}
	for _, f := range failures {
		steps = append(steps, step{At: f.At, What: fmt.Sprintf("attempt %d failed", f.Attempt), Detail: f.Message.Text, Bad: true})
	}
	if !j.StartedAt.IsZero() {
		steps = append(steps, step{At: j.StartedAt, What: fmt.Sprintf("attempt %d started", max(j.Attempt, 1)), Detail: "handed out by a fetch"})
	}
	if !j.FinishedAt.IsZero() {
		steps = append(steps, step{At: j.FinishedAt, What: string(j.State), Bad: j.State == job.StateDead})
	}
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(a.At.UnixNano(), b.At.UnixNano()) })
	return steps
}

// jobPage shows one job: its payload and result, state, attempts and
// their errors, lease, progress and timeline, with the actions its state
// allows. ?part=live answers only the part that refreshes itself. A job
// outside the viewer's namespaces is answered as a missing one.
func (d *Dashboard) jobPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	j, err := d.engine.Get(r.Context(), r.PathValue("id"))
	if err == nil && !v.Allows(j.Queue) {
		err = errNotFound
	}
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	data := &jobPage{
		page: page{Title: "Job " + j.ID, Viewer: v}, Job: j, Now: d.engine.Now(),
		Payload: prettyJSON(j.Payload), Result: prettyJSON(j.Result), Progress: prettyJSON(j.Progress),
		Worker:    jobWorker(j),
		CanRetry:  j.State.Retryable(),
		CanCancel: !j.State.Final() && !j.CancelRequested,
		CanDelete: j.State != job.StateActive,
	}
	latest := j.Errors[max(len(j.Errors)-maxShownErrors, 0):]
	data.EarlierFailures = len(j.Errors) - len(latest) + j.ErrorsDropped
	for _, e := range latest {
		data.Failures = append(data.Failures, failedAttempt{Attempt: e.Attempt, At: e.At, Message: clip(maxShownError, e.Message)})
	}
	data.Timeline = timeline(j, data.Failures)
	if r.URL.Query().Get("part") == "live" {
		d.renderFragment(w, http.StatusOK, "job", "live", data)
		return
	}
	d.render(w, r, http.StatusOK, "job", data)
}

// jobWorker is the name of the worker whose fetch leased j most recently:
// the holder of its lease while it is active, the one that ran it last
// once it is not. It is empty when no fetch has leased j or the fetch
// gave no name. The page shows it as text (html/template escapes it: it
// is the caller's free text) and links it to the worker's entry on the
// workers page for a viewer who may see that page.
func jobWorker(j *job.Job) string { return j.Worker }

// jobAction runs one of a job's actions: retry, cancel or delete. A
// deleted job's page is gone, so the browser is sent to its queue's.
func (d *Dashboard) jobAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	ctx := r.Context()
	id := r.PathValue("id")
	j, err := d.engine.Get(ctx, id)
	if err == nil && !v.Allows(j.Queue) {
		err = errNotFound
	}
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	switch r.PathValue("action") {
	case "retry":
		if _, err := d.engine.Retry(ctx, id); err != nil {
			d.fail(w, r, v, err)
			return
		}
		d.flash(w, http.StatusOK, true, "Retried "+id+": it is available to fetches now.")
	case "cancel":
		j, err := d.engine.Cancel(ctx, id)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		text := "Cancelled " + id + "."
		if j.State == job.StateActive {
			text = "Asked " + id + "'s worker to cancel it: the job ends cancelled when the worker gives it back or its lease runs out."
		}
		d.flash(w, http.StatusOK, true, text)
	case "delete":
		if err := d.engine.Delete(ctx, id); err != nil {
			d.fail(w, r, v, err)
			return
		}
		w.Header().Set("HX-Redirect", "/ui/queues/"+url.PathEscape(j.Queue))
		d.flash(w, http.StatusOK, true, "Deleted "+id+".")
	default:
		d.fail(w, r, v, errNotFound)
	}
}
