package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

const serverLong = `Run a Spool node until SIGINT or SIGTERM, then shut it down gracefully.

Every flag is also an environment variable (--max-batch is SPOOL_MAX_BATCH)
and a key of the JSON file --config names; a flag wins over the variable,
the variable over the file. The address is checked free, and the data
folder writable, before anything is written.`

const serverExample = `  spool server                                        # 127.0.0.1:7311, data in ./spool-data
  spool server --addr 0.0.0.0:7311 --auth --auth-file tokens.txt
  spool server --addr 0.0.0.0:7311 --db postgres://spool:secret@db.internal/spool
  SPOOL_LOG_LEVEL=debug spool server --data /var/lib/spool`

// serverCommand is `spool server`.
func (c *cli) serverCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "server [flags]",
		Short:   "Run a Spool node (embedded SQLite in ./spool-data by default, or PostgreSQL with --db)",
		Long:    serverLong,
		Example: serverExample,
		Args:    noArgs,
	}
	flags := addServerFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := config.Load(serverArgs(cmd.Flags(), flags), c.getenv, c.errOut)
		if err != nil {
			return usagef("%v", err)
		}
		if err := preflight(cfg); err != nil {
			return err
		}
		return exitCode(runServer(cfg, c.getenv, c.errOut))
	}
	return cmd
}

// storeOf says where cfg keeps its jobs, for the start-up line: the data
// folder and sync of the embedded store, or PostgreSQL's host and database
// (never its user or password).
func storeOf(cfg config.Config) string {
	if cfg.DB == "" {
		return fmt.Sprintf("data %s, sync %s", cfg.Data, cfg.Sync)
	}
	u, err := url.Parse(cfg.DB)
	if err != nil || u.Host == "" {
		return "PostgreSQL"
	}
	return "PostgreSQL at " + u.Host + u.Path
}

// exitCode is the error that ends a command with code, nil for 0.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return exitError(code)
}

// preflight checks, before the server writes anything, what would stop it
// half-way: an address another process holds, and a data folder it cannot
// write. The address is bound and let go: a process that takes it in
// between is still reported, by the server's own listen.
func preflight(cfg config.Config) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("address %s is already in use: another process (another spool server?) listens there; stop it or pick another address with --addr", cfg.Addr)
		}
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if err := ln.Close(); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.DB != "" {
		return nil
	}
	return checkDataDir(cfg.Data)
}

// checkDataDir reports a data folder that exists but is no folder or
// cannot be written, naming it. A folder that does not exist yet is
// created at start.
func checkDataDir(dir string) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	denied := func(err error) error {
		return fmt.Errorf("data folder %s is not writable: permission denied (%v): give the user running spool write access to it, or pick another folder with --data", dir, err)
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrPermission):
		return denied(err)
	case err != nil:
		return fmt.Errorf("data folder %s: %w", dir, err)
	case !info.IsDir():
		return fmt.Errorf("data folder %s is a file, not a folder: pick another with --data", dir)
	}
	f, err := os.CreateTemp(dir, ".spool-write-check-*")
	switch {
	case errors.Is(err, fs.ErrPermission):
		return denied(err)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("data folder %s is not writable: it is on a read-only file system; pick another folder with --data", dir)
	case err != nil:
		return fmt.Errorf("data folder %s: write a file: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// runServer runs a server for cfg until SIGINT or SIGTERM, then shuts it
// down gracefully, and returns the exit code.
func runServer(cfg config.Config, getenv func(string) string, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel(cfg.LogLevel)}))
	tuneGC(getenv)
	tuneProcs(getenv, cfg.DB == "")
	holdProcIfWanted(getenv)
	if path := getenv("SPOOL_CPUPROFILE"); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(stderr, "spool server: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	if path := getenv("SPOOL_MEMPROFILE"); path != "" {
		defer writeAllocProfile(path, logger)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := server.New(cfg, logger)
	if err := srv.Start(ctx); err != nil {
		logger.Error("start failed", "err", err)
		return 1
	}
	fmt.Fprintf(stderr, "spool listening on http://%s (%s)\n", srv.Addr(), storeOf(cfg))
	<-ctx.Done()
	stop() // a second signal now kills the process at once
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Stop(shutdownCtx); err != nil {
		logger.Error("shutdown failed", "err", err)
		return 1
	}
	return 0
}

func logLevel(name string) slog.Level {
	switch name {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// startCPUProfile writes a CPU profile of the server to path until the
// returned function is called. SPOOL_CPUPROFILE turns it on, for finding
// where a benchmark spends the server's time.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeAllocProfile writes the allocations made since the server started
// to path. SPOOL_MEMPROFILE turns it on, beside SPOOL_CPUPROFILE.
func writeAllocProfile(path string, logger *slog.Logger) {
	f, err := os.Create(path)
	if err != nil {
		logger.Error("create allocation profile", "err", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		logger.Error("write allocation profile", "err", err)
	}
}
