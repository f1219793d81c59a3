package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/tail"
)

// Bounds on the embedded server's start and stop.
const (
	// readyTimeout bounds the wait for a new server's /readyz.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a graceful stop after SIGTERM; past it the
	// process is killed. It is longer than the server's own default
	// shutdown timeout (30 s).
	stopTimeout = 45 * time.Second
	// startAttempts is how often a start is tried when the child exits
	// before it is ready (another process may have taken the free port).
	startAttempts = 3
	// logTail bounds the server output kept for error reports.
	logTail = 16 << 10
)

// DefaultServerCommand re-executes the running binary with args, which
// start with "server". It is the embedded server of the spool CLI. The
// server gets the environment without its SPOOL_* variables, so that it
// runs with the defaults (the embedded store, no auth) whatever the shell
// holds; to measure another setup, start a server and use Options.Server.
func DefaultServerCommand(args []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the spool binary: %w", err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = withoutSpoolEnv(os.Environ())
	return cmd, nil
}

// withoutSpoolEnv returns env without its SPOOL_* variables.
func withoutSpoolEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "SPOOL_") {
			out = append(out, kv)
		}
	}
	return out
}

// childServer is a Spool server run as a child process on a temporary data
// folder, so that its CPU time and memory can be measured apart from the
// load generator's.
type childServer struct {
	url  string
	pid  int
	dir  string
	cmd  *exec.Cmd
	logs *tail.Buffer

	exited  chan struct{} // closed when the process has exited
	waitErr error         // its exit status, set before exited closes
	stopped sync.Once
	stopErr error
}

// startChild starts a server with command on a free local port and a new
// temporary data folder, and returns once its /readyz answers.
func startChild(ctx context.Context, command func([]string) (*exec.Cmd, error), extra []string) (*childServer, error) {
	var errs []error
	for attempt := 0; attempt < startAttempts; attempt++ {
		c, err := tryStartChild(ctx, command, extra)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return nil, fmt.Errorf("start embedded server: %w", errors.Join(errs...))
}

var errExitedEarly = errors.New("server exited before it was ready")

func tryStartChild(ctx context.Context, command func([]string) (*exec.Cmd, error), extra []string) (*childServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "spool-bench-")
	if err != nil {
		return nil, fmt.Errorf("make data folder: %w", err)
	}
	cmd, err := command(append([]string{"server", "--addr", addr, "--data", dir, "--log-level", "warn"}, extra...))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &childServer{url: "http://" + addr, dir: dir, cmd: cmd, logs: &tail.Buffer{Max: logTail}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.logs, c.logs
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("run %s: %w", cmd.Path, err)
	}
	c.pid = cmd.Process.Pid
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	if err := c.waitReady(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// freeAddr returns a local address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

func (c *childServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.exited:
			return fmt.Errorf("%w (%v): %s", errExitedEarly, c.waitErr, c.logs.String())
		case <-ctx.Done():
			return fmt.Errorf("wait for %s/readyz: %w: %s", c.url, ctx.Err(), c.logs.String())
		case <-tick.C:
		}
	}
}

// running reports whether the process has not exited.
func (c *childServer) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends the server SIGTERM, waits for it to shut down (killing it
// past stopTimeout), and removes its data folder. Only the process this
// childServer started is signalled. Idempotent.
func (c *childServer) stop() error {
	c.stopped.Do(func() {
		var errs []error
		if c.running() {
			if err := terminate(c.cmd.Process); err != nil && c.running() {
				errs = append(errs, fmt.Errorf("signal server %d: %w", c.pid, err))
			}
			select {
			case <-c.exited:
			case <-time.After(stopTimeout):
				_ = c.cmd.Process.Kill()
				<-c.exited
				errs = append(errs, fmt.Errorf("server %d did not stop within %v; killed", c.pid, stopTimeout))
			}
		}
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove data folder: %w", err))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// notableLogs returns the server's output lines other than its start-up
// line: warnings and errors, since it runs at --log-level warn.
func (c *childServer) notableLogs() []string {
	var out []string
	for _, line := range strings.Split(c.logs.String(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "spool listening on ") {
			out = append(out, line)
		}
	}
	return out
}

// exitStatus describes how the process ended, for reports of a server
// that died during a run.
func (c *childServer) exitStatus() string {
	if c.running() {
		return "running"
	}
	if c.waitErr == nil {
		return "exited with status 0"
	}
	return c.waitErr.Error()
}
