package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/job"
)

// Bounds of the queue page.
const (
	// jobsPerPage is how many jobs a page of a listing shows (a filtered
	// page may show more: the matches of the whole listing pages it read).
	jobsPerPage = 50
	// maxScan bounds the jobs a filtered listing (or the dead letters
	// page) reads for one page.
	maxScan = 5000
	// maxScanBytes bounds about how much of the jobs' data (payloads,
	// results, progress and errors) a scan reads: it stops after the
	// listing page that passes it.
	maxScanBytes = 64 << 20
	// scanPage is how many jobs each listing call of a scan reads.
	scanPage = 100
	// maxQueueSchedules bounds the schedules the queue page lists.
	maxQueueSchedules = 100
	// maxQueueGroups bounds the consumer groups the queue page lists.
	maxQueueGroups = 100
	// maxFilterBytes bounds a filter's text.
	maxFilterBytes = 256
)

// jobFilter narrows a listing; a zero field lets every job through.
type jobFilter struct {
	Kind string
	Tag  string
	// Text is looked for, ignoring case, in the payload and the errors.
	Text string
}

func (f jobFilter) Any() bool { return f.Kind != "" || f.Tag != "" || f.Text != "" }

func (f jobFilter) match(j *job.Job) bool {
	if f.Kind != "" && j.Kind != f.Kind {
		return false
	}
	if f.Tag != "" && !slices.Contains(j.Tags, f.Tag) {
		return false
	}
	if f.Text == "" {
		return true
	}
	text := []byte(strings.ToLower(f.Text))
	if bytes.Contains(bytes.ToLower(j.Payload), text) {
		return true
	}
	for _, e := range j.Errors {
		if strings.Contains(strings.ToLower(e.Message), f.Text) {
			return true
		}
	}
	return false
}

// jobBytes is about how much data j carries: its payload, result,
// progress and errors.
func jobBytes(j *job.Job) int {
	n := len(j.Payload) + len(j.Result) + len(j.Progress)
	for _, e := range j.Errors {
		n += len(e.Message)
	}
	return n
}

// listing is one page of a queue's jobs.
type listing struct {
	Jobs []*job.Job
	// Next is the cursor of the following page; empty on the last.
	Next string
	// Scanned is how many jobs a filtered listing read; Bounded is set
	// when it stopped at maxScan jobs (or maxScanBytes) without filling
	// its page.
	Scanned int
	Bounded bool
}

// list reads one page of the jobs of queue in state (every state when
// empty) from cursor: jobsPerPage jobs without a filter; with one, the
// matches of as many listing pages as fill a page, reading at most
// maxScan jobs.
func (d *Dashboard) list(ctx context.Context, queueName string, state job.State, cursor string, f jobFilter) (*listing, error) {
	if !f.Any() {
		page, err := d.engine.List(ctx, job.ListParams{Queue: queueName, State: state, Cursor: cursor, Limit: jobsPerPage})
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		return &listing{Jobs: page.Jobs, Next: page.Next}, nil
	}
	f.Text = strings.ToLower(f.Text)
	out := &listing{}
	read := 0
	for {
		page, err := d.engine.List(ctx, job.ListParams{Queue: queueName, State: state, Cursor: cursor, Limit: min(scanPage, maxScan-out.Scanned)})
		if err != nil {
			return nil, fmt.Errorf("scan jobs: %w", err)
		}
		out.Scanned += len(page.Jobs)
		for _, j := range page.Jobs {
			read += jobBytes(j)
			if f.match(j) {
				out.Jobs = append(out.Jobs, j)
			}
		}
		cursor = page.Next
		switch {
		case cursor == "":
			return out, nil
		case len(out.Jobs) >= jobsPerPage:
			out.Next = cursor
			return out, nil
		case out.Scanned >= maxScan || read >= maxScanBytes:
			out.Next, out.Bounded = cursor, true
			return out, nil
		}
	}
}

// groupRow is one consumer group of a queue.
type groupRow struct {
	Name      string
	CreatedAt time.Time
	Counts    map[job.State]int64
	// Lag is how many of the queue's jobs the group has not finished;
	// OldestPending when the oldest of them was created.
	Lag           int64
	OldestPending time.Time
}

// queuePage is the data of a queue's page.
type queuePage struct {
	page
	Queue *job.QueueInfo
	// State is the listing's state; empty for every state.
	State    job.State
	Filter   jobFilter
	Cursor   string
	List     *listing
	NextURL  string
	FirstURL string
	// LiveJobsURL refreshes the listing (unfiltered listings only).
	LiveJobsURL string
	Schedules   []*job.Schedule
	// MoreSchedules is set when the queue has more than
	// maxQueueSchedules schedules.
	MoreSchedules bool
	// Groups are the queue's first maxQueueGroups consumer groups by
	// name; MoreGroups is set when it has more.
	Groups     []groupRow
	MoreGroups bool
	// Completed and Failed are jobs per second over the last minute.
	Completed, Failed float64
	Now               time.Time
	MaxScan           int
}

