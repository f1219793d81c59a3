package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Misfire is what a cron schedule does about ticks that passed while
// nothing fired them: the server was down, the schedule paused, or the
// nodes electing a new leader (docs/protocol.md, "Missed ticks").
type Misfire string

// The misfire policies.
const (
	// MisfireSkip fires a tick only when it is handled at most a minute
	// after its time; older missed ticks are dropped. The default.
	MisfireSkip Misfire = "skip"
	// MisfireRunOnce fires one job for all the missed ticks, with the id of
	// the newest.
	MisfireRunOnce Misfire = "run_once"
	// MisfireCatchUp fires one job per missed tick, oldest first, for the
	// newest ScheduleSpec.MaxCatchUp of them.
	MisfireCatchUp Misfire = "catch_up"
)

// ScheduleSpec defines a cron schedule (PUT /v1/schedules/{name}): the job
// it enqueues and when. Its timing is Cron (read in Timezone) or Every,
// exactly one of them. Zero values leave the choice to the server's
// defaults, except where noted.
type ScheduleSpec struct {
	// Job is the job each tick enqueues, checked by the rules of Enqueue.
	// ID and RunAt must be left zero: each tick's job is named
	// "{name}:{tick in Unix milliseconds}", and runs at its tick (Delay
	// may put it later). Required.
	Job EnqueueParams
	// Cron is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), six with a leading seconds field, or a shorthand
	// such as "@daily".
	Cron string
	// Timezone is the IANA time zone Cron is read in, such as
	// "Europe/Berlin". Only with Cron. Defaults to "UTC".
	Timezone string
	// Every fires the schedule at every multiple of this interval since
	// the Unix epoch, the same ticks on every node: 1 s to 366 days, in
	// whole milliseconds. Not together with Cron.
	Every time.Duration
	// Misfire is the policy for missed ticks. Defaults to MisfireSkip.
	Misfire Misfire
	// MaxCatchUp bounds the jobs MisfireCatchUp fires at once: 1 to
	// 10,000. Defaults to 100.
	MaxCatchUp int
	// Paused creates the schedule paused, or pauses it. A PutSchedule with
	// Paused false resumes a paused schedule.
	Paused bool
}

// wireScheduleSpec is ScheduleSpec on the wire.
type wireScheduleSpec struct {
	Job        *wireEnqueue `json:"job"`
	Cron       string       `json:"cron,omitempty"`
	Timezone   string       `json:"timezone,omitempty"`
	EveryMS    int64        `json:"every_ms,omitempty"`
	Misfire    Misfire      `json:"misfire,omitempty"`
	MaxCatchUp int          `json:"max_catch_up,omitempty"`
	Paused     bool         `json:"paused,omitempty"`
}

func (s *ScheduleSpec) wire() (*wireScheduleSpec, error) {
	// A template keeps only the traceparent it names: the caller's
	// trace is not that of every job the schedule will enqueue.
	job, err := s.Job.wire(context.Background())
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	return &wireScheduleSpec{
		Job: job, Cron: s.Cron, Timezone: s.Timezone, EveryMS: msec(s.Every),
		Misfire: s.Misfire, MaxCatchUp: s.MaxCatchUp, Paused: s.Paused,
	}, nil
}

// Schedule is a cron schedule as the server keeps it: its definition and
// how far it has fired. Every is a time.Duration here and milliseconds
// (every_ms) on the wire; Schedule's JSON methods convert, so a Schedule
// encodes to the protocol's form.
type Schedule struct {
	// Name identifies the schedule.
	Name string
	// Cron is the cron expression as given, empty for a schedule that
	// fires Every.
	Cron string
	// Timezone is the time zone Cron is read in ("UTC" unless one was
	// given), empty for a schedule that fires Every.
	Timezone string
	// Every is the interval of the ticks, zero for a schedule with Cron.
	Every time.Duration
	// Misfire is the policy for missed ticks.
	Misfire Misfire
	// MaxCatchUp bounds the jobs MisfireCatchUp fires at once.
	MaxCatchUp int
	// Job is the template of the jobs it enqueues, the JSON of an enqueue
	// body, as it was given.
	Job json.RawMessage
	// Paused reports that the schedule fires nothing; its ticks pass as
	// missed ticks.
	Paused bool
	// CreatedAt is when the schedule was created.
	CreatedAt time.Time
	// UpdatedAt is when it was last redefined, paused or resumed.
	UpdatedAt time.Time
	// NextRunAt is the next tick the server handles; it lies in the past
	// while ticks are due (as for a paused schedule). Zero when the timing
	// has no tick to come.
	NextRunAt time.Time
	// LastRunAt is when the schedule last enqueued a job, at a tick or by
	// TriggerSchedule; zero until it has.
	LastRunAt time.Time
	// LastJobID is the id of that job; empty until there is one.
	LastJobID string
}

