//go:build !linux

// Command spool-torture runs Spool's fault and soak scenarios; it needs
// Linux: it reads /proc, signals its child processes and mounts small
// file systems.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "spool-torture: runs on Linux only")
	os.Exit(2)
}
