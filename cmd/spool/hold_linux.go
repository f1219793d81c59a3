package main

import (
	"runtime"
	"syscall"
	"unsafe"
)

// holdProc keeps one P in a system call for good: a goroutine that sleeps
// in clock_nanosleep for heldProcNap at a time, yielding between two naps.
// It reports that it does. See holdProcIfWanted.
func holdProc() bool {
	go func() {
		ts := syscall.NsecToTimespec(int64(heldProcNap))
		for {
			// CLOCK_MONOTONIC, relative; an interrupted nap just ends early.
			_, _, _ = syscall.Syscall6(syscall.SYS_CLOCK_NANOSLEEP, 1, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
			runtime.Gosched()
		}
	}()
	return true
}
