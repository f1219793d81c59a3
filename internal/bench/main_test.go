package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// childEnv makes the test binary act as `spool server`, so that the tests
// run the embedded server as a real child process, as the CLI does,
// without building the spool binary first.
const childEnv = "SPOOL_BENCH_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(serveForTest(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// serveForTest does what cmd/spool's server command does with args
// ("server --addr … --data … --sync … --log-level warn").
func serveForTest(args []string) int {
	if len(args) == 0 || args[0] != "server" {
		fmt.Fprintf(os.Stderr, "test server: want server arguments, got %q\n", args)
		return 2
	}
	cfg, err := config.Load(args[1:], os.Getenv, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "test server: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := server.New(cfg, logger)
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "test server: start: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "spool listening on http://%s\n", srv.Addr())
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Stop(sctx); err != nil {
		fmt.Fprintf(os.Stderr, "test server: stop: %v\n", err)
		return 1
	}
	return 0
}

// testServerCommand runs the test binary itself as the server.
func testServerCommand(args []string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(withoutSpoolEnv(os.Environ()), childEnv+"=1")
	return cmd, nil
}
