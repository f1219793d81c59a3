package torture

import (
	"errors"
	"net"
	"net/http"

	"github.com/spoolq/spool/client"
)

// outcome is how a call ended, as a history records it.
type outcome struct {
	typ    Type
	status int
	code   string
	err    string
}

// classify turns a client call's error into its outcome: nil is ok; an
// answer from the server, or a connection that could not even be opened,
// is a sure failure; anything else (a connection broken or timed out after
// the request may have been sent) leaves the outcome unknown.
func classify(err error) outcome {
	if err == nil {
		return outcome{typ: TypeOK}
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		return outcome{typ: TypeFail, status: ce.Status, code: ce.Code, err: err.Error()}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return outcome{typ: TypeFail, code: "", err: err.Error()}
	}
	return outcome{typ: TypeInfo, err: err.Error()}
}

// retryable reports whether a call with outcome o should be sent again
// unchanged, as a client following docs/protocol.md does: transport
// failures and unknown outcomes, 5xx answers (unavailable, storage_full)
// and 429.
func (o outcome) retryable() bool {
	switch o.typ {
	case TypeInfo:
		return true
	case TypeFail:
		return o.status == 0 || o.status >= 500 || o.status == http.StatusTooManyRequests
	}
	return false
}

// event fills e's outcome fields from o.
func (o outcome) event(e Event) Event {
	e.Type, e.Status, e.Code, e.Err = o.typ, o.status, o.code, o.err
	return e
}
