package loadgen

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/spoolq/spool/internal/tail"
)

// logTail bounds the output of a child process kept for error reports.
const logTail = 32 << 10

// killWait bounds the wait for a child to be gone after SIGKILL.
const killWait = 10 * time.Second

// Process is one child process a harness started. Signals go to its pid
// only, never to a name or a group, so that a harness stops nothing but
// what it started.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logs    *tail.Buffer
	exited  chan struct{}
	waitErr error // how it ended, set before exited closes
}

// StartProcess starts cmd as the child process called name (in error
// messages). Its standard output and error, where cmd does not direct
// them elsewhere, go to a bounded tail kept for error reports. The child
// runs in a process group of its own, so that a Ctrl-C in the terminal
// reaches only the harness, which then stops its children itself; on
// Linux it gets parentDeath should the harness die without stopping it.
func StartProcess(name string, cmd *exec.Cmd, parentDeath syscall.Signal) (*Process, error) {
	p := &Process{name: name, cmd: cmd, logs: &tail.Buffer{Max: logTail}, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.logs
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.logs
	}
	cmd.SysProcAttr = childProcAttr(parentDeath)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the child has not exited.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitErr is how the child ended (nil for status 0); it waits for the
// child to exit.
func (p *Process) ExitErr() error {
	<-p.exited
	return p.waitErr
}

// Signal sends sig to the child unless it has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && p.Alive() {
		return fmt.Errorf("signal %s %d with %v: %w", p.name, p.Pid(), sig, err)
	}
	return nil
}

// Terminate asks the child to shut down gracefully: SIGTERM, or a kill
// where the platform has no such signal. It does not wait.
func (p *Process) Terminate() error {
	if !p.Alive() {
		return nil
	}
	if err := terminate(p.cmd.Process); err != nil && p.Alive() {
		return fmt.Errorf("stop %s %d: %w", p.name, p.Pid(), err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the child to be gone.
func (p *Process) Kill() error {
	if p.Alive() {
		if err := p.cmd.Process.Kill(); err != nil && p.Alive() {
			return fmt.Errorf("kill %s %d: %w", p.name, p.Pid(), err)
		}
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s %d still running %v after SIGKILL", p.name, p.Pid(), killWait)
	}
}

// Wait waits up to limit for the child to exit and returns its exit
// error.
func (p *Process) Wait(limit time.Duration) error {
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(limit):
		return fmt.Errorf("%s %d did not exit within %v", p.name, p.Pid(), limit)
	}
}

// Logs returns the tail of the child's output.
func (p *Process) Logs() string { return p.logs.String() }

// Usage reads the child's CPU time and memory from /proc.
func (p *Process) Usage() (Usage, error) { return ReadUsage(p.Pid()) }
