package job

import "fmt"

// What an operator's action by hand (a cancel, a retry, a delete, one
// job at a time or every job of a queue in one state) does to a job, by
// its state. Both stores ask these, then write what they say.

// Cancel is what a cancel by hand does to a job.
type Cancel int

// The cancels.
const (
	// CancelNone leaves a cancelled job as it is: cancelling it again is
	// a no-op.
	CancelNone Cancel = iota
	// CancelNow ends a scheduled, available or retrying job cancelled at
	// once.
	CancelNow
	// CancelRequest asks the worker of an active job to stop: the job
	// gets CancelRequested and keeps its lease until its worker acks,
	// fails or loses it.
	CancelRequest
)

// CancelOf decides what a cancel by hand does to a job in state; a
// completed or dead job refuses it with ErrInvalidState.
func CancelOf(state State) (Cancel, error) {
	switch state {
	case StateCancelled:
		return CancelNone, nil
	case StateCompleted, StateDead:
		return CancelNone, fmt.Errorf("job is %s: %w", state, ErrInvalidState)
	case StateActive:
		return CancelRequest, nil
	}
	return CancelNow, nil
}

// CheckRetry refuses, with ErrInvalidState, to retry by hand a job in a
// state State.Retryable does not let through.
func CheckRetry(state State) error {
	if !state.Retryable() {
		return fmt.Errorf("job is %s: %w", state, ErrInvalidState)
	}
	return nil
}

// CheckDelete refuses, with ErrInvalidState, to delete an active job: it
// must be cancelled first.
func CheckDelete(state State) error {
	if state == StateActive {
		return fmt.Errorf("job is active, cancel it first: %w", ErrInvalidState)
	}
	return nil
}

// CheckBulk refuses, with ErrInvalidState, a retry (retry true) or a
// delete of every job of a queue in state: a retry takes the states
// State.Retryable lets through, a delete any state but active.
func CheckBulk(retry bool, state State) error {
	switch {
	case retry && !state.Retryable():
		return fmt.Errorf("retry jobs in state %q: %w", state, ErrInvalidState)
	case !retry && (state == StateActive || !state.Valid()):
		return fmt.Errorf("delete jobs in state %q: %w", state, ErrInvalidState)
	}
	return nil
}
