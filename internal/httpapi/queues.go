package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
)

// queueJSON is a queue on the wire.
type queueJSON struct {
	Name       string              `json:"name"`
	Paused     bool                `json:"paused"`
	Durability job.Durability      `json:"durability"`
	Limits     *limitsJSON         `json:"limits,omitempty"`
	Settings   *settingsJSON       `json:"settings,omitempty"`
	Counts     map[job.State]int64 `json:"counts"`
}

func toQueueJSON(q *job.QueueInfo) queueJSON {
	counts := make(map[job.State]int64, len(job.States))
	for _, s := range job.States {
		counts[s] = q.Counts[s]
	}
	return queueJSON{Name: q.Name, Paused: q.Paused, Durability: wire.DurabilityOf(q.Durability), Limits: toLimitsJSON(q.Limits),
		Settings: toSettingsJSON(q.Settings), Counts: counts}
}

// limitsJSON is a queue's flow control on the wire: the body of PUT
// /v1/queues/{name}/limits and the limits of a queue, where a field left
// out sets no limit, and the body of PATCH, where it is kept.
type limitsJSON struct {
	Rate           *rateJSON `json:"rate,omitempty"`
	MaxActive      *int      `json:"max_active,omitempty"`
	GroupRate      *rateJSON `json:"group_rate,omitempty"`
	GroupMaxActive *int      `json:"group_max_active,omitempty"`
	Ordered        *bool     `json:"ordered,omitempty"`
}

// rateJSON is a rate on the wire: at most limit starts in any window of
// period_ms.
type rateJSON struct {
	Limit    *int   `json:"limit"`
	PeriodMS *int64 `json:"period_ms"`
}

func toLimitsJSON(l job.Limits) *limitsJSON {
	if l.IsZero() {
		return nil
	}
	out := &limitsJSON{}
	rate := func(r job.Rate) *rateJSON {
		if r.IsZero() {
			return nil
		}
		n, ms := r.Limit, r.Period.Milliseconds()
		return &rateJSON{Limit: &n, PeriodMS: &ms}
	}
	out.Rate, out.GroupRate = rate(l.Rate), rate(l.GroupRate)
	if l.MaxActive > 0 {
		n := l.MaxActive
		out.MaxActive = &n
	}
	if l.GroupMaxActive > 0 {
		n := l.GroupMaxActive
		out.GroupMaxActive = &n
	}
	if l.Ordered {
		out.Ordered = &l.Ordered
	}
	return out
}

// limits is the engine's form of in; a rate sent must give both its
// fields, and a field sent must hold a limit (job.Limits.Check bounds
// them).
func (in *limitsJSON) limits() (job.Limits, error) {
	var l job.Limits
	rate := func(field string, r *rateJSON, dst *job.Rate) error {
		if r == nil {
			return nil
		}
		if r.Limit == nil || *r.Limit < 1 {
			return job.Invalid(field+".limit", "is required: at least 1 start a period")
		}
		if r.PeriodMS == nil || *r.PeriodMS < 1 {
			return job.Invalid(field+".period_ms", "is required: at least 1 ms")
		}
		*dst = job.Rate{Limit: *r.Limit, Period: millis(*r.PeriodMS)}
		return nil
	}
	if err := rate("rate", in.Rate, &l.Rate); err != nil {
		return l, err
	}
	if err := rate("group_rate", in.GroupRate, &l.GroupRate); err != nil {
		return l, err
	}
	for _, m := range []struct {
		field string
		src   *int
		dst   *int
	}{{"max_active", in.MaxActive, &l.MaxActive}, {"group_max_active", in.GroupMaxActive, &l.GroupMaxActive}} {
		if m.src == nil {
			continue
		}
		if *m.src < 1 {
			return l, job.Invalid(m.field, "must be between 1 and %d; leave the field out for no limit", job.MaxActiveLimit)
		}
		*m.dst = *m.src
	}
	l.Ordered = in.Ordered != nil && *in.Ordered
	return l, nil
}

