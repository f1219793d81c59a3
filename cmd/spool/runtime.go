package main

import (
	"runtime"
	"runtime/debug"
	"time"
)

// Garbage collector settings of `spool server`, used unless the standard
// GOGC or GOMEMLIMIT variables set their own. A server keeps a live heap
// of a few tens of megabytes (ready windows with the jobs they cache,
// leases, counts) and allocates for every request. Go's default, GOGC=100,
// collects each time the heap doubles: on a small machine the marking
// then competes for the cores with the one writer goroutine that bounds
// throughput. Collecting at five times the live heap instead was measured
// (BENCHMARKS.md) at 17–21 % more jobs a second for 15–20 MB more memory;
// the soft memory limit makes the collector work harder before the heap
// gets large, should the live heap ever grow.
const (
	serverGCPercent   = 400
	serverMemoryLimit = 512 << 20
)

// tuneGC applies the server's collector settings where getenv does not
// name its own, and reports what it changed.
func tuneGC(getenv func(string) string) (setPercent, setLimit bool) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
		setPercent = true
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(serverMemoryLimit)
		setLimit = true
	}
	return setPercent, setLimit
}

// serverExtraProcs is how many more Ps than CPUs `spool server` runs with
// on the embedded store, unless GOMAXPROCS says otherwise. The store's
// writer calls into SQLite through cgo, and a call that waits for the disk
// (a commit's fsync) keeps its P until the runtime takes it back;
// meanwhile the other goroutines have one P fewer. Two spare Ps were
// measured (BENCHMARKS.md) at 11–16 % more single-job enqueues a second
// over the stream transport on two cores, and no change elsewhere.
//
// A node on PostgreSQL makes no such calls and gets no spare Ps: there an
// idle P only lets the goroutines of one request (net/http's among them)
// spread over threads, each hand-over a thread woken. On two cores, with
// one P held (holdProcIfWanted), one producer over HTTP made 11–16 % more
// enqueues a second without spare Ps, at 35 % less of the node's CPU a
// job (BENCHMARKS.md).
const serverExtraProcs = 2

// tuneProcs raises GOMAXPROCS by serverExtraProcs for the embedded store
// (embedded), unless getenv names GOMAXPROCS, and reports whether it did.
func tuneProcs(getenv func(string) string, embedded bool) bool {
	if getenv("GOMAXPROCS") != "" || !embedded {
		return false
	}
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + serverExtraProcs)
	return true
}

// heldProcNap is how long the goroutine of holdProc stays in each system
// call: under the 10 ms after which the runtime takes back the P of a
// system call even with idle Ps to spare, so that it never does.
const heldProcNap = 9 * time.Millisecond

// holdProcIfWanted keeps one of the server's Ps in a system call for good
// (holdProc, on Linux) unless getenv sets SPOOL_HOLD_PROC to 0, and
// reports whether it does.
//
// The Go runtime's monitor thread (sysmon) sleeps deeply while every P is
// idle and is woken as soon as one is not. A server with one client at a
// time goes idle and busy again with each request, so the monitor woke,
// took a 20 µs nap, looked around and went back to deep sleep about every
// request: three thread switches a request, 14 % of the server's CPU at
// one producer (BENCHMARKS.md). With one P never idle the monitor keeps
// its own pace, which backs off to one look every 10 ms, and the switches
// are gone: 10–20 % more single-job enqueues at one producer. The P held
// is one of the serverExtraProcs on the embedded store, and the thread
// naps 9 ms at a time. A server with a single P holds none: it would be
// the one its goroutines run on.
func holdProcIfWanted(getenv func(string) string) bool {
	if getenv("SPOOL_HOLD_PROC") == "0" || runtime.GOMAXPROCS(0) < 2 {
		return false
	}
	return holdProc()
}
