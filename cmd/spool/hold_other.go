//go:build !linux

package main

// holdProc does nothing off Linux, where the nap it takes is Linux's
// clock_nanosleep.
func holdProc() {}
