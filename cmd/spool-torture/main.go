//go:build linux

// Command spool-torture runs Spool's fault and soak scenarios: kill -9
// loops, graceful restarts, killed and stopped workers, a poison job, a
// full and a read-only disk, and a deep backlog. It runs the product
// binary, spool, as the server under test, and itself as the worker
// processes; see docs/reliability.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spoolq/spool/internal/torture"
)

const usage = `usage: spool-torture <scenario> [flags]

Runs Spool servers (the spool binary: --bin, else the one next to this
binary, else one built from this module with go build) as child processes
on temporary data folders, injects faults, checks the outcome and prints
one JSON summary per run. The exit status is 1 when a run missed a pass
mark. See docs/reliability.md.

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

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs spool-torture with args and returns the exit status: 0 when
// every run passed, 1 when one missed a pass mark (or the command could
// not set up), 2 for bad flags or a scenario that could not run.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "worker" {
		return torture.RunWorker(args[1:], stdin, stdout, stderr)
	}
	o, names, code, ok := parseArgs(args, stderr)
	if !ok {
		return code
	}
	scratch := o.dir
	if scratch == "" {
		d, err := os.MkdirTemp("", "spool-torture-")
		if err != nil {
			fmt.Fprintf(stderr, "spool-torture: %v\n", err)
			return 1
		}
		defer os.RemoveAll(d)
		scratch = d
	}
	if o.bin == "" {
		bin, err := findSpool(o.self, scratch, o.log)
		if err != nil {
			fmt.Fprintf(stderr, "spool-torture: %v\n", err)
			return 1
		}
		o.bin = bin
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, n := range names {
		sub, err := os.MkdirTemp(scratch, n+"-")
		if err != nil {
			fmt.Fprintf(stderr, "spool-torture: %v\n", err)
			return 1
		}
		res, err := o.run(ctx, n, sub)
		if err != nil {
			fmt.Fprintf(stderr, "spool-torture %s: %v\n", n, err)
			code = 2
			continue
		}
		if err := torture.PrintJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "spool-torture: %v\n", err)
			return 1
		}
		if len(res.Failures()) > 0 {
			code = max(code, 1)
		}
	}
	return code
}

// parseArgs parses `spool-torture <scenario> [flags]` into options and
// the scenarios to run. When ok is false the command ends with code.
func parseArgs(args []string, stderr io.Writer) (o options, names []string, code int, ok bool) {
	fs := flag.NewFlagSet("spool-torture", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.bin, "bin", "", "spool binary to run as the server (default: spool next to this binary, else built from this module with go build)")
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
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "spool-torture: find this binary: %v\n", err)
		return o, nil, 1, false
	}
	o.self = exe
	if !*quiet {
		o.log = stderr
	}
	switch {
	case args[0] == "all":
		names = scenarios
	case slices.Contains(scenarios, args[0]):
		names = []string{args[0]}
	default:
		fmt.Fprintf(stderr, "spool-torture: unknown scenario %q (want %s or all)\n", args[0], strings.Join(scenarios, ", "))
		return o, nil, 2, false
	}
	return o, names, 0, true
}

// scenarios are the scenarios that `all` runs, in order.
var scenarios = []string{"crash", "graceful", "worker-fault", "poison", "disk-full", "read-only", "backlog"}

// options are the flags shared by the scenarios.
type options struct {
	bin    string // the spool binary, the server under test
	self   string // this binary, which runs the worker processes
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
func (o options) pick(set, quick, long int) int {
	switch {
	case set > 0:
		return set
	case o.long:
		return long
	}
	return quick
}

func (o options) run(ctx context.Context, name, dir string) (torture.Result, error) {
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
		return result(torture.RunWorkerFault(ctx, torture.WorkerFaultConfig{Bin: o.bin, WorkerBin: o.self, Dir: dir, Log: o.log}))
	case "poison":
		return result(torture.RunPoison(ctx, torture.PoisonConfig{
			Bin: o.bin, WorkerBin: o.self, Dir: dir, MaxAttempts: o.pick(0, 3, 10), Log: o.log,
		}))
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
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// result turns a scenario's typed result into a Result, keeping a nil one
// nil.
func result[T torture.Result](r T, err error) (torture.Result, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}
