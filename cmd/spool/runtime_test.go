package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// The server's collector settings apply unless GOGC or GOMEMLIMIT says
// otherwise.
func TestTuneGC(t *testing.T) {
	percent := debug.SetGCPercent(100)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})

	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if p, l := tuneGC(getenv); !p || !l {
		t.Fatalf("with no variables set: changed percent %v, limit %v; want both", p, l)
	}
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Fatalf("GC percent %d, want %d", got, serverGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != serverMemoryLimit {
		t.Fatalf("memory limit %d, want %d", got, serverMemoryLimit)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	env["GOGC"], env["GOMEMLIMIT"] = "150", "1GiB"
	if p, l := tuneGC(getenv); p || l {
		t.Fatalf("with GOGC and GOMEMLIMIT set: changed percent %v, limit %v; want neither", p, l)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GC percent %d, want the 100 left by the test", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d, want it unchanged", got)
	}
}

// The server runs with spare Ps on the embedded store unless GOMAXPROCS
// says otherwise, and with none on PostgreSQL.
func TestTuneProcs(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	if tuneProcs(func(k string) string { return map[string]string{"GOMAXPROCS": "3"}[k] }, true) {
		t.Fatal("tuneProcs changed GOMAXPROCS although the variable is set")
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Fatalf("GOMAXPROCS %d, want %d unchanged", got, procs)
	}
	if tuneProcs(func(string) string { return "" }, false) {
		t.Fatal("tuneProcs changed GOMAXPROCS for PostgreSQL")
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Fatalf("GOMAXPROCS %d on PostgreSQL, want %d unchanged", got, procs)
	}
	if !tuneProcs(func(string) string { return "" }, true) {
		t.Fatal("tuneProcs did not change GOMAXPROCS")
	}
	if got := runtime.GOMAXPROCS(0); got != procs+serverExtraProcs {
		t.Fatalf("GOMAXPROCS %d, want %d", got, procs+serverExtraProcs)
	}
}
