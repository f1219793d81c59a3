package wire

import (
	"encoding/json"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// EnqueueJob is one job to enqueue as sent: the body of POST /v1/jobs and
// each job of a batch. The fields whose zero value the engine reads as
// "use the default" are pointers, so that the API can refuse a value sent
// explicitly outside its range instead of taking the default.
type EnqueueJob struct {
	ID          *string         `json:"id"`
	Queue       *string         `json:"queue"`
	Kind        string          `json:"kind"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	RunAt       *time.Time      `json:"run_at"`
	DelayMS     int64           `json:"delay_ms"`
	MaxAttempts *int            `json:"max_attempts"`
	Backoff     *Backoff        `json:"backoff"`
	LeaseMS     *int64          `json:"lease_ms"`
	UniqueKey   *string         `json:"unique_key"`
	UniqueForMS int64           `json:"unique_for_ms"`
	Tags        []string        `json:"tags"`
	Group       *string         `json:"group"`
	Durability  *job.Durability `json:"durability"`
	TraceParent *string         `json:"traceparent"`
}

// QueueName is the queue the job names, "" when it names none (the engine
// then puts it in the default queue).
func (j *EnqueueJob) QueueName() string {
	if j.Queue == nil {
		return ""
	}
	return *j.Queue
}

// Backoff is the retry policy a job to enqueue may name; each field left
// out takes the engine's default.
type Backoff struct {
	Type   *job.BackoffKind `json:"type"`
	BaseMS *int64           `json:"base_ms"`
	MaxMS  *int64           `json:"max_ms"`
	Jitter *float64         `json:"jitter"`
}

// EnqueueBatch is the body of POST /v1/jobs/batch.
type EnqueueBatch struct {
	Jobs []EnqueueJob `json:"jobs"`
}
