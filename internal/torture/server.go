//go:build linux

package torture

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/spoolq/spool/internal/loadgen"
)

// newServer returns a stopped server of the spool binary bin on the data
// folder dir, with a free loopback port. Should the harness die, the
// kernel kills it.
func newServer(bin, dir string, args ...string) (*loadgen.Server, error) {
	srv, err := loadgen.NewServer(loadgen.Binary(bin), dir, args...)
	if err != nil {
		return nil, err
	}
	srv.ParentDeath = syscall.SIGKILL
	return srv, nil
}

// startServer makes the server of newServer and starts it, allowing 30 s
// to be ready; a start that fails is an error naming scenario, and leaves
// nothing running.
func startServer(ctx context.Context, scenario, bin, dir string, args ...string) (*loadgen.Server, error) {
	srv, err := newServer(bin, dir, args...)
	if err != nil {
		return nil, err
	}
	if _, err := srv.Start(ctx, 30*time.Second); err != nil {
		srv.Close()
		return nil, fmt.Errorf("%s: %w", scenario, err)
	}
	return srv, nil
}
