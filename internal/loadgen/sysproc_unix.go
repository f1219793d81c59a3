//go:build unix && !linux

package loadgen

import (
	"os"
	"syscall"
)

// childProcAttr puts a child in a process group of its own; this platform
// has no signal on the parent's death.
func childProcAttr(syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// terminate asks the process to shut down gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
