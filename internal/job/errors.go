package job

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors shared by every store and the engine. Stores map their own
// errors into these at one place; the HTTP layer maps these to error codes.
var (
	// ErrNotFound: no job (or queue) with that id exists.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the fencing token is not the job's current one, or the
	// job is no longer active. The call changed nothing.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidState: the operation does not apply to the job's current
	// state (for example retrying a completed job). The call changed nothing.
	ErrInvalidState = errors.New("invalid state")
	// ErrStorageFull: the store could not write because its disk is full.
	// Nothing of the failed operation was acknowledged.
	ErrStorageFull = errors.New("storage full")
	// ErrUnavailable: the store cannot serve writes right now (closed,
	// read-only, lost its database). Nothing of the failed operation was
	// acknowledged.
	ErrUnavailable = errors.New("storage unavailable")
)

// InputError is a request that is invalid as given. Field names the offending
// field in wire (snake_case) form, with an index for batch items, for
// example "jobs[3].queue".
type InputError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *InputError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Message)
}

// Invalid returns an *InputError for field.
func Invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrIDTaken: an enqueue names an id that belongs to a job in another
// queue. Ids are one space across queues and durability levels, and a job
// never moves between queues, so such an enqueue can be neither a new job
// nor a duplicate. The call changed nothing.
var ErrIDTaken = errors.New("id taken")

// IDTakenError is ErrIDTaken for one field of a request, for example
// "jobs[3].id". It names nothing of the job that holds the id.
type IDTakenError struct {
	Field string
}

// Error implements error.
func (e *IDTakenError) Error() string {
	return fmt.Sprintf("%s: the id is taken by a job of another queue", e.Field)
}

// Is makes an *IDTakenError match ErrIDTaken.
func (e *IDTakenError) Is(target error) bool { return target == ErrIDTaken }

// ItemError is the refusal of one item of a call that applies all of its
// items or none of them (a transaction): Err is ErrNotFound or
// ErrLeaseLost, and Field names the item's field in wire form, with its
// index: "ack[2].token" for a token that is not current, "fail[0].id" for
// a job that does not exist. The call changed nothing.
type ItemError struct {
	Field string
	Err   error
}

// Error implements error.
func (e *ItemError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap makes an *ItemError match its sentinel.
func (e *ItemError) Unwrap() error { return e.Err }

// MissField is the field an *ItemError names for miss, the refusal of
// the item whose fields start with item ("ack[2]"): its id for
// ErrNotFound, its token for anything else (ErrLeaseLost).
func MissField(item string, miss error) string {
	if errors.Is(miss, ErrNotFound) {
		return item + ".id"
	}
	return item + ".token"
}

// RenameItems returns err with the field that the *InputError,
// *IDTakenError or *ItemError it wraps names moved from the items of list
// from to those of list to ("jobs[3].id" to "enqueue[3].id"), for a call
// that runs the rules of another under its own field names. Any other
// error, or a field of another list, comes back as it was.
func RenameItems(err error, from, to string) error {
	rename := func(field string) (string, bool) {
		rest, ok := strings.CutPrefix(field, from)
		if !ok || (rest != "" && rest[0] != '[' && rest[0] != '.') {
			return field, false
		}
		return to + rest, true
	}
	var in *InputError
	var taken *IDTakenError
	var item *ItemError
	switch {
	case errors.As(err, &in):
		if f, ok := rename(in.Field); ok {
			return &InputError{Field: f, Message: in.Message}
		}
	case errors.As(err, &taken):
		if f, ok := rename(taken.Field); ok {
			return &IDTakenError{Field: f}
		}
	case errors.As(err, &item):
		if f, ok := rename(item.Field); ok {
			return &ItemError{Field: f, Err: item.Err}
		}
	}
	return err
}
