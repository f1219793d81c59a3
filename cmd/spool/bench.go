package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/spoolq/spool/client"
	"github.com/spoolq/spool/internal/bench"
	"github.com/spoolq/spool/internal/job"
)

const benchLong = `Measure a server's throughput and latency.

Modes:
  enqueue        single-job requests from --concurrency clients
  enqueue-batch  --batch jobs per request from --concurrency clients
  process        prefill --jobs jobs, then --workers × --concurrency drain them
  lifecycle      --producers enqueue while --workers × --concurrency fetch and ack
  latency        single jobs at a fixed --rate (open loop); reports enqueue → start latency

By default an embedded server runs as a child process on a temporary data
folder, with the default settings (SPOOL_* variables are not passed to it);
--server URL targets a running one (add --server-pid PID to measure its CPU
and memory). Ctrl-C stops the run and prints what was measured.`

const benchExample = `  spool bench --mode enqueue --concurrency 50 --jobs 100000
  spool bench --mode process --jobs 100000 --workers 4 --concurrency 500
  spool bench --mode latency --rate 1000 --duration 10s
  spool bench --preset seeds --quiet
  spool bench --server http://10.0.0.5:7311 --server-pid 4242 --mode lifecycle`

// benchCommand is `spool bench`: a load generator against an embedded
// server on a temporary data folder, or against --server. It exits 0 for
// a clean run, 1 for a run with errors or stopped early, 2 for bad flags.
func (c *cli) benchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bench [--mode M] [flags] | bench --preset seeds [--sync S] [--json]",
		Short:   "Measure a server's throughput and latency",
		Long:    benchLong,
		Example: benchExample,
		Args:    noArgs,
	}
	fs := cmd.Flags()
	var o bench.Options
	fs.StringVar(&o.Mode, "mode", bench.ModeLifecycle, "one of "+strings.Join(bench.Modes, ", "))
	fs.StringVar(&o.Server, "server", "", "base URL of a running server (default: an embedded one on a temporary folder)")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "process id of --server, to report its CPU and memory from /proc")
	fs.StringVar(&o.Token, "auth-token", "", "bearer token when --server requires one (env SPOOL_TOKEN)")
	fs.StringVar(&o.Durability, "durability", "", "durability level of every job: full, process or memory (default: the queue's, full)")
	fs.StringVar(&o.DB, "db", "", "PostgreSQL URL for the embedded server's store (default: SQLite in a temporary folder)")
	fs.StringVar(&o.Sync, "sync", "full", "durability of the embedded server: full or normal")
	fs.IntVar(&o.Jobs, "jobs", 0, "jobs to move (default 50000; 500000 in enqueue-batch, 200000 in process)")
	fs.DurationVar(&o.Duration, "duration", 0, "enqueue for this long instead of --jobs (enqueue, enqueue-batch, lifecycle, latency; latency defaults to 10s)")
	fs.StringVar(&o.Transport, "transport", bench.TransportHTTP, "how producers and workers reach the server: http (a request each) or stream (frames multiplexed over one spool-stream/1 connection)")
	fs.BoolVar(&o.Batcher, "batcher", false, "enqueue mode: send the single-job calls through the Go client's Batcher, which shares requests between concurrent calls")
	fs.IntVar(&o.Batch, "batch", 0, "jobs per enqueue request (default 100 in enqueue-batch, 1 elsewhere; process: prefill batch, default 1000)")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "enqueue modes: producer clients (default 10); worker modes: jobs each worker runs at once (default 100)")
	fs.IntVar(&o.Workers, "workers", 0, "worker loops in process, lifecycle and latency modes (default 1)")
	fs.IntVar(&o.Producers, "producers", 0, "producer clients in lifecycle mode (default 10), senders in latency mode (default: enough for the rate)")
	fs.IntVar(&o.Queues, "queues", 0, "spread the jobs over this many queues (default 1, at most 100)")
	fs.IntVar(&o.Queues, "partitions", 0, "the old name of --queues: a number of queues, not of groups")
	fs.IntVar(&o.Groups, "groups", 0, "spread each queue's jobs over this many groups, in turn (default none)")
	fs.IntVar(&o.Limits.MaxActive, "max-active", 0, "set this cap on the jobs of each queue active at once")
	fs.IntVar(&o.Limits.GroupMaxActive, "group-max-active", 0, "set this cap on the jobs of each group active at once")
	fs.BoolVar(&o.Limits.Ordered, "ordered", false, "make each queue ordered: every group's jobs run one at a time, in order (with --groups)")
	fs.BoolVar(&o.Runs, "runs", false, "workers fetch runs of ordered groups: a free group hands a worker several of its jobs in order (with --ordered)")
	fs.IntVar(&o.MaxGroups, "max-groups", 0, "workers fetch the jobs of at most this many groups of each queue at once, e.g. 1 for one partition's run (default any)")
	var limitRate, groupRate client.Rate
	fs.Var(&rateFlag{r: &limitRate}, "limit-rate", "set this rate on each queue's job starts: N/DURATION, e.g. 500/1s")
	fs.Var(&rateFlag{r: &groupRate}, "group-rate", "set this rate on each group's job starts: N/DURATION, e.g. 5/1s")
	fs.Float64Var(&o.Rate, "rate", 0, "latency mode: jobs enqueued a second (default 1000)")
	fs.DurationVar(&o.Work, "work", 0, "simulated work of each job, e.g. 10ms (reports efficiency against workers × concurrency / work)")
	fs.IntVar(&o.PayloadBytes, "payload", 0, "payload bytes per job (default 100)")
	fs.DurationVar(&o.ScrapeMetrics, "scrape-metrics", 0, "scrape GET /metrics at this interval during the run, e.g. 1s, to measure what scraping costs (default: never)")
	fs.BoolVar(&o.WatchDashboard, "watch-dashboard", false, "reload what an open dashboard overview reloads (its live part and chart data) every 2 s during the run, to measure what an open dashboard costs")
	fs.BoolVar(&o.WatchEvents, "watch-events", false, "keep a reader on GET /v1/events with no filter during the run, to measure what following every event costs")
	timeout := fs.Duration("timeout", 10*time.Minute, "stop the whole command after this long and report what was measured (0: no limit)")
	preset := fs.String("preset", "", `run a set of configurations: "seeds" runs those of the published benchmarks of Jobbie, BullMQ and Queen, and an ordered queue against an unordered one`)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	quiet := fs.Bool("quiet", false, "no live progress line")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the load generator (not the server) to this file")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return exitCode(c.bench(o, benchRun{fs: fs, limitRate: limitRate, groupRate: groupRate, timeout: *timeout,
			preset: *preset, asJSON: *asJSON, quiet: *quiet, cpuProfile: *cpuProfile}))
	}
	return cmd
}

