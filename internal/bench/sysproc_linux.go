package bench

import (
	"os"
	"syscall"
)

// childProcAttr puts the embedded server in its own process group, so that
// a Ctrl-C in the terminal reaches only the load generator, which then
// stops the server itself after taking its last measurements. The server
// also gets SIGTERM should the load generator die without stopping it.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// terminate asks the process to shut down gracefully.
func terminate(p *os.Process) error { return p.Signal(syscall.SIGTERM) }
