// Package torture runs Spool servers and workers as real processes, injects
// faults into them (kill -9, SIGSTOP, SIGTERM under load, a full or
// read-only disk, a deep backlog) and checks that nothing acknowledged is
// lost and no stale lease is honoured. The servers are the product binary,
// spool; the worker processes are the harness binary, spool-torture, whose
// worker command is RunWorker. Servers, load and workers run on loadgen,
// as spool bench does.
//
// Load generators write every operation to a History; Check, a pure
// function over that history, counts the anomalies; each scenario returns a
// report whose Violations list the pass marks it missed. The command
// spool-torture and the tests under test/torture run the same scenarios.
package torture

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Op is the operation an Event records.
type Op string

// The operations of a history.
const (
	// OpEnqueue is one job of an enqueue call (a batch records one event
	// per job).
	OpEnqueue Op = "enqueue"
	// OpFetch is one job handed out by a fetch; only successful hand-outs
	// are recorded (Type is TypeOK).
	OpFetch Op = "fetch"
	// OpAck completes a job with a lease token.
	OpAck Op = "ack"
	// OpFail fails an attempt with a lease token; Retry says whether the
	// caller asked for another attempt.
	OpFail Op = "fail"
	// OpExtend extends a lease.
	OpExtend Op = "extend"
	// OpAbandon records that a consumer chose to let a lease run out, so a
	// later hand-out of the job is expected rather than a duplicate.
	OpAbandon Op = "abandon"
	// OpKill records that the harness killed the server (kill -9).
	OpKill Op = "kill"
	// OpReady records that a restarted server answered /readyz.
	OpReady Op = "ready"
)

// Type is the phase of an operation, after Jepsen's histories: a call is
// invoked, then it either succeeded, failed for sure, or its outcome is
// unknown (the connection broke after the request may have been sent).
type Type string

// The phases of an operation.
const (
	TypeInvoke Type = "invoke"
	TypeOK     Type = "ok"
	TypeFail   Type = "fail"
	TypeInfo   Type = "info"
)

// Event is one entry of a History.
type Event struct {
	// Seq orders the events: a larger Seq was recorded later.
	Seq int64 `json:"seq"`
	// At is when the event was recorded.
	At time.Time `json:"at"`
	// Op and Type say what happened.
	Op   Op   `json:"op"`
	Type Type `json:"type"`
	// Job is the job's id; empty for server events.
	Job string `json:"job,omitempty"`
	// Token is the lease token of fetch, ack, fail and extend events.
	Token int64 `json:"token,omitempty"`
	// Attempt is the job's attempt number of a fetch.
	Attempt int `json:"attempt,omitempty"`
	// Retry is set on a fail that asked for another attempt.
	Retry bool `json:"retry,omitempty"`
	// Duplicate is set on an enqueue answered with duplicate: true.
	Duplicate bool `json:"duplicate,omitempty"`
	// State is the job state a successful ack or fail answered.
	State string `json:"state,omitempty"`
	// Status and Code are the HTTP status and error code of a failed call.
	Status int    `json:"status,omitempty"`
	Code   string `json:"code,omitempty"`
	// Err describes a failed or unknown call.
	Err string `json:"err,omitempty"`
}

// History is an append-only record of events, safe for concurrent use.
type History struct {
	mu     sync.Mutex
	events []Event
}

// Add records e, stamping its Seq and At, and returns the stamped event.
func (h *History) Add(e Event) Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.Seq = int64(len(h.events)) + 1
	e.At = time.Now()
	h.events = append(h.events, e)
	return e
}

// Events returns a copy of the events recorded so far, in Seq order.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// Len is how many events were recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// WriteJSONL writes the events as JSON lines, for replaying a failed run's
// history through Check.
func (h *History) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, e := range h.Events() {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("write history: %w", err)
		}
	}
	return nil
}

// ReadJSONL reads events written by WriteJSONL.
func ReadJSONL(r io.Reader) ([]Event, error) {
	dec := json.NewDecoder(r)
	var out []Event
	for dec.More() {
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("read history: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}
