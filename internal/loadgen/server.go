package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"syscall"
	"time"
)

// firstStartAttempts is how often a server's first start is tried when the
// child exits before it is ready.
const firstStartAttempts = 3

// ErrExitedEarly is wrapped by Server.Start when the server exited before
// it was ready.
var ErrExitedEarly = errors.New("server exited before it was ready")

// ErrStopTimeout is wrapped by Server.Terminate when the server did not
// exit in time and was killed.
var ErrStopTimeout = errors.New("server did not stop in time")

// Command builds the command that runs a Spool server with args, which
// start with "server". It lets a harness run the spool binary, re-execute
// itself, or run a test binary acting as the server.
type Command func(args []string) (*exec.Cmd, error)

// Binary is the Command that runs the spool binary at path, with the
// harness's environment.
func Binary(path string) Command {
	return func(args []string) (*exec.Cmd, error) { return exec.Command(path, args...), nil }
}

// Server is a Spool server run as a child process on a loopback address
// and a data folder of its own, so that a harness can measure it apart
// from its load, and kill it and start it again in place.
type Server struct {
	// Command runs the server. Required.
	Command Command
	// Dir is the data folder and Addr the HOST:PORT it listens on.
	Dir, Addr string
	// Args are extra flags of `spool server`.
	Args []string
	// ParentDeath is the signal the server gets, on Linux, should the
	// harness die without stopping it. Defaults to SIGTERM.
	ParentDeath syscall.Signal

	proc  *Process
	ready bool // the server has been ready once at Addr
}

// NewServer returns a stopped server running command on dir, with a free
// loopback port.
func NewServer(command Command, dir string, args ...string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &Server{Command: command, Dir: dir, Addr: addr, Args: args}, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr }

// Process is the running (or last) process, or nil before Start.
func (s *Server) Process() *Process { return s.proc }

// Start runs the server and waits up to limit for /readyz to answer 200.
// It returns how long that took. A server still running from an earlier
// Start is an error. Until the server has been ready once, a child that
// exits before it is ready is tried again on another free port (another
// process may have taken the port after it was found free), at most three
// times in all; once it has been ready, Start keeps its address, so that
// clients find a restarted server where they found it before.
func (s *Server) Start(ctx context.Context, limit time.Duration) (time.Duration, error) {
	if s.proc != nil && s.proc.Alive() {
		return 0, fmt.Errorf("start server: pid %d still running", s.proc.Pid())
	}
	began := time.Now()
	var errs []error
	for attempt := 1; ; attempt++ {
		err := s.startOnce(ctx, limit)
		if err == nil {
			s.ready = true
			return time.Since(began), nil
		}
		errs = append(errs, err)
		if s.ready || attempt == firstStartAttempts || ctx.Err() != nil || !errors.Is(err, ErrExitedEarly) {
			return time.Since(began), errors.Join(errs...)
		}
		if s.Addr, err = freeAddr(); err != nil {
			return time.Since(began), errors.Join(append(errs, err)...)
		}
	}
}

// startOnce runs the server once and waits up to limit for it to be
// ready; a server that is not ready in time is killed.
func (s *Server) startOnce(ctx context.Context, limit time.Duration) error {
	cmd, err := s.Command(append([]string{"server", "--addr", s.Addr, "--data", s.Dir, "--log-level", "warn"}, s.Args...))
	if err != nil {
		return fmt.Errorf("start server: %w", err)
	}
	death := s.ParentDeath
	if death == 0 {
		death = syscall.SIGTERM
	}
	p, err := StartProcess("server", cmd, death)
	if err != nil {
		return err
	}
	s.proc = p
	if err := waitReady(ctx, s.URL(), p, limit); err != nil {
		_ = p.Kill()
		return err
	}
	return nil
}

// Kill kills the server with SIGKILL and waits until it is gone.
func (s *Server) Kill() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Kill()
}

// Terminate asks the server to stop gracefully and waits up to limit for
// it to exit with status 0. Past limit the server is killed and the error
// wraps ErrStopTimeout; an exit with another status is an error too.
func (s *Server) Terminate(limit time.Duration) error {
	if s.proc == nil || !s.proc.Alive() {
		return nil
	}
	if err := s.proc.Terminate(); err != nil {
		return err
	}
	if err := s.proc.Wait(limit); err != nil {
		if s.proc.Alive() {
			_ = s.proc.Kill()
			return fmt.Errorf("graceful stop: %w within %v; killed", ErrStopTimeout, limit)
		}
		return fmt.Errorf("graceful stop: server exited with %w: %s", err, s.proc.Logs())
	}
	return nil
}

// Close kills the server if it still runs. Safe to call more than once.
func (s *Server) Close() {
	if s.proc != nil && s.proc.Alive() {
		_ = s.proc.Kill()
	}
}

// Ready asks /readyz once and returns its status code (0 when the server
// did not answer).
func (s *Server) Ready(ctx context.Context) int {
	return getStatus(ctx, s.URL()+"/readyz")
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// probe is the HTTP client of readiness checks: no keep-alive, so that a
// killed server's connections are never reused.
var probe = &http.Client{
	Timeout:   time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
}

// getStatus asks url once and returns the answer's status code, 0 when
// there was no answer.
func getStatus(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := probe.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady polls url/readyz until it answers 200, p exits, or limit
// passes.
func waitReady(ctx context.Context, url string, p *Process, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if getStatus(ctx, url+"/readyz") == http.StatusOK {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%w (%v): %s", ErrExitedEarly, p.ExitErr(), p.Logs())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("server not ready within %v: %s", limit, p.Logs())
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