// wireSchedule is Schedule on the wire.
type wireSchedule struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron,omitempty"`
	Timezone   string          `json:"timezone,omitempty"`
	EveryMS    int64           `json:"every_ms,omitempty"`
	Misfire    Misfire         `json:"misfire"`
	MaxCatchUp int             `json:"max_catch_up"`
	Job        json.RawMessage `json:"job"`
	Paused     bool            `json:"paused"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	NextRunAt  time.Time       `json:"next_run_at,omitzero"`
	LastRunAt  time.Time       `json:"last_run_at,omitzero"`
	LastJobID  string          `json:"last_job_id,omitempty"`
}

// MarshalJSON encodes s in the protocol's form.
func (s Schedule) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireSchedule{
		Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, EveryMS: msec(s.Every), Misfire: s.Misfire,
		MaxCatchUp: s.MaxCatchUp, Job: s.Job, Paused: s.Paused, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		NextRunAt: s.NextRunAt, LastRunAt: s.LastRunAt, LastJobID: s.LastJobID,
	})
}

// UnmarshalJSON decodes the protocol's form of a schedule. Unknown fields
// are ignored so that newer servers stay readable.
func (s *Schedule) UnmarshalJSON(data []byte) error {
	var w wireSchedule
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*s = Schedule{
		Name: w.Name, Cron: w.Cron, Timezone: w.Timezone, Every: time.Duration(w.EveryMS) * time.Millisecond,
		Misfire: w.Misfire, MaxCatchUp: w.MaxCatchUp, Job: w.Job, Paused: w.Paused, CreatedAt: w.CreatedAt,
		UpdatedAt: w.UpdatedAt, NextRunAt: w.NextRunAt, LastRunAt: w.LastRunAt, LastJobID: w.LastJobID,
	}
	return nil
}

// TriggerResult is the answer of TriggerSchedule: the job it enqueued and
// the schedule after the call.
type TriggerResult struct {
	// Job is the enqueued job. Duplicate is set, and ID is the existing
	// job's, when the template's unique key matched a pending job.
	Job EnqueueResult `json:"job"`
	// Schedule is the schedule, with the job as its LastJobID.
	Schedule Schedule `json:"schedule"`
}

// PutSchedule creates the cron schedule name, or replaces the whole
// definition of the one there (PUT /v1/schedules/{name}), and returns it;
// created tells which. A field of spec left zero takes its default, so
// that a schedule put without Paused is resumed. Each tick enqueues
// spec.Job with the id "{name}:{tick in Unix milliseconds}", at most once
// across crashes and nodes. A new schedule, and one whose Cron, Timezone
// or Every changed, starts now: earlier ticks are not missed ticks; any
// other change keeps the schedule's place. Invalid input gives an error
// matching ErrInvalidArgument whose Field names it, such as "cron",
// "every_ms" or "job.kind".
func (c *Client) PutSchedule(ctx context.Context, name string, spec ScheduleSpec) (s *Schedule, created bool, err error) {
	if name == "" {
		return nil, false, fmt.Errorf("put schedule: %w",
			&Error{Status: http.StatusBadRequest, Code: "invalid_argument", Field: "name", Message: "name: must not be empty"})
	}
	w, err := spec.wire()
	if err != nil {
		return nil, false, fmt.Errorf("put schedule %s: %w", name, err)
	}
	var out Schedule
	status, err := c.call(ctx, http.MethodPut, schedulePath(name, ""), nil, w, &out)
	if err != nil {
		return nil, false, fmt.Errorf("put schedule %s: %w", name, err)
	}
	return &out, status == http.StatusCreated, nil
}

// GetSchedule returns one schedule (GET /v1/schedules/{name}), or an error
// matching ErrNotFound.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	if err := c.scheduleCall(ctx, http.MethodGet, name, "", &s); err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	return &s, nil
}

// ListSchedules lists every schedule, sorted by name (GET /v1/schedules).
// A token limited to namespaces sees the schedules whose name and job
// queue both lie in them.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, &out); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out.Schedules, nil
}

// DeleteSchedule removes a schedule (DELETE /v1/schedules/{name}); the
// jobs it enqueued stay. An unknown name gives ErrNotFound.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	if err := c.scheduleCall(ctx, http.MethodDelete, name, "", nil); err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	return nil
}

// PauseSchedule stops a schedule firing (POST /v1/schedules/{name}/pause)
// and returns it. The ticks that pass while it is paused are missed ticks
// when it is resumed: its Misfire policy decides what becomes of them.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	if err := c.scheduleCall(ctx, http.MethodPost, name, "/pause", &s); err != nil {
		return nil, fmt.Errorf("pause schedule %s: %w", name, err)
	}
	return &s, nil
}

// ResumeSchedule undoes PauseSchedule (POST /v1/schedules/{name}/resume)
// and returns the schedule. The ticks it missed are handled at once by its
// Misfire policy.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	if err := c.scheduleCall(ctx, http.MethodPost, name, "/resume", &s); err != nil {
		return nil, fmt.Errorf("resume schedule %s: %w", name, err)
	}
	return &s, nil
}

// TriggerSchedule enqueues one job of a schedule now (POST
// /v1/schedules/{name}/trigger), whatever its ticks and pause, which it
// leaves as they are. The job gets a generated id, not a tick's. A
// template the server's current rules refuse gives ErrInvalidArgument or
// ErrPayloadTooLarge, and nothing is enqueued.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*TriggerResult, error) {
	var out TriggerResult
	if err := c.scheduleCall(ctx, http.MethodPost, name, "/trigger", &out); err != nil {
		return nil, fmt.Errorf("trigger schedule %s: %w", name, err)
	}
	return &out, nil
}

// scheduleCall sends a request without a body to one schedule's resource.
func (c *Client) scheduleCall(ctx context.Context, method, name, action string, out any) error {
	if name == "" {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "empty schedule name"}
	}
	return c.do(ctx, method, schedulePath(name, action), nil, nil, out)
}

// schedulePath is the path of one schedule's resource, plus suffix.
func schedulePath(name, suffix string) string {
	return "/v1/schedules/" + url.PathEscape(name) + suffix
}
