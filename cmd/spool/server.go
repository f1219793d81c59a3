package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spoolq/spool/internal/config"
	"github.com/spoolq/spool/internal/server"
)

// runServer is `spool server`: it runs a server until SIGINT or SIGTERM,
// then shuts it down gracefully.
func runServer(args []string) int {
	cfg, err := config.Load(args, os.Getenv, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "spool server: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(cfg.LogLevel)}))
	tuneGC(os.Getenv)
	tuneProcs(os.Getenv, cfg.DB == "")
	holdProcIfWanted(os.Getenv)
	if path := os.Getenv("SPOOL_CPUPROFILE"); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "spool server: %v\n", err)
			return 1
		}
		defer stopProfile()
	}
	if path := os.Getenv("SPOOL_MEMPROFILE"); path != "" {
		defer writeAllocProfile(path, logger)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := server.New(cfg, logger)
	if err := srv.Start(ctx); err != nil {
		logger.Error("start failed", "err", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "spool listening on http://%s (data %s, sync %s)\n", srv.Addr(), cfg.Data, cfg.Sync)
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
