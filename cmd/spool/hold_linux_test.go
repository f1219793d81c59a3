package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The server holds a P in a system call, in a thread that naps in
// clock_nanosleep (nothing else in the process calls it), unless
// SPOOL_HOLD_PROC is 0 or it has a single P.
func TestHoldProcNapsInASystemCall(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	if n := threadsIn(t, syscall.SYS_CLOCK_NANOSLEEP); n != 0 {
		t.Fatalf("%d threads in clock_nanosleep before the hold", n)
	}
	if holdProcIfWanted(func(k string) string { return map[string]string{"SPOOL_HOLD_PROC": "0"}[k] }) {
		t.Fatal("holdProcIfWanted held a P with SPOOL_HOLD_PROC=0")
	}
	time.Sleep(50 * time.Millisecond)
	if n := threadsIn(t, syscall.SYS_CLOCK_NANOSLEEP); n != 0 {
		t.Fatalf("%d threads in clock_nanosleep with SPOOL_HOLD_PROC=0", n)
	}
	runtime.GOMAXPROCS(1)
	if holdProcIfWanted(func(string) string { return "" }) {
		t.Fatal("holdProcIfWanted held the only P")
	}
	time.Sleep(50 * time.Millisecond)
	if n := threadsIn(t, syscall.SYS_CLOCK_NANOSLEEP); n != 0 {
		t.Fatalf("%d threads in clock_nanosleep with a single P", n)
	}
	runtime.GOMAXPROCS(max(procs, 2))
	if !holdProcIfWanted(func(string) string { return "" }) {
		t.Fatal("holdProcIfWanted did not hold a P")
	}
	deadline := time.Now().Add(5 * time.Second)
	for threadsIn(t, syscall.SYS_CLOCK_NANOSLEEP) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no thread naps in clock_nanosleep 5 s after the hold")
		}
		time.Sleep(time.Millisecond)
	}
}

// threadsIn counts the threads of the process blocked in the system call
// number nr, from /proc/self/task/*/syscall.
func threadsIn(t *testing.T, nr int) int {
	t.Helper()
	files, err := filepath.Glob("/proc/self/task/*/syscall")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if fields := strings.Fields(string(b)); len(fields) > 0 && fields[0] == strconv.Itoa(nr) {
			n++
		}
	}
	return n
}
