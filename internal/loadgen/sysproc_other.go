//go:build !unix

package loadgen

import (
	"os"
	"syscall"
)

// childProcAttr has nothing to set on this platform.
func childProcAttr(syscall.Signal) *syscall.SysProcAttr { return nil }

// terminate stops the process; there is no graceful signal here.
func terminate(p *os.Process) error { return p.Kill() }
