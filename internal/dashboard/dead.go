package dashboard

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/humanize"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of the dead letters page.
const (
	// maxErrorRetry bounds the jobs one retry of an error's jobs retries.
	maxErrorRetry = 1000
	// maxErrorQueues bounds the queues an error's row lists.
	maxErrorQueues = 10
	// maxDeadErrors bounds the errors the page lists.
	maxDeadErrors = 200
)

// noError is the message of a dead job that recorded no error.
const noError = "(no error recorded)"

// deadError is the dead jobs that share their last error message, a row
// of the dead letters page.
type deadError struct {
	// Key names the error in a retry: a digest of its message.
	Key string
	// Message is the start of the error's message (the page shows no
	// more of it).
	Message string
	Count   int
	Queues  []string
	// MoreQueues counts the queues left out past maxErrorQueues.
	MoreQueues int
	// Newest is when the error's latest job died, NewestID that job.
	Newest   time.Time
	NewestID string
}

// deadPage is the data of the dead letters page: the errors of one
// window of the viewer's dead jobs, in enqueue order, of at most maxScan
// jobs (and maxScanBytes of their data).
type deadPage struct {
	page
	Errors []deadError
	// MoreErrors counts the errors left out past maxDeadErrors.
	MoreErrors int
	Total      int
	// From is the cursor the window starts at (empty: at the oldest dead
	// job); Next the cursor of the following window, empty when this one
	// reaches the newest dead job. FirstURL and NextURL go to the first
	// and the next window, LiveURL refreshes this one.
	From, Next                 string
	FirstURL, NextURL, LiveURL string
	// Scanned is how many dead jobs the window holds.
	Scanned int
	MaxScan int
	Now     time.Time
}

// shownMessage bounds the text of an error's message that the page keeps.
const shownMessage = 400

// lastError is the message a dead job is listed by: its last attempt's
// error.
func lastError(j *job.Job) string {
	if len(j.Errors) == 0 {
		return noError
	}
	return j.Errors[len(j.Errors)-1].Message
}

// errorKey names the row of message.
func errorKey(message string) string {
	sum := sha256.Sum256([]byte(message))
	return hex.EncodeToString(sum[:8])
}

// namespaces are the queue name prefixes the viewer is limited to; nil
// when it may see every queue.
func (v *viewer) namespaces() []string {
	if !v.AuthOn() {
		return nil
	}
	return v.p.Namespaces()
}

// scanDead calls fn with each dead job of the queues the viewer may see,
// in enqueue order, from the cursor from (empty: the oldest), reading at
// most maxScan dead jobs and about maxScanBytes of their data. The
// store finds the viewer's jobs (job.ListParams.QueuePrefixes), so
// that the dead jobs of other queues cost nothing. fn returns false to
// stop. scanDead returns how many jobs it read and the cursor of the
// jobs after them, empty when none are left.
func (d *Dashboard) scanDead(ctx context.Context, v *viewer, from string, fn func(j *job.Job) bool) (scanned int, next string, err error) {
	cursor, read := from, 0
	prefixes := v.namespaces()
	for {
		page, err := d.engine.List(ctx, job.ListParams{State: job.StateDead, QueuePrefixes: prefixes, Cursor: cursor, Limit: min(scanPage, maxScan-scanned)})
		if err != nil {
			return scanned, "", fmt.Errorf("scan dead jobs: %w", err)
		}
		scanned += len(page.Jobs)
		for _, j := range page.Jobs {
			read += jobBytes(j)
			if v.Allows(j.Queue) && !fn(j) {
				return scanned, page.Next, nil
			}
		}
		if cursor = page.Next; cursor == "" || scanned >= maxScan || read >= maxScanBytes {
			return scanned, cursor, nil
		}
	}
}

// deadURL is the URL of the dead letters page with the parameters q.
func deadURL(q url.Values) string {
	if len(q) == 0 {
		return "/ui/dead"
	}
	return "/ui/dead?" + q.Encode()
}

