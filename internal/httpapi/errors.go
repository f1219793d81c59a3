package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spoolq/spool/internal/engine"
	"github.com/spoolq/spool/internal/httpapi/auth"
	"github.com/spoolq/spool/internal/httpapi/streamserver"
	"github.com/spoolq/spool/internal/httpapi/wire"
	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/siteguard"
)

// Code is a stable error code of the wire protocol. Clients branch on codes,
// never on messages.
type Code string

// The error catalog: every code the API answers with. docs/protocol.md and
// api/openapi.json list the same codes; a test keeps them in step.
const (
	CodeBadRequest       Code = "bad_request"
	CodeInvalidJSON      Code = "invalid_json"
	CodeInvalidArgument  Code = "invalid_argument"
	CodeBatchTooLarge    Code = "batch_too_large"
	CodeUnauthorized     Code = "unauthorized"
	CodeForbidden        Code = "forbidden"
	CodeNotFound         Code = "not_found"
	CodeMethodNotAllowed Code = "method_not_allowed"
	CodeHostNotAllowed   Code = "host_not_allowed"
	CodeUpgradeRequired  Code = "upgrade_required"
	CodeIDTaken          Code = "id_taken"
	CodeLeaseLost        Code = "lease_lost"
	CodeInvalidState     Code = "invalid_state"
	CodePayloadTooLarge  Code = "payload_too_large"
	CodeHeadersTooLarge  Code = "headers_too_large"
	CodeInternal         Code = "internal_error"
	CodeUnavailable      Code = "unavailable"
	CodeStorageFull      Code = "storage_full"
)

// Catalog maps every code to its HTTP status.
var Catalog = map[Code]int{
	CodeBadRequest:       http.StatusBadRequest,
	CodeInvalidJSON:      http.StatusBadRequest,
	CodeInvalidArgument:  http.StatusBadRequest,
	CodeBatchTooLarge:    http.StatusBadRequest,
	CodeUnauthorized:     http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeHostNotAllowed:   http.StatusMisdirectedRequest,
	CodeUpgradeRequired:  http.StatusUpgradeRequired,
	CodeIDTaken:          http.StatusConflict,
	CodeLeaseLost:        http.StatusConflict,
	CodeInvalidState:     http.StatusConflict,
	CodePayloadTooLarge:  http.StatusRequestEntityTooLarge,
	CodeHeadersTooLarge:  http.StatusRequestHeaderFieldsTooLarge,
	CodeInternal:         http.StatusInternalServerError,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeStorageFull:      http.StatusInsufficientStorage,
}

// apiError is an error answer: {"error": {"code", "message", "field"}}.
type apiError struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

type errorBody struct {
	Error apiError `json:"error"`
}

// Status is the HTTP status of the error.
func (e *apiError) Status() int { return Catalog[e.Code] }

// Error implements error.
func (e *apiError) Error() string { return string(e.Code) + ": " + e.Message }

