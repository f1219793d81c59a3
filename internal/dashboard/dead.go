package dashboard

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Bounds of the dead letters page.
const (
	// maxGroupRetry bounds the jobs one retry of a group retries.
	maxGroupRetry = 1000
	// maxGroupQueues bounds the queues a group lists.
	maxGroupQueues = 10
	// maxDeadGroups bounds the groups the page lists.
	maxDeadGroups = 200
)

// noError is the message of a dead job that recorded no error.
const noError = "(no error recorded)"

// deadGroup is the dead jobs that share their last error message.
type deadGroup struct {
	// Key names the group in a retry: a digest of its message.
	Key     string
	Message string
	Count   int
	Queues  []string
	// MoreQueues counts the queues left out past maxGroupQueues.
	MoreQueues int
	// Newest is when the group's latest job died, NewestID that job.
	Newest   time.Time
	NewestID string
}

// deadPage is the data of the dead letters page.
type deadPage struct {
	page
	Groups []deadGroup
	// MoreGroups counts the groups left out past maxDeadGroups.
	MoreGroups int
	Total      int
	// Scanned is how many dead jobs the page read; Bounded is set when
	// there were more than maxScan.
	Scanned int
	Bounded bool
	MaxScan int
	Now     time.Time
}

// lastError is the message a dead job is grouped by: its last attempt's
// error.
func lastError(j *job.Job) string {
	if len(j.Errors) == 0 {
		return noError
	}
	return j.Errors[len(j.Errors)-1].Message
}

// groupKey names the group of message.
func groupKey(message string) string {
	sum := sha256.Sum256([]byte(message))
	return hex.EncodeToString(sum[:8])
}

// scanDead calls fn with each dead job of every queue the viewer may see,
// in enqueue order, reading at most maxScan dead jobs; it reports how
// many it read and whether more were left. fn returns false to stop.
func (d *Dashboard) scanDead(ctx context.Context, v *viewer, fn func(j *job.Job) bool) (scanned int, bounded bool, err error) {
	cursor := ""
	for {
		page, err := d.engine.List(ctx, store.JobListParams{State: job.StateDead, Cursor: cursor, Limit: min(scanPage, maxScan-scanned)})
		if err != nil {
			return scanned, false, fmt.Errorf("scan dead jobs: %w", err)
		}
		scanned += len(page.Jobs)
		for _, j := range page.Jobs {
			if v.Allows(j.Queue) && !fn(j) {
				return scanned, page.Next != "", nil
			}
		}
		if cursor = page.Next; cursor == "" {
			return scanned, false, nil
		}
		if scanned >= maxScan {
			return scanned, true, nil
		}
	}
}

// deadPage groups the dead jobs of every queue by their last error, so
// that one bad deploy is one row: how many, in which queues, the newest.
func (d *Dashboard) deadPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	data := &deadPage{page: page{Title: "Dead letters", Viewer: v, Nav: "dead"}, MaxScan: maxScan, Now: d.engine.Now()}
	groups := map[string]*deadGroup{}
	queues := map[string]map[string]bool{}
	var err error
	data.Scanned, data.Bounded, err = d.scanDead(r.Context(), v, func(j *job.Job) bool {
		msg := lastError(j)
		g := groups[msg]
		if g == nil {
			g = &deadGroup{Key: groupKey(msg), Message: msg}
			groups[msg] = g
			queues[msg] = map[string]bool{}
		}
		g.Count++
		data.Total++
		if !queues[msg][j.Queue] {
			queues[msg][j.Queue] = true
			if len(g.Queues) < maxGroupQueues {
				g.Queues = append(g.Queues, j.Queue)
			} else {
				g.MoreQueues++
			}
		}
		if at := cmp.Or(j.FinishedAt, j.CreatedAt); !at.Before(g.Newest) {
			g.Newest, g.NewestID = at, j.ID
		}
		return true
	})
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	for _, g := range groups {
		slices.Sort(g.Queues)
		data.Groups = append(data.Groups, *g)
	}
	slices.SortFunc(data.Groups, func(a, b deadGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.Newest.Compare(a.Newest), cmp.Compare(a.Message, b.Message))
	})
	if len(data.Groups) > maxDeadGroups {
		data.MoreGroups = len(data.Groups) - maxDeadGroups
		data.Groups = data.Groups[:maxDeadGroups]
	}
	if r.URL.Query().Get("part") == "groups" {
		d.renderFragment(w, http.StatusOK, "dead", "groups", data)
		return
	}
	d.render(w, r, http.StatusOK, "dead", data)
}

// deadRetry retries the dead jobs of one group (form field group, the
// group's key): at most maxGroupRetry of them, among the dead jobs a scan
// reads, and says how many.
func (d *Dashboard) deadRetry(w http.ResponseWriter, r *http.Request, v *viewer) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	key := r.PostFormValue("group")
	if key == "" {
		d.message(w, r, v, http.StatusBadRequest, "Name the group to retry.")
		return
	}
	ctx := r.Context()
	var ids []string
	_, bounded, err := d.scanDead(ctx, v, func(j *job.Job) bool {
		if groupKey(lastError(j)) == key {
			ids = append(ids, j.ID)
		}
		return len(ids) < maxGroupRetry
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
	text := "Retried " + plural(retried, "dead job", "dead jobs") + " of the group."
	if gone > 0 {
		text += fmt.Sprintf(" %d had left the dead list already.", gone)
	}
	if bounded || len(ids) == maxGroupRetry {
		text += fmt.Sprintf(" One retry takes at most %d jobs among the first %d dead jobs: retry again for more.", maxGroupRetry, maxScan)
	}
	d.flash(w, http.StatusOK, true, text)
}
