package loadgen

import (
	"os"
	"syscall"
)

// childProcAttr puts a child in a process group of its own and has the
// kernel send it parentDeath when the harness dies.
func childProcAttr(parentDeath syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: parentDeath}
}

// terminate asks the process to shut down gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