// benchRun holds the flags of `spool bench` that are not bench.Options.
type benchRun struct {
	fs                   *pflag.FlagSet
	limitRate, groupRate client.Rate
	timeout              time.Duration
	preset               string
	asJSON, quiet        bool
	cpuProfile           string
}

// bench runs `spool bench` with o and returns the exit code.
func (c *cli) bench(o bench.Options, r benchRun) int {
	stdout, stderr := c.out, c.errOut
	o.Limits.Rate = job.Rate{Limit: r.limitRate.Limit, Period: r.limitRate.Period}
	o.Limits.GroupRate = job.Rate{Limit: r.groupRate.Limit, Period: r.groupRate.Period}
	if r.timeout < 0 {
		fmt.Fprintln(stderr, "spool bench: --timeout must not be negative")
		return 2
	}
	if o.Token == "" && o.Server != "" {
		o.Token = c.getenv("SPOOL_TOKEN")
	}
	if !r.quiet {
		o.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	if r.cpuProfile != "" {
		f, err := os.Create(r.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "spool bench: %v\n", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "spool bench: start CPU profile: %v\n", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if r.preset != "" {
		return benchPreset(ctx, r.preset, o, r.fs, r.asJSON, stdout, stderr)
	}
	res, err := bench.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "spool bench: %v\n", err)
		return 1
	}
	if r.asJSON {
		writeJSON(stdout, res)
	} else {
		bench.Print(stdout, res)
	}
	if res.Errors > 0 || res.Interrupted != "" {
		return 1
	}
	return 0
}

// benchPreset runs a preset. Only the flags that apply to every
// configuration may be combined with it.
func benchPreset(ctx context.Context, name string, o bench.Options, fs *pflag.FlagSet, asJSON bool, stdout, stderr io.Writer) int {
	allowed := map[string]bool{"preset": true, "server": true, "server-pid": true, "auth-token": true, "sync": true, "timeout": true,
		"json": true, "quiet": true, "cpuprofile": true, "payload": true}
	var bad []string
	fs.Visit(func(f *pflag.Flag) {
		if !allowed[f.Name] {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "spool bench: %s cannot be combined with --preset, which sets them per configuration\n", strings.Join(bad, ", "))
		return 2
	}
	if !asJSON {
		bench.PrintPresetPlan(stdout, name, o)
	}
	res, err := bench.RunPreset(ctx, name, o)
	if err != nil {
		fmt.Fprintf(stderr, "spool bench: %v\n", err)
		return 1
	}
	if asJSON {
		writeJSON(stdout, res)
	} else {
		bench.PrintPreset(stdout, res)
	}
	if res.Errors() > 0 || res.Interrupted != "" {
		return 1
	}
	return 0
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
