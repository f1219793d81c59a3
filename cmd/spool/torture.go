//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spoolq/spool/internal/torture"
)

const tortureUsage = `usage: spool torture <scenario> [flags]

Runs Spool servers (this binary, or --bin) as child processes on temporary
data folders, injects faults, checks the outcome and prints one JSON summary
per run. The exit status is 1 when a run missed a pass mark. See
docs/reliability.md.

Scenarios:
  crash         kill -9 the server in a loop under mixed load
  graceful      SIGTERM restarts under load
  worker-fault  kill -9 a worker mid-job; SIGSTOP a worker past its lease
  poison        a job that crashes its worker on every attempt
  disk-full     the data folder on a small tmpfs that fills up (root only)
  read-only     the data folder's ext4 file system goes read-only (root only)
  backlog       memory, restart time and fetch rate with a deep backlog
  all           every scenario above, in that order

Flags:
`

// runTorture is `spool torture`.
func runTorture(args []string) int {
	return tortureMain(args, os.Stdin, os.Stdout, os.Stderr)
}

func tortureMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "worker" {
		return torture.RunWorker(args[1:], stdin, stdout, stderr)
	}
	o, names, code, ok := parseTorture(args, stderr)
	if !ok {
		return code
	}
	scratch := o.dir
	if scratch == "" {
		d, err := os.MkdirTemp("", "spool-torture-")
		if err != nil {
			fmt.Fprintf(stderr, "spool torture: %v\n", err)
			return 1
		}
		defer os.RemoveAll(d)
		scratch = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, n := range names {
		sub, err := os.MkdirTemp(scratch, n+"-")
		if err != nil {
			fmt.Fprintf(stderr, "spool torture: %v\n", err)
			return 1
		}
		res, err := o.run(ctx, n, sub)
		if err != nil {
			fmt.Fprintf(stderr, "spool torture %s: %v\n", n, err)
			code = 2
			continue
		}
		if err := torture.PrintJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "spool torture: %v\n", err)
			return 1
		}
		if len(res.Failures()) > 0 {
			code = max(code, 1)
		}
	}
	return code
}

// parseTorture parses `spool torture <scenario> [flags]` into options and
// the scenarios to run. When ok is false the command ends with code.
func parseTorture(args []string, stderr io.Writer) (o tortureOptions, names []string, code int, ok bool) {
	fs := flag.NewFlagSet("spool torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), tortureUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.bin, "bin", "", "spool binary to run as server and worker (default: this one)")
	fs.StringVar(&o.dir, "dir", "", "scratch folder, kept afterwards with each run's data and history (default: a temporary folder, removed)")
	fs.BoolVar(&o.long, "long", false, "run the long (soak) forms")
	fs.IntVar(&o.cycles, "cycles", 0, "kills or restarts (crash, graceful; default 50 and 5, long 500 and 50)")
	fs.StringVar(&o.sync, "sync", "full", "the server's --sync for crash")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of kill times and load choices (default: the clock)")
	fs.IntVar(&o.jobs, "jobs", 0, "backlog size (default 1000000, long 10000000)")
	fs.IntVar(&o.drain, "drain", 0, "jobs fetched and acked from each server over the backlog's fetch-rate rounds, on 100000 jobs and on the backlog (default 10000, long 50000)")
	fs.IntVar(&o.rounds, "rounds", 0, "backlog fetch-rate rounds on each server, alternating; the ratio compares the median rounds (default 5)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	switch {
	case len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help"):
		fs.Usage()
		return o, nil, 0, false
	case len(args) == 0 || strings.HasPrefix(args[0], "-"):
		fs.Usage()
		return o, nil, 2, false
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, nil, 0, false
		}
		return o, nil, 2, false
	}
	if o.bin == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "spool torture: find this binary: %v\n", err)
			return o, nil, 1, false
		}
		o.bin = exe
	}
	if !*quiet {
		o.log = stderr
	}
	names = []string{args[0]}
	if args[0] == "all" {
		names = []string{"crash", "graceful", "worker-fault", "poison", "disk-full", "read-only", "backlog"}
	}
	return o, names, 0, true
}

// tortureOptions are the flags shared by the scenarios.
type tortureOptions struct {
	bin    string
	dir    string
	long   bool
	cycles int
	sync   string
	seed   uint64
	jobs   int
	drain  int
	rounds int
	log    io.Writer
}

// pick returns set when not zero, else long or quick by o.long.
func (o tortureOptions) pick(set, quick, long int) int {
	switch {
	case set > 0:
		return set
	case o.long:
		return long
	}
	return quick
}

func (o tortureOptions) run(ctx context.Context, name, dir string) (torture.Result, error) {
	switch name {
	case "crash":
		return result(torture.RunCrash(ctx, torture.CrashConfig{
			Bin: o.bin, Dir: dir, Cycles: o.pick(o.cycles, 50, 500), Sync: o.sync, Seed: o.seed, Log: o.log,
		}))
	case "graceful":
		return result(torture.RunGraceful(ctx, torture.GracefulConfig{
			Bin: o.bin, Dir: dir, Cycles: o.pick(o.cycles, 5, 50), Seed: o.seed, Log: o.log,
		}))
	case "worker-fault":
		return result(torture.RunWorkerFault(ctx, torture.WorkerFaultConfig{Bin: o.bin, Dir: dir, Log: o.log}))
	case "poison":
		return result(torture.RunPoison(ctx, torture.PoisonConfig{Bin: o.bin, Dir: dir, MaxAttempts: o.pick(0, 3, 10), Log: o.log}))
	case "disk-full":
		return result(torture.RunDiskFull(ctx, torture.DiskFullConfig{Bin: o.bin, Dir: dir, Log: o.log}))
	case "read-only":
		return result(torture.RunReadOnly(ctx, torture.ReadOnlyConfig{Bin: o.bin, Dir: dir, Log: o.log}))
	case "backlog":
		return result(torture.RunBacklog(ctx, torture.BacklogConfig{
			Bin: o.bin, Dir: dir, Jobs: o.pick(o.jobs, 1_000_000, 10_000_000), DrainJobs: o.pick(o.drain, 10_000, 50_000),
			FetchRounds: o.rounds, Log: o.log,
		}))
	}
	return nil, fmt.Errorf("unknown scenario %q (want crash, graceful, worker-fault, poison, disk-full, read-only, backlog or all)", name)
}

// result turns a scenario's typed result into a Result, keeping a nil one
// nil.
func result[T torture.Result](r T, err error) (torture.Result, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
