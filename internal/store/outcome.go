package store

import (
	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
)

// EndOutcome is the outcome of the attempt h that ended as e says.
func EndOutcome(h *attempt.Held, e *attempt.End) job.Outcome {
	return job.Outcome{Queue: h.Queue, State: e.State, RunAt: e.RunAt, Kind: h.Kind, Attempt: h.Attempt, StartedAt: h.StartedAt}
}
