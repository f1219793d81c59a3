package store

import (
	"time"

	"github.com/spoolq/spool/internal/attempt"
	"github.com/spoolq/spool/internal/job"
)

// EndOutcome is the outcome of the attempt h that ended as e says.
func EndOutcome(h *attempt.Held, e *attempt.End) job.Outcome {
	return job.Outcome{Queue: h.Queue, State: e.State, RunAt: e.RunAt, Kind: h.Kind, Attempt: h.Attempt, StartedAt: h.StartedAt}
}

// Extended is the outcome of an extend that moved the lease of a job of
// queue to expires; cancel tells whether a cancel was requested.
func Extended(queue string, expires time.Time, cancel bool) job.Outcome {
	return job.Outcome{Queue: queue, State: job.StateActive, LeaseExpiresAt: expires, CancelRequested: cancel}
}

// CompleteKey, FailKey, ExtendKey and ReleaseKey name the job and lease
// an item of a batch holds.
func CompleteKey(it *job.CompleteItem) (string, int64) { return it.ID, it.Token }

func FailKey(it *job.FailItem) (string, int64) { return it.ID, it.Token }

func ExtendKey(it *job.ExtendItem) (string, int64) { return it.ID, it.Token }

func ReleaseKey(it *job.ReleaseItem) (string, int64) { return it.ID, it.Token }
