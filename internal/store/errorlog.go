package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// A job's error history is kept by every store as one JSON array: its
// errors, oldest first, each {"attempt", "message", "at"} as
// job.AttemptError encodes it, and, when the history dropped errors
// (job.BoundErrors), one element {"dropped": n} where they were, right
// after the first. A history that dropped nothing is a plain array of
// errors, as every history was before the bounds, so that rows written
// before read the same.

// storedError is one element of a stored history: an attempt error, or
// the count of those dropped when Dropped is set.
type storedError struct {
	Attempt int       `json:"attempt"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
	Dropped int       `json:"dropped,omitempty"`
}

// droppedMark is the element that counts the errors dropped.
type droppedMark struct {
	Dropped int `json:"dropped"`
}

// EncodeErrors is the stored form of the history errs, of which dropped
// errors were dropped; nil for an empty history.
func EncodeErrors(errs []job.AttemptError, dropped int) ([]byte, error) {
	if len(errs) == 0 && dropped == 0 {
		return nil, nil
	}
	out := make([]any, 0, len(errs)+1)
	for i := range errs {
		out = append(out, &errs[i])
		if i == 0 && dropped > 0 {
			out = append(out, droppedMark{Dropped: dropped})
		}
	}
	if len(errs) == 0 {
		out = append(out, droppedMark{Dropped: dropped})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode errors: %w", err)
	}
	return b, nil
}

// DecodeErrors reads a history that EncodeErrors wrote: the errors and
// how many were dropped. Empty input is an empty history.
func DecodeErrors(b []byte) ([]job.AttemptError, int, error) {
	if len(b) == 0 {
		return nil, 0, nil
	}
	var stored []storedError
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, 0, fmt.Errorf("decode errors: %w", err)
	}
	var errs []job.AttemptError
	dropped := 0
	for _, e := range stored {
		if e.Dropped > 0 {
			dropped += e.Dropped
			continue
		}
		errs = append(errs, job.AttemptError{Attempt: e.Attempt, Message: e.Message, At: e.At})
	}
	return errs, dropped, nil
}

// AppendStoredError is job.AppendError on a stored history: the stored
// form of the history stored (nil for none) once it records e.
func AppendStoredError(stored []byte, e job.AttemptError) ([]byte, error) {
	errs, dropped, err := DecodeErrors(stored)
	if err != nil {
		return nil, err
	}
	errs, dropped = job.AppendError(errs, dropped, e)
	return EncodeErrors(errs, dropped)
}