// deadPage sorts a window of the viewer's dead jobs (?from= starts it
// at a cursor) by their last error, so that one bad deploy is one row:
// how many, in which queues, the newest. ?part=errors answers only the
// rows.
func (d *Dashboard) deadPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	from := r.URL.Query().Get("from")
	data := &deadPage{page: page{Title: "Dead letters", Viewer: v, Nav: "dead"}, From: from, MaxScan: maxScan, Now: d.engine.Now()}
	rows := map[string]*deadError{}
	queues := map[string]map[string]bool{}
	var err error
	data.Scanned, data.Next, err = d.scanDead(r.Context(), v, from, func(j *job.Job) bool {
		msg := lastError(j)
		key := errorKey(msg)
		e := rows[key]
		if e == nil {
			e = &deadError{Key: key, Message: cut(shownMessage, msg)}
			rows[key] = e
			queues[key] = map[string]bool{}
		}
		e.Count++
		data.Total++
		if !queues[key][j.Queue] {
			queues[key][j.Queue] = true
			if len(e.Queues) < maxErrorQueues {
				e.Queues = append(e.Queues, j.Queue)
			} else {
				e.MoreQueues++
			}
		}
		if at := cmp.Or(j.FinishedAt, j.CreatedAt); !at.Before(e.Newest) {
			e.Newest, e.NewestID = at, j.ID
		}
		return true
	})
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	for _, e := range rows {
		slices.Sort(e.Queues)
		data.Errors = append(data.Errors, *e)
	}
	slices.SortFunc(data.Errors, func(a, b deadError) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.Newest.Compare(a.Newest), cmp.Compare(a.Message, b.Message))
	})
	if len(data.Errors) > maxDeadErrors {
		data.MoreErrors = len(data.Errors) - maxDeadErrors
		data.Errors = data.Errors[:maxDeadErrors]
	}
	data.FirstURL = deadURL(nil)
	live := url.Values{"part": {"errors"}}
	if from != "" {
		live.Set("from", from)
	}
	data.LiveURL = deadURL(live)
	if data.Next != "" {
		data.NextURL = deadURL(url.Values{"from": {data.Next}})
	}
	if r.URL.Query().Get("part") == "errors" {
		d.renderFragment(w, http.StatusOK, "dead", "errors", data)
		return
	}
	d.render(w, r, http.StatusOK, "dead", data)
}

// deadRetry retries the dead jobs of one error (form field error, the
// error's key) in the window of the viewer's dead jobs that starts at
// the form field from (as the page that showed the error): at most
// maxErrorRetry of them, and says how many.
func (d *Dashboard) deadRetry(w http.ResponseWriter, r *http.Request, v *viewer) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	key := r.PostFormValue("error")
	if key == "" {
		d.message(w, r, v, http.StatusBadRequest, "Name the error whose jobs to retry.")
		return
	}
	ctx := r.Context()
	var ids []string
	_, next, err := d.scanDead(ctx, v, r.PostFormValue("from"), func(j *job.Job) bool {
		if errorKey(lastError(j)) == key {
			ids = append(ids, j.ID)
		}
		return len(ids) < maxErrorRetry
	})
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	retried, gone := 0, 0
	for _, id := range ids {
		if _, err := d.engine.Retry(ctx, id); err != nil {
			if errors.Is(err, job.ErrNotFound) || errors.Is(err, job.ErrInvalidState) {
				gone++ // retried, deleted or pruned since the scan
				continue
			}
			d.fail(w, r, v, fmt.Errorf("retry dead job %s: %w", id, err))
			return
		}
		retried++
	}
	text := "Retried " + plural(retried, "dead job", "dead jobs") + " with that error."
	if gone > 0 {
		text += fmt.Sprintf(" %d had left the dead list already.", gone)
	}
	if next != "" || len(ids) == maxErrorRetry {
		text += fmt.Sprintf(" One retry takes at most %s among %s dead jobs from where the page starts: retry again for more.", humanize.Int(maxErrorRetry), humanize.Int(maxScan))
	}
	d.flash(w, http.StatusOK, true, text)
}
