package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spoolq/spool/internal/loadgen"
)

// Bounds on the embedded server's start and stop.
const (
	// readyTimeout bounds the wait for a new server's /readyz.
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a graceful stop after SIGTERM; past it the
	// process is killed. It is longer than the server's own default
	// shutdown timeout (30 s).
	stopTimeout = 45 * time.Second
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

// embedded is a run's own Spool server, a child process on a temporary
// data folder, so that its CPU time and memory can be measured apart from
// the load generator's. Should the load generator die without stopping
// it, the server gets SIGTERM.
type embedded struct {
	srv     *loadgen.Server
	stopped sync.Once
	stopErr error
}

// startEmbedded starts a server with command on a free local port and a
// new temporary data folder, and returns once its /readyz answers.
func startEmbedded(ctx context.Context, command loadgen.Command, extra []string) (*embedded, error) {
	dir, err := os.MkdirTemp("", "spool-bench-")
	if err != nil {
		return nil, fmt.Errorf("start embedded server: make data folder: %w", err)
	}
	srv, err := loadgen.NewServer(command, dir, extra...)
	if err == nil {
		_, err = srv.Start(ctx, readyTimeout)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start embedded server: %w", err)
	}
	return &embedded{srv: srv}, nil
}

// url is the server's base URL and pid its process id.
func (e *embedded) url() string { return e.srv.URL() }
func (e *embedded) pid() int    { return e.srv.Process().Pid() }

// running reports whether the process has not exited.
func (e *embedded) running() bool { return e.srv.Process().Alive() }

// stop asks the server to shut down, waits for it (killing it past
// stopTimeout), and removes its data folder. How the server exited is
// left to exitStatus: only a server that would not stop is an error.
// Idempotent.
func (e *embedded) stop() error {
	e.stopped.Do(func() {
		var errs []error
		var exit *exec.ExitError
		if err := e.srv.Terminate(stopTimeout); err != nil && !errors.As(err, &exit) {
			errs = append(errs, fmt.Errorf("server %d: %w", e.pid(), err))
		}
		if err := os.RemoveAll(e.srv.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove data folder: %w", err))
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// notableLogs returns the server's output lines other than its start-up
// line: warnings and errors, since it runs at --log-level warn.
func (e *embedded) notableLogs() []string {
	var out []string
	for _, line := range strings.Split(e.srv.Process().Logs(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "spool listening on ") {
			out = append(out, line)
		}
	}
	return out
}

// exitStatus describes how the process ended, for reports of a server
// that died during a run.
func (e *embedded) exitStatus() string {
	p := e.srv.Process()
	if p.Alive() {
		return "running"
	}
	if err := p.ExitErr(); err != nil {
		return err.Error()
	}
	return "exited with status 0"
}
