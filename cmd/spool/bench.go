package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spoolq/spool/internal/bench"
)

// runBench is `spool bench`: a load generator against an embedded server on
// a temporary data folder, or against --server.
func runBench(args []string) int {
	fs := flag.NewFlagSet("spool bench", flag.ContinueOnError)
	var o bench.Options
	fs.StringVar(&o.Mode, "mode", bench.ModeLifecycle, "enqueue, enqueue-batch, process or lifecycle")
	fs.StringVar(&o.Server, "server", "", "base URL of a running server (default: start an embedded one on a temporary folder)")
	fs.StringVar(&o.Sync, "sync", "full", "durability of the embedded server: full or normal")
	fs.IntVar(&o.Jobs, "jobs", 100_000, "jobs to move")
	fs.IntVar(&o.Batch, "batch", 0, "jobs per enqueue request and most jobs per fetch (default 1000; 1 for enqueue)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "producer clients")
	fs.IntVar(&o.Workers, "workers", 4, "consumer clients")
	fs.IntVar(&o.PayloadBytes, "payload", 100, "payload bytes per job")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process (client and embedded server) to this file")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: spool bench [--mode M] [--jobs N] [--batch B] [--concurrency C] [--workers W] [--server URL] [--json]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "spool bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !*asJSON {
		o.Progress = os.Stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "spool bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "spool bench: start CPU profile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "spool bench: %v\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(res)
		return 0
	}
	bench.Print(os.Stdout, res)
	return 0
}
