package streamserver

// Error is a refusal of the stream server itself, as opposed to the
// answers of the API it carries: an upgrade it cannot make, or a frame it
// cannot serve. The API answers it with the catalog error of its Kind, so
// that a client reads it like any other error.
type Error struct {
	// Kind is what went wrong; it decides the error code.
	Kind ErrorKind
	// Message says what went wrong, for people.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// ErrorKind is the kind of a refusal of the stream server.
type ErrorKind int

// The kinds of refusal, with the error code each is answered with.
const (
	// InvalidRequest is a frame whose method or target makes no request,
	// or a stream opened inside a stream (invalid_argument).
	InvalidRequest ErrorKind = iota + 1
	// UpgradeRequired is a GET of the stream's path that does not ask to
	// upgrade to spool-stream/1 over HTTP/1.1 (upgrade_required).
	UpgradeRequired
	// ShuttingDown is an upgrade asked for after Close (unavailable).
	ShuttingDown
	// FrameTooLarge is a request frame longer than the request body limit
	// plus the frame header allows; the stream closes after its answer
	// (payload_too_large).
	FrameTooLarge
	// Internal is a panic of the handler or an answer too long for a
	// frame, which the stream server has logged (internal_error).
	Internal
)
