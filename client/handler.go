package client

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
	"unicode/utf8"
)

// HandlerFunc runs one job for a Worker. It returns the job's result, which
// the worker encodes with encoding/json (a json.RawMessage as is) and stores
// with the ack, or an error, which fails the attempt: the job retries after
// its backoff while it has attempts left, unless the error is wrapped with
// NoRetry (dead at once) or RetryAfter (retry after a given delay).
//
// ctx is cancelled when the job must stop: context.Cause(ctx) is
// ErrJobCancelled when a user cancelled the job (return soon; the job ends
// cancelled whatever is returned), ErrLeaseLost when the worker lost the
// job's lease (another worker may run it now; the result is dropped), or
// ErrWorkerStopped when the worker stopped before the handler finished (the
// job is released unrun and the result dropped). A handler must return when
// ctx ends; one that does not keeps its goroutine (and, until it returns,
// its concurrency slot) after its job was given up.
//
// ctx carries the job's TraceParent (TraceParentFrom; none when the job
// has none), so that the jobs the handler enqueues with ctx continue the
// job's trace.
//
// Delivery is at least once, so handlers should be idempotent; the job's
// Lease.Token can serve as an idempotency key downstream. A panic in a
// handler fails the attempt with the panic value and stack as the error.
type HandlerFunc func(ctx context.Context, j *Job) (result any, err error)

// Causes of a handler's context cancellation (see HandlerFunc).
var (
	// ErrJobCancelled is the cause of a handler's context when a user
	// cancelled the running job.
	ErrJobCancelled = errors.New("job cancelled")
	// ErrWorkerStopped is the cause of a handler's context when the worker
	// stopped before the handler returned. Run also returns it, wrapped,
	// when called after Stop.
	ErrWorkerStopped = errors.New("worker stopped")
)

// Bounds on what a worker sends as a failed attempt's error.
const (
	// maxFailMessage is the server's limit on a fail's error text.
	maxFailMessage = 64 << 10
	// maxPanicStack bounds the stack trace kept from a handler panic.
	maxPanicStack = 8 << 10
)

// NoRetry wraps err so that a Worker fails the job for good: it goes dead at
// once, whatever attempts it has left. Use it for errors that another
// attempt cannot fix, such as a payload that does not decode. NoRetry(nil)
// is nil, so the handler's job is acked.
func NoRetry(err error) error {
	if err == nil {
		return nil
	}
	return &noRetryError{err: err}
}

// RetryAfter wraps err so that a Worker retries the job after d instead of
// its backoff (when it has attempts left), for example when a downstream
// service said when to come back. RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

type noRetryError struct{ err error }

func (e *noRetryError) Error() string { return e.err.Error() }
func (e *noRetryError) Unwrap() error { return e.err }

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string {
	stack := e.stack
	if len(stack) > maxPanicStack {
		stack = append(stack[:maxPanicStack:maxPanicStack], "\n…"...)
	}
	return fmt.Sprintf("panic: %v\n\n%s", e.value, stack)
}

// failParams turns a handler's error into the fail it sends.
func failParams(err error) FailParams {
	p := FailParams{Error: truncate(err.Error(), maxFailMessage)}
	if p.Error == "" {
		p.Error = fmt.Sprintf("%T with an empty message", err)
	}
	var nr *noRetryError
	p.NoRetry = errors.As(err, &nr)
	var ra *retryAfterError
	if errors.As(err, &ra) && ra.after > 0 {
		p.RetryAfter = ra.after
	}
	return p
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// outcome is what a handler call produced.
type outcome struct {
	result any
	err    error
}

// call runs fn on j, turning a panic into an error. A nil fn (no handler
// for the job's kind) is an error too.
func (w *Worker) call(ctx context.Context, fn HandlerFunc, j *Job) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = outcome{err: &panicError{value: r, stack: debug.Stack()}}
		}
	}()
	if fn == nil {
		return outcome{err: fmt.Errorf("no handler for kind %q on worker %s", j.Kind, w.cfg.Name)}
	}
	res, err := fn(ctx, j)
	return outcome{result: res, err: err}
}
