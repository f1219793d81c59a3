package httpapi

import (
	"encoding/json"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// jobJSON is a job on the wire. Fields with no value are omitted.
type jobJSON struct {
	ID              string             `json:"id"`
	Queue           string             `json:"queue"`
	Kind            string             `json:"kind"`
	Payload         json.RawMessage    `json:"payload"`
	Priority        int                `json:"priority"`
	State           job.State          `json:"state"`
	RunAt           time.Time          `json:"run_at"`
	Attempt         int                `json:"attempt"`
	MaxAttempts     int                `json:"max_attempts"`
	Backoff         backoffJSON        `json:"backoff"`
	LeaseMS         int64              `json:"lease_ms"`
	UniqueKey       string             `json:"unique_key,omitempty"`
	UniqueForMS     int64              `json:"unique_for_ms,omitempty"`
	Tags            []string           `json:"tags,omitempty"`
	Result          json.RawMessage    `json:"result,omitempty"`
	Errors          []job.AttemptError `json:"errors,omitempty"`
	Progress        json.RawMessage    `json:"progress,omitempty"`
	Lease           *leaseJSON         `json:"lease,omitempty"`
	CancelRequested bool               `json:"cancel_requested"`
	CreatedAt       time.Time          `json:"created_at"`
	StartedAt       *time.Time         `json:"started_at,omitempty"`
	FinishedAt      *time.Time         `json:"finished_at,omitempty"`
}

type backoffJSON struct {
	Type   job.BackoffKind `json:"type"`
	BaseMS int64           `json:"base_ms"`
	MaxMS  int64           `json:"max_ms"`
	Jitter float64         `json:"jitter"`
}

type leaseJSON struct {
	Token     int64     `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// toJobJSON is j on the wire.
func toJobJSON(j *job.Job) jobJSON {
	out := jobJSON{
		ID: j.ID, Queue: j.Queue, Kind: j.Kind, Payload: j.Payload, Priority: j.Priority, State: j.State,
		RunAt: j.RunAt, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		Backoff:   backoffJSON{Type: j.Backoff.Kind, BaseMS: toMillis(j.Backoff.Base), MaxMS: toMillis(j.Backoff.Max), Jitter: j.Backoff.Jitter},
		LeaseMS:   toMillis(j.LeaseDuration),
		UniqueKey: j.UniqueKey, UniqueForMS: toMillis(j.UniqueFor), Tags: j.Tags,
		Result: j.Result, Errors: j.Errors, Progress: j.Progress,
		CancelRequested: j.CancelRequested,
		CreatedAt:       j.CreatedAt, StartedAt: timeOrNil(j.StartedAt), FinishedAt: timeOrNil(j.FinishedAt),
	}
	if len(out.Payload) == 0 {
		out.Payload = json.RawMessage("null")
	}
	if j.State == job.StateActive {
		out.Lease = &leaseJSON{Token: j.LeaseToken, ExpiresAt: j.LeaseExpiresAt}
	}
	return out
}

func toJobsJSON(jobs []*job.Job) []jobJSON {
	out := make([]jobJSON, len(jobs))
	for i, j := range jobs {
		out[i] = toJobJSON(j)
	}
	return out
}

// queueJSON is a queue on the wire.
type queueJSON struct {
	Name   string              `json:"name"`
	Paused bool                `json:"paused"`
	Counts map[job.State]int64 `json:"counts"`
}

func toQueueJSON(q *store.QueueInfo) queueJSON {
	counts := make(map[job.State]int64, len(job.States))
	for _, s := range job.States {
		counts[s] = q.Counts[s]
	}
	return queueJSON{Name: q.Name, Paused: q.Paused, Counts: counts}
}

// countJSON answers bulk operations.
type countJSON struct {
	Count int `json:"count"`
}

// statusJSON answers the health routes.
type statusJSON struct {
	Status string `json:"status"`
}
