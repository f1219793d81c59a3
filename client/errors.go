package client

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Sentinel errors, one per error code of the protocol's catalog. Every error
// the server answers is an *Error whose Is method matches the sentinel of its
// code, so callers branch with errors.Is(err, client.ErrLeaseLost) and reach
// the details (status, message, field) with errors.As. The sentinels
// themselves are never returned bare.
var (
	// ErrBadRequest matches code bad_request: the request was not valid
	// HTTP/1.1 (a proxy or a broken transport sent it so).
	ErrBadRequest = errors.New("bad request")
	// ErrInvalidJSON matches code invalid_json: the body was not valid JSON,
	// had an unknown field, or a field had the wrong type.
	ErrInvalidJSON = errors.New("invalid json")
	// ErrInvalidArgument matches code invalid_argument: a field's value is
	// not allowed; Error.Field names it.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBatchTooLarge matches code batch_too_large: a batch held more items
	// than the server allows.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrUnauthorized matches code unauthorized: credentials are missing or
	// invalid.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden matches code forbidden: the credentials lack the role or
	// namespace for the call (or a browser sent it from another site).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound matches code not_found: no such job, queue, schedule or
	// route.
	ErrNotFound = errors.New("not found")
	// ErrMethodNotAllowed matches code method_not_allowed.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrHostNotAllowed matches code host_not_allowed: the server does not
	// answer to the host name of the client's URL; its operator lists the
	// names it serves under with --allowed-hosts.
	ErrHostNotAllowed = errors.New("host not allowed")
	// ErrUpgradeRequired matches code upgrade_required: the server (or a
	// proxy in front of it) did not let WithStream's connection upgrade
	// to the stream protocol.
	ErrUpgradeRequired = errors.New("upgrade required")
	// ErrIDTaken matches code id_taken: an enqueue named an id that belongs
	// to a job of another queue. Nothing was stored; Error.Field names the
	// id.
	ErrIDTaken = errors.New("id taken")
	// ErrLeaseLost matches code lease_lost: the fencing token is not the
	// job's current one, or the job is no longer active. The call changed
	// nothing; another worker may own the job now, so drop the result. A
	// Worker also uses it as the cause of a handler's context when the
	// job's lease was lost.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidState matches code invalid_state: the operation does not
	// apply to the job's current state. The call changed nothing.
	ErrInvalidState = errors.New("invalid state")
	// ErrPayloadTooLarge matches code payload_too_large: the body or one
	// payload, result or progress report exceeds its limit.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrHeadersTooLarge matches code headers_too_large: the request's
	// headers exceed what the server reads.
	ErrHeadersTooLarge = errors.New("headers too large")
	// ErrInternal matches code internal_error: a server fault.
	ErrInternal = errors.New("internal error")
	// ErrUnavailable matches code unavailable: the server is shutting down
	// or cannot write now; retry.
	ErrUnavailable = errors.New("unavailable")
	// ErrStorageFull matches code storage_full: the server's disk is full and
	// nothing of the call was stored; retry later.
	ErrStorageFull = errors.New("storage full")
)

// codes maps each catalog code to its sentinel and HTTP status.
var codes = map[string]struct {
	sentinel error
	status   int
}{
	"bad_request":        {ErrBadRequest, http.StatusBadRequest},
	"invalid_json":       {ErrInvalidJSON, http.StatusBadRequest},
	"invalid_argument":   {ErrInvalidArgument, http.StatusBadRequest},
	"batch_too_large":    {ErrBatchTooLarge, http.StatusBadRequest},
	"unauthorized":       {ErrUnauthorized, http.StatusUnauthorized},
	"forbidden":          {ErrForbidden, http.StatusForbidden},
	"not_found":          {ErrNotFound, http.StatusNotFound},
	"method_not_allowed": {ErrMethodNotAllowed, http.StatusMethodNotAllowed},
	"host_not_allowed":   {ErrHostNotAllowed, http.StatusMisdirectedRequest},
	"upgrade_required":   {ErrUpgradeRequired, http.StatusUpgradeRequired},
	"id_taken":           {ErrIDTaken, http.StatusConflict},
	"lease_lost":         {ErrLeaseLost, http.StatusConflict},
	"invalid_state":      {ErrInvalidState, http.StatusConflict},
	"payload_too_large":  {ErrPayloadTooLarge, http.StatusRequestEntityTooLarge},
	"headers_too_large":  {ErrHeadersTooLarge, http.StatusRequestHeaderFieldsTooLarge},
	"internal_error":     {ErrInternal, http.StatusInternalServerError},
	"unavailable":        {ErrUnavailable, http.StatusServiceUnavailable},
	"storage_full":       {ErrStorageFull, http.StatusInsufficientStorage},
}

// Error is an error answered by the server: either a whole call's 4xx/5xx
// answer, or one failed item of a batch call. Code is the stable catalog
// code to branch on (also through errors.Is and the sentinels above);
// Message is for people and may change between versions.
type Error struct {
	// Status is the HTTP status of the answer. For a failed item of a batch
	// call (whose answer was 200) it is the status the catalog gives Code.
	Status int
	// Code is the catalog code, such as "lease_lost". It is empty when the
	// server (or a proxy in front of it) answered an error without a Spool
	// error body.
	Code string
	// Message explains the error.
	Message string
	// Field names the request field at fault, such as "jobs[2].kind", when
	// one is.
	Field string
}

// Error implements error as "code: message".
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = fmt.Sprintf("http %d", e.Status)
	}
	if e.Message == "" {
		return code
	}
	return code + ": " + e.Message
}

// Is reports whether target is the sentinel of e's code, so that
// errors.Is(err, ErrNotFound) holds for a not_found answer.
func (e *Error) Is(target error) bool {
	c, ok := codes[e.Code]
	return ok && c.sentinel == target
}

// temporary reports whether a call that failed with err may succeed when
// tried again unchanged: transport failures, answers cut short, 5xx answers
// and 429. Encoding errors and 4xx answers are not.
func temporary(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests
	}
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF)
}

// wireError is the body of an error answer and of a failed batch item.
type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// itemError turns a failed batch item into an *Error.
func (w *wireError) itemError() *Error {
	status := 0
	if c, ok := codes[w.Code]; ok {
		status = c.status
	}
	return &Error{Status: status, Code: w.Code, Message: w.Message, Field: w.Field}
}
