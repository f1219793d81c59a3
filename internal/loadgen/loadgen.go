// Package loadgen drives load against a Spool server, for spool bench and
// for the fault harness alike. It runs the server as a child process on a
// data folder and loopback address of its own (started, killed and started
// again in place, its CPU time and memory read from /proc), sends enqueue
// calls from many clients (each as soon as its last call is answered, or
// on a schedule), and runs fetch/ack workers shaped like the Go client's
// Worker.
//
// The calls themselves are the caller's: a Producer and a Worker own the
// loops, the bounds and the stopping, and hand each call to a function the
// caller gives. The benchmark sends prebuilt request bodies and records
// latencies there; the fault harness goes through the Go client and
// records every call in its history.
package loadgen

import (
	"context"
	"time"
)

// Bounds of the server that the loops respect.
const (
	// MaxFetch is the server's bound on the jobs of one fetch.
	MaxFetch = 1000
	// MaxBatch is the server's default bound on the jobs of one batch
	// call (enqueue or ack).
	MaxBatch = 10_000
)

// Sleep waits for d or until ctx ends, and reports whether it waited the
// whole d.
func Sleep(ctx context.Context, d time.Duration) bool { return wait(ctx, nil, d) }

// wait waits for d, or until ctx ends or stop closes, and reports whether
// it waited the whole d.
func wait(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// stopped reports whether ch is closed; a nil channel never is.
func stopped(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
