package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/schedule"
)

// scheduleBody is the body of PUT /v1/schedules/{name}. The fields whose
// zero value means "the default" are pointers, so that a value sent
// explicitly is checked against its range.
type scheduleBody struct {
	Job        json.RawMessage `json:"job"`
	Cron       *string         `json:"cron"`
	Timezone   *string         `json:"timezone"`
	EveryMS    *int64          `json:"every_ms"`
	Misfire    *string         `json:"misfire"`
	MaxCatchUp *int            `json:"max_catch_up"`
	Paused     bool            `json:"paused"`
}

// jobQueue is the queue the body's job template names, "" when it names
// none (the default queue) or cannot be read (the engine refuses it).
func (b *scheduleBody) jobQueue() string {
	return templateQueue(b.Job)
}

// templateQueue is the queue a job template names, "" when it names none
// or cannot be read.
func templateQueue(raw json.RawMessage) string {
	var t struct {
		Queue string `json:"queue"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return ""
	}
	return t.Queue
}

// scheduleJSON is a schedule on the wire.
type scheduleJSON struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron,omitempty"`
	Timezone   string          `json:"timezone,omitempty"`
	EveryMS    int64           `json:"every_ms,omitempty"`
	Misfire    string          `json:"misfire"`
	MaxCatchUp int             `json:"max_catch_up"`
	Job        json.RawMessage `json:"job"`
	Paused     bool            `json:"paused"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	NextRunAt  *time.Time      `json:"next_run_at,omitempty"`
	LastRunAt  *time.Time      `json:"last_run_at,omitempty"`
	LastJobID  string          `json:"last_job_id,omitempty"`
}

func toScheduleJSON(s *job.Schedule) scheduleJSON {
	out := scheduleJSON{
		Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, EveryMS: s.Every.Milliseconds(), Misfire: s.Misfire,
		MaxCatchUp: s.MaxCatchUp, Job: s.Job, Paused: s.Paused, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		LastJobID: s.LastJobID,
	}
	if !s.NextRunAt.IsZero() {
		t := s.NextRunAt
		out.NextRunAt = &t
	}
	if !s.LastRunAt.IsZero() {
		t := s.LastRunAt
		out.LastRunAt = &t
	}
	return out
}

type schedulesJSON struct {
	Schedules []scheduleJSON `json:"schedules"`
}

// triggerJSON answers a trigger: the job it enqueued and the schedule.
type triggerJSON struct {
	Job      enqueueResultJSON `json:"job"`
	Schedule scheduleJSON      `json:"schedule"`
}

// DecodeJob reads a schedule's job template, the body form of POST
// /v1/jobs, into the engine's request, by the rules of that route; its
// errors name the template's fields as "job.kind". The server gives it to
// the engine (engine.Config.DecodeJob), which decodes every firing's job
// with it.
func DecodeJob(raw json.RawMessage) (engine.EnqueueRequest, error) {
	var in wire.EnqueueJob
	if err := wire.DecodeJSON(raw, &in); err != nil {
		var bad *wire.InvalidJSONError
		if errors.As(err, &bad) {
			field := "job"
			if bad.Field != "" {
				field += "." + bad.Field
			}
			return engine.EnqueueRequest{}, &wire.InvalidJSONError{Field: field, Message: "job: " + bad.Message}
		}
		var in *job.InputError
		if errors.As(err, &in) {
			return engine.EnqueueRequest{}, &job.InputError{Field: "job." + in.Field, Message: in.Message}
		}
		return engine.EnqueueRequest{}, err
	}
	if in.RunAt != nil {
		// Even the zero time, which the engine would read as "not set".
		return engine.EnqueueRequest{}, job.Invalid("job.run_at", "must be left out: a scheduled job runs at its tick (delay_ms may put it later)")
	}
	return enqueueRequest(&in, func(name string) string { return "job." + name })
}

func (a *API) putSchedule(w http.ResponseWriter, r *http.Request, in *scheduleBody) {
	req := engine.ScheduleRequest{Name: r.PathValue("name"), Job: in.Job, Paused: in.Paused}
	if err := optional(in.Cron, &req.Timing.Cron, fieldName, "cron", "must be a cron expression"); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := optional(in.Timezone, &req.Timing.Timezone, fieldName, "timezone", "must be an IANA time zone name"); err != nil {
		a.writeError(w, r, err)
		return
	}
	var everyMS int64
	if err := optional(in.EveryMS, &everyMS, fieldName, "every_ms", "must be between %d and %d",
		schedule.MinEvery.Milliseconds(), schedule.MaxEvery.Milliseconds()); err != nil {
		a.writeError(w, r, err)
		return
	}
	req.Timing.Every = millis(everyMS)
	var misfire string
	if err := optional(in.Misfire, &misfire, fieldName, "misfire", "must be skip, run_once or catch_up"); err != nil {
		a.writeError(w, r, err)
		return
	}
	req.Misfire = schedule.Misfire(misfire)
	if err := optional(in.MaxCatchUp, &req.MaxCatchUp, fieldName, "max_catch_up", "must be between 1 and %d", schedule.MaxCatchUp); err != nil {
		a.writeError(w, r, err)
		return
	}
	s, created, err := a.engine.PutSchedule(r.Context(), req)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, createdStatus(created), toScheduleJSON(s))
}

func (a *API) getSchedule(w http.ResponseWriter, r *http.Request) {
	s, err := a.engine.GetSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toScheduleJSON(s))
}

// listSchedules returns every schedule; its route's endpoint cuts the
// list to the schedules the caller may see.
func (a *API) listSchedules(r *http.Request) ([]*job.Schedule, error) {
	return a.engine.ListSchedules(r.Context())
}

func (a *API) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	if err := a.engine.DeleteSchedule(r.Context(), r.PathValue("name")); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) pauseSchedule(w http.ResponseWriter, r *http.Request) { a.setSchedulePaused(w, r, true) }
func (a *API) resumeSchedule(w http.ResponseWriter, r *http.Request) {
	a.setSchedulePaused(w, r, false)
}

func (a *API) setSchedulePaused(w http.ResponseWriter, r *http.Request, paused bool) {
	s, err := a.engine.PauseSchedule(r.Context(), r.PathValue("name"), paused)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusOK, toScheduleJSON(s))
}

func (a *API) triggerSchedule(w http.ResponseWriter, r *http.Request) {
	fired, err := a.engine.TriggerSchedule(r.Context(), r.PathValue("name"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.writeJSON(w, http.StatusCreated, triggerJSON{
		Job:      enqueueResultJSON{ID: fired.Job.ID, State: fired.Job.State, Duplicate: fired.Job.Duplicate},
		Schedule: toScheduleJSON(fired.Schedule),
	})
}
