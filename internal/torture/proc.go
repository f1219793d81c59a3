//go:build linux

package torture

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spoolq/spool/internal/tail"
)

// logTail bounds the output of a child process kept for error reports.
const logTail = 32 << 10

// Proc is one child process the harness started. Signals go to its pid
// only, never to a name or a group.
type Proc struct {
	name    string
	cmd     *exec.Cmd
	logs    *tail.Buffer
	exited  chan struct{}
	waitErr error
}

// startProc starts bin with args. stdin and stdout, when not nil, are
// the child's ends of pipes: the child gets them and the parent's copies
// are closed once it runs. Without stdout, the child's standard output
// joins its stderr in the log tail.
func startProc(name, bin string, args []string, stdin, stdout *os.File) (*Proc, error) {
	p := &Proc{name: name, logs: &tail.Buffer{Max: logTail}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if stdin != nil {
		p.cmd.Stdin = stdin
		defer stdin.Close()
	}
	if stdout != nil {
		p.cmd.Stdout = stdout
		defer stdout.Close()
	}
	// Its own process group keeps a terminal's Ctrl-C for the harness,
	// and the child dies with the harness.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the child has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the child has not exited.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ExitErr is how the child ended (nil for status 0); valid once Exited
// is closed.
func (p *Proc) ExitErr() error {
	<-p.exited
	return p.waitErr
}

// Signal sends sig to the child unless it has exited.
func (p *Proc) Signal(sig syscall.Signal) error {
	if !p.Alive() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && p.Alive() {
		return fmt.Errorf("signal %s %d with %v: %w", p.name, p.Pid(), sig, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the child to be gone.
func (p *Proc) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s %d still running 10s after SIGKILL", p.name, p.Pid())
	}
}

// Wait waits up to limit for the child to exit and returns its exit error.
func (p *Proc) Wait(limit time.Duration) error {
	select {
	case <-p.exited:
		return p.waitErr
	case <-time.After(limit):
		return fmt.Errorf("%s %d did not exit within %v", p.name, p.Pid(), limit)
	}
}

// Logs returns the tail of the child's output.
func (p *Proc) Logs() string { return p.logs.String() }

// Mem is a process's memory use from /proc/<pid>/status.
type Mem struct {
	// RSS is the resident memory now and HWM the peak since the process
	// started, in bytes.
	RSS int64 `json:"rss_bytes"`
	HWM int64 `json:"hwm_bytes"`
}

// Mem reads the child's resident memory (VmRSS) and its peak (VmHWM).
func (p *Proc) Mem() (Mem, error) {
	return readMem(p.Pid())
}

// readMem reads VmRSS and VmHWM of pid.
func readMem(pid int) (Mem, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Mem{}, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	m := Mem{RSS: statusKB(data, "VmRSS:") * 1024, HWM: statusKB(data, "VmHWM:") * 1024}
	if m.RSS == 0 {
		return m, errors.New("read memory of process: no VmRSS line")
	}
	return m, nil
}

// statusKB returns the number of a "Name:   1234 kB" line.
func statusKB(status []byte, name string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
