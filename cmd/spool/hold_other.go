//go:build !linux

package main

// holdProc holds no P off Linux, since the nap it takes is Linux's
// clock_nanosleep, and reports so.
func holdProc() bool { return false }