func newError(code Code, field, format string, args ...any) *apiError {
	return &apiError{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// classify maps an engine or store error to its catalog entry. It reports
// internal=true for errors that are not the caller's fault and must be
// logged rather than shown.
func classify(err error) (e *apiError, internal bool) {
	var ae *apiError
	var in *job.InputError
	var taken *job.IDTakenError
	var item *job.ItemError
	var batch *engine.BatchTooLargeError
	var payload *engine.PayloadTooLargeError
	var unauthorized *auth.UnauthorizedError
	var forbidden *auth.ForbiddenError
	var body *wire.InvalidJSONError
	var tooLarge *wire.TooLargeError
	var refused *streamserver.Error
	var missing *engine.NotFoundError
	var foreignHost *siteguard.HostError
	var crossSite *siteguard.CrossSiteError
	switch {
	case errors.As(err, &ae):
		return ae, false
	case errors.As(err, &unauthorized):
		return &apiError{Code: CodeUnauthorized, Message: unauthorized.Message}, false
	case errors.As(err, &forbidden):
		return &apiError{Code: CodeForbidden, Field: forbidden.Field, Message: forbidden.Message}, false
	case errors.As(err, &foreignHost):
		return &apiError{Code: CodeHostNotAllowed, Message: foreignHost.Error()}, false
	case errors.As(err, &crossSite):
		return &apiError{Code: CodeForbidden, Message: crossSite.Error()}, false
	case errors.As(err, &body):
		return &apiError{Code: CodeInvalidJSON, Field: body.Field, Message: body.Message}, false
	case errors.As(err, &tooLarge):
		return &apiError{Code: CodePayloadTooLarge, Message: tooLarge.Error()}, false
	case errors.As(err, &refused):
		return &apiError{Code: streamCode(refused.Kind), Message: refused.Message}, false
	case errors.As(err, &in):
		return &apiError{Code: CodeInvalidArgument, Field: in.Field, Message: in.Error()}, false
	case errors.As(err, &taken):
		return &apiError{Code: CodeIDTaken, Field: taken.Field, Message: taken.Error()}, false
	case errors.As(err, &item):
		// A refused item of a transaction: its sentinel's code, naming it.
		e, internal := classify(item.Err)
		return &apiError{Code: e.Code, Field: item.Field, Message: item.Field + ": " + e.Message}, internal
	case errors.As(err, &batch):
		return &apiError{Code: CodeBatchTooLarge, Field: batch.Field, Message: batch.Error()}, false
	case errors.As(err, &payload):
		return &apiError{Code: CodePayloadTooLarge, Field: payload.Field, Message: payload.Error()}, false
	case errors.As(err, &missing):
		return &apiError{Code: CodeNotFound, Field: missing.Field, Message: missing.Error()}, false
	case errors.Is(err, job.ErrNotFound):
		return &apiError{Code: CodeNotFound, Message: "no such job, queue, schedule or consumer group"}, false
	case errors.Is(err, job.ErrLeaseLost):
		return &apiError{Code: CodeLeaseLost, Message: "the lease token is not the job's current one, or the job is no longer active; nothing changed"}, false
	case errors.Is(err, job.ErrInvalidState):
		return &apiError{Code: CodeInvalidState, Message: stateMessage(err)}, false
	case errors.Is(err, job.ErrStorageFull):
		return &apiError{Code: CodeStorageFull, Message: "the server's disk is full; nothing of this call was stored, retry later"}, true
	case errors.Is(err, job.ErrUnavailable):
		return &apiError{Code: CodeUnavailable, Message: "the server cannot store changes right now; nothing of this call was stored, retry"}, true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{Code: CodeUnavailable, Message: "the request ended before it was served"}, false
	}
	return &apiError{Code: CodeInternal, Message: "internal server error"}, true
}

// streamCode is the code of a refusal of the stream server. Its internal
// errors are logged where they happen.
func streamCode(kind streamserver.ErrorKind) Code {
	switch kind {
	case streamserver.InvalidRequest:
		return CodeInvalidArgument
	case streamserver.UpgradeRequired:
		return CodeUpgradeRequired
	case streamserver.ShuttingDown:
		return CodeUnavailable
	case streamserver.FrameTooLarge:
		return CodePayloadTooLarge
	}
	return CodeInternal
}

// stateMessage keeps the engine's explanation of an invalid state ("job is
// completed") without the wrapping context, which may name internals.
func stateMessage(err error) string {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if next := errors.Unwrap(e); next == job.ErrInvalidState {
			return e.Error()
		}
	}
	return "the operation does not apply to the job's current state"
}

// Described is an error as the catalog answers it, for the handlers of
// other wire formats served beside this API (package queenapi) that answer
// the same errors with the same statuses and codes.
type Described struct {
	// Status is the HTTP status.
	Status int
	// Code is the catalog's code.
	Code Code
	// Field names the field of the request at fault, if one is.
	Field string
	// Message says what went wrong, without internal detail.
	Message string
	// Internal is true when the error is not the caller's fault: it must
	// be logged with its detail.
	Internal bool
}

// Describe classifies err as the catalog does for this API's own answers.
func Describe(err error) Described {
	e, internal := classify(err)
	status := e.Status()
	if status == 0 {
		status = http.StatusInternalServerError
	}
	return Described{Status: status, Code: e.Code, Field: e.Field, Message: e.Message, Internal: internal}
}
