//go:build !linux

package main

import (
	"fmt"
	"os"
)

// runTorture is `spool torture`, which needs Linux: it reads /proc,
// signals its child processes and mounts small file systems.
func runTorture(args []string) int {
	fmt.Fprintln(os.Stderr, "spool torture: runs on Linux only")
	return 2
}