// queuePage shows one queue: its counts and pause, a listing of its jobs
// by state with filters, its settings, schedules and consumer groups.
// ?part=head answers only the counts and actions, ?part=jobs only the
// listing, for the parts that refresh themselves.
func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request, v *viewer) {
	ctx := r.Context()
	name := r.PathValue("name")
	if !v.Allows(name) {
		d.fail(w, r, v, errNotFound)
		return
	}
	q, err := d.engine.Queue(ctx, name)
	if err != nil {
		d.fail(w, r, v, err)
		return
	}
	query := r.URL.Query()
	data := &queuePage{
		page:  page{Title: name, Viewer: v, Chart: true},
		Queue: q, State: job.State(query.Get("state")), Cursor: query.Get("cursor"),
		Filter: jobFilter{Kind: field(query, "kind"), Tag: field(query, "tag"), Text: field(query, "q")},
		Now:    d.engine.Now(), MaxScan: maxScan,
	}
	if data.State != "" && !data.State.Valid() {
		data.State = ""
	}
	data.Completed, data.Failed = d.sampler.rate(name, data.Now)
	part := query.Get("part")
	if part == "head" {
		d.renderFragment(w, http.StatusOK, "queue", "head", data)
		return
	}
	if data.List, err = d.list(ctx, name, data.State, data.Cursor, data.Filter); err != nil {
		d.fail(w, r, v, err)
		return
	}
	base := url.Values{}
	if data.State != "" {
		base.Set("state", string(data.State))
	}
	for k, val := range map[string]string{"kind": data.Filter.Kind, "tag": data.Filter.Tag, "q": data.Filter.Text} {
		if val != "" {
			base.Set(k, val)
		}
	}
	data.FirstURL = pageURL(name, base, nil)
	if data.List.Next != "" {
		data.NextURL = pageURL(name, base, url.Values{"cursor": {data.List.Next}})
	}
	if !data.Filter.Any() {
		data.LiveJobsURL = pageURL(name, base, url.Values{"cursor": {data.Cursor}, "part": {"jobs"}})
	}
	if part == "jobs" {
		d.renderFragment(w, http.StatusOK, "queue", "jobs", data)
		return
	}
	if err := d.queueExtras(ctx, v, data); err != nil {
		d.fail(w, r, v, err)
		return
	}
	d.render(w, r, http.StatusOK, "queue", data)
}

// queueExtras reads a queue's schedules and first consumer groups.
func (d *Dashboard) queueExtras(ctx context.Context, v *viewer, data *queuePage) error {
	name := data.Queue.Name
	schedules, err := d.engine.ListSchedules(ctx)
	if err != nil {
		return err
	}
	for _, s := range schedules {
		if templateQueue(s.Job) != name || !v.Allows(s.Name) {
			continue
		}
		if len(data.Schedules) == maxQueueSchedules {
			data.MoreSchedules = true
			break
		}
		data.Schedules = append(data.Schedules, s)
	}
	// The queue's groups come first in the listing of every queue's from
	// the queue on; one more than the page tells whether there are more.
	groups, err := d.engine.ConsumerGroupsPage(ctx, job.ConsumerGroupListParams{AfterQueue: name, Limit: maxQueueGroups + 1})
	if err != nil {
		return err
	}
	for _, g := range groups {
		if g.Queue != name {
			break
		}
		if len(data.Groups) == maxQueueGroups {
			data.MoreGroups = true
			break
		}
		row := groupRow{Name: g.Name, CreatedAt: g.CreatedAt, Counts: g.Counts, OldestPending: g.OldestPending}
		for s, n := range g.Counts {
			if s.Pending() {
				row.Lag += n
			}
		}
		data.Groups = append(data.Groups, row)
	}
	return nil
}

// templateQueue is the queue a schedule's job template names (the
// default queue when it names none).
func templateQueue(raw json.RawMessage) string {
	var t struct {
		Queue string `json:"queue"`
	}
	if json.Unmarshal(raw, &t) != nil || t.Queue == "" {
		return engine.DefaultQueue
	}
	return t.Queue
}

// field is a query parameter, trimmed and bounded.
func field(q url.Values, name string) string {
	s := strings.TrimSpace(q.Get(name))
	if len(s) > maxFilterBytes {
		s = cut(maxFilterBytes, s)
	}
	return s
}

// pageURL is the URL of queue's page with the parameters of base and more.
func pageURL(queueName string, base, more url.Values) string {
	q := url.Values{}
	for k, v := range base {
		q[k] = v
	}
	for k, v := range more {
		if len(v) > 0 && v[0] != "" {
			q[k] = v
		}
	}
	u := "/ui/queues/" + url.PathEscape(queueName)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// queueAction runs one of a queue's actions: pause, resume, purge (its
// available jobs), retry-dead or delete-dead (every dead job of it).
func (d *Dashboard) queueAction(w http.ResponseWriter, r *http.Request, v *viewer) {
	ctx := r.Context()
	name := r.PathValue("name")
	if !v.Allows(name) {
		d.fail(w, r, v, errNotFound)
		return
	}
	if _, err := d.engine.Queue(ctx, name); err != nil {
		d.fail(w, r, v, err)
		return
	}
	var text string
	switch r.PathValue("action") {
	case "pause", "resume":
		paused := r.PathValue("action") == "pause"
		if _, err := d.engine.SetPaused(ctx, name, paused); err != nil {
			d.fail(w, r, v, err)
			return
		}
		text = "Resumed " + name + ": fetches get its jobs again."
		if paused {
			text = "Paused " + name + ": fetches get none of its jobs until it is resumed."
		}
	case "purge":
		n, err := d.engine.Purge(ctx, name)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		text = "Purged " + name + ": deleted " + plural(n, "available job", "available jobs") + "."
	case "retry-dead":
		n, err := d.engine.RetryMany(ctx, name, job.StateDead)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		text = "Retried " + plural(n, "dead job", "dead jobs") + " of " + name + "."
	case "delete-dead":
		n, err := d.engine.DeleteMany(ctx, name, job.StateDead)
		if err != nil {
			d.fail(w, r, v, err)
			return
		}
		text = "Deleted " + plural(n, "dead job", "dead jobs") + " of " + name + "."
	default:
		d.fail(w, r, v, errNotFound)
		return
	}
	d.flash(w, http.StatusOK, true, text)
}
