//go:build linux

package torture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Server is a Spool server the harness runs as a child process on a fixed
// loopback address and data folder, so that it can be killed and started
// again in place.
type Server struct {
	// Bin is the spool binary; Dir the data folder; Addr the HOST:PORT.
	Bin, Dir, Addr string
	// Args are extra flags of `spool server`.
	Args []string

	proc *Proc
}

// NewServer returns a stopped server on dir with a free loopback port.
func NewServer(bin, dir string, args ...string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &Server{Bin: bin, Dir: dir, Addr: addr, Args: args}, nil
}

// StartServer makes the server of NewServer and starts it, allowing 30 s
// to be ready; a start that fails is an error naming scenario, and leaves
// nothing running.
func StartServer(ctx context.Context, scenario, bin, dir string, args ...string) (*Server, error) {
	srv, err := NewServer(bin, dir, args...)
	if err != nil {
		return nil, err
	}
	if _, err := srv.Start(ctx, 30*time.Second); err != nil {
		srv.Close()
		return nil, fmt.Errorf("%s: %w", scenario, err)
	}
	return srv, nil
}

// URL is the server's base URL.
func (s *Server) URL() string { return "http://" + s.Addr }

// Proc is the running process, or nil before Start.
func (s *Server) Proc() *Proc { return s.proc }

// Start runs the server and waits up to limit for /readyz to answer 200.
// It returns how long that took. A server still running from an earlier
// Start is an error.
func (s *Server) Start(ctx context.Context, limit time.Duration) (time.Duration, error) {
	if s.proc != nil && s.proc.Alive() {
		return 0, fmt.Errorf("start server: pid %d still running", s.proc.Pid())
	}
	args := append([]string{"server", "--addr", s.Addr, "--data", s.Dir, "--log-level", "warn"}, s.Args...)
	began := time.Now()
	p, err := startProc("server", s.Bin, args, nil, nil)
	if err != nil {
		return 0, err
	}
	s.proc = p
	if err := waitReady(ctx, s.URL(), p, limit); err != nil {
		return time.Since(began), err
	}
	return time.Since(began), nil
}

// Kill kills the server with SIGKILL and waits until it is gone.
func (s *Server) Kill() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.Kill()
}

// ErrStopTimeout is returned by Terminate when the server did not exit in
// time and was killed.
var ErrStopTimeout = errors.New("server did not stop in time")

// Terminate sends SIGTERM and waits up to limit for a clean exit (status
// 0). Past limit the server is killed and the error wraps ErrStopTimeout;
// an exit with another status is an error too.
func (s *Server) Terminate(limit time.Duration) error {
	if s.proc == nil || !s.proc.Alive() {
		return nil
	}
	if err := s.proc.Signal(syscall.SIGTERM); err != nil {
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
func waitReady(ctx context.Context, url string, p *Proc, limit time.Duration) error {
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
			return fmt.Errorf("server exited before it was ready (%v): %s", p.ExitErr(), p.Logs())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("server not ready within %v: %s", limit, p.Logs())
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