// setQueueLimits replaces the flow control of a queue.
func (a *API) setQueueLimits(w http.ResponseWriter, r *http.Request, in *limitsJSON) {
	l, err := in.limits()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	q, err := a.engine.SetLimits(r.Context(), r.PathValue("name"), l)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// clearQueueLimits removes the flow control of a queue.
func (a *API) clearQueueLimits(w http.ResponseWriter, r *http.Request) {
	q, err := a.engine.SetLimits(r.Context(), r.PathValue("name"), job.Limits{})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// settingsJSON is a queue's settings on the wire: the body of PUT
// /v1/queues/{name}/settings and the settings of a queue, where a field
// left out is unset, and the body of PATCH, where it is kept.
type settingsJSON struct {
	DeadLetterQueue    *string `json:"dead_letter_queue,omitempty"`
	MaxWaitMS          *int64  `json:"max_wait_ms,omitempty"`
	DefaultLeaseMS     *int64  `json:"default_lease_ms,omitempty"`
	DefaultMaxAttempts *int    `json:"default_max_attempts,omitempty"`
	DefaultDelayMS     *int64  `json:"default_delay_ms,omitempty"`
}

// deadLetterQueue is where the body of a settings route names a queue.
func (in *settingsJSON) deadLetterQueue() string {
	if in.DeadLetterQueue == nil {
		return ""
	}
	return *in.DeadLetterQueue
}

func toSettingsJSON(s job.QueueSettings) *settingsJSON {
	if s.IsZero() {
		return nil
	}
	out := &settingsJSON{}
	if s.DeadLetterQueue != "" {
		q := s.DeadLetterQueue
		out.DeadLetterQueue = &q
	}
	out.MaxWaitMS = optionalMillis(s.MaxWait)
	out.DefaultLeaseMS = optionalMillis(s.DefaultLease)
	out.DefaultDelayMS = optionalMillis(s.DefaultDelay)
	if s.DefaultMaxAttempts > 0 {
		n := s.DefaultMaxAttempts
		out.DefaultMaxAttempts = &n
	}
	return out
}

// settings is the engine's form of in; a field sent must hold a setting
// (job.QueueSettings.Check bounds them).
func (in *settingsJSON) settings() (job.QueueSettings, error) {
	var s job.QueueSettings
	if in.DeadLetterQueue != nil {
		if *in.DeadLetterQueue == "" {
			return s, job.Invalid("dead_letter_queue", "must be a queue name; leave the field out for none")
		}
		s.DeadLetterQueue = *in.DeadLetterQueue
	}
	var err error
	if s.MaxWait, err = settingMillis(in.MaxWaitMS, "max_wait_ms", job.ShortestMaxWait, job.LongestMaxWait, "no maximum wait"); err != nil {
		return s, err
	}
	if s.DefaultLease, err = settingMillis(in.DefaultLeaseMS, "default_lease_ms", job.MinLease, job.MaxLease, "the server's default"); err != nil {
		return s, err
	}
	if in.DefaultMaxAttempts != nil {
		if n := *in.DefaultMaxAttempts; n < 1 || n > job.MaxAttempts {
			return s, job.Invalid("default_max_attempts", "must be between 1 and %d; leave the field out for the server's default", job.MaxAttempts)
		}
		s.DefaultMaxAttempts = *in.DefaultMaxAttempts
	}
	if s.DefaultDelay, err = settingMillis(in.DefaultDelayMS, "default_delay_ms", job.ShortestDefaultDelay, job.MaxDelay, "no delay"); err != nil {
		return s, err
	}
	return s, nil
}

// settingMillis reads a setting sent in milliseconds, which must lie
// within lo..hi when sent (0 included: a field left out is the way to
// unset it); unset names what leaving it out gives, for the error.
func settingMillis(ms *int64, field string, lo, hi time.Duration, unset string) (time.Duration, error) {
	if ms == nil {
		return 0, nil
	}
	if *ms < lo.Milliseconds() || *ms > hi.Milliseconds() {
		return 0, job.Invalid(field, "must be between %d and %d; leave the field out for %s", lo.Milliseconds(), hi.Milliseconds(), unset)
	}
	return millis(*ms), nil
}

// optionalMillis is a set duration in milliseconds on the wire, nil when
// unset.
func optionalMillis(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// setQueueSettings replaces the settings of a queue.
func (a *API) setQueueSettings(w http.ResponseWriter, r *http.Request, in *settingsJSON) {
	s, err := in.settings()
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	q, err := a.engine.SetSettings(r.Context(), r.PathValue("name"), s)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// clearQueueSettings removes the settings of a queue.
func (a *API) clearQueueSettings(w http.ResponseWriter, r *http.Request) {
	q, err := a.engine.SetSettings(r.Context(), r.PathValue("name"), job.QueueSettings{})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// countJSON answers bulk operations.
type countJSON struct {
	Count int `json:"count"`
}

type queuesJSON struct {
	Queues []queueJSON `json:"queues"`
}

// listQueues returns every queue; its route's endpoint cuts the list to
// the queues the caller may see.
func (a *API) listQueues(r *http.Request) ([]job.QueueInfo, error) {
	return a.engine.Queues(r.Context())
}

func (a *API) getQueue(w http.ResponseWriter, r *http.Request) {
	q, err := a.engine.Queue(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (a *API) pauseQueue(w http.ResponseWriter, r *http.Request)  { a.setPaused(w, r, true) }
func (a *API) resumeQueue(w http.ResponseWriter, r *http.Request) { a.setPaused(w, r, false) }

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	q, err := a.engine.SetPaused(r.Context(), r.PathValue("name"), paused)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

// durabilityJSON is the body of a queue's durability route.
type durabilityJSON struct {
	Durability *job.Durability `json:"durability"`
}

// setQueueDurability sets the level of the jobs later enqueued into the
// queue without one of their own; the queue's jobs keep theirs.
func (a *API) setQueueDurability(w http.ResponseWriter, r *http.Request, in *durabilityJSON) {
	if in.Durability == nil {
		a.writeError(w, r, job.Invalid("durability", "is required"))
		return
	}
	q, err := a.engine.SetDurability(r.Context(), r.PathValue("name"), *in.Durability)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toQueueJSON(q))
}

func (a *API) purgeQueue(w http.ResponseWriter, r *http.Request) {
	n, err := a.engine.Purge(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, countJSON{Count: n})
}

// bulkJSON selects the jobs of a bulk retry or delete.
type bulkJSON struct {
	State job.State `json:"state"`
}

func (a *API) retryQueue(w http.ResponseWriter, r *http.Request, in *bulkJSON) {
	a.bulk(w, r, in, a.engine.RetryMany)
}

func (a *API) deleteQueueJobs(w http.ResponseWriter, r *http.Request, in *bulkJSON) {
	a.bulk(w, r, in, a.engine.DeleteMany)
}

// bulk runs a bulk operation on the jobs of the path's queue in the
// state in selects.
func (a *API) bulk(w http.ResponseWriter, r *http.Request, in *bulkJSON, run func(ctx context.Context, queueName string, state job.State) (int, error)) {
	if in.State == "" {
		a.writeError(w, r, job.Invalid("state", "is required"))
		return
	}
	n, err := run(r.Context(), r.PathValue("name"), in.State)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, countJSON{Count: n})
}
