package main

import (
	"runtime/debug"
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
