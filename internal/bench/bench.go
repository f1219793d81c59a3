// Package bench is Spool's built-in load generator. It drives a server over
// its HTTP API (by default an embedded one, run as a child process on a
// temporary data folder) and reports throughput, latency percentiles, and
// the CPU and memory of the server and of the load generator itself.
//
// The client side must not be the bottleneck: it keeps connections alive,
// prebuilds request bodies, reuses buffers, batches acks the way a fast
// worker does, and reports its own CPU use so that a reader can tell.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/loadgen"
)

// Modes of a run.
const (
	// ModeEnqueue sends one job per request (POST /v1/jobs) from
	// Concurrency clients.
	ModeEnqueue = "enqueue"
	// ModeEnqueueBatch sends Batch jobs per request (POST /v1/jobs/batch)
	// from Concurrency clients.
	ModeEnqueueBatch = "enqueue-batch"
	// ModeProcess prefills Jobs jobs (untimed), then Workers workers, each
	// running Concurrency jobs at once, drain them; the drain is timed.
	ModeProcess = "process"
	// ModeLifecycle runs Producers producers and Workers workers at once:
	// enqueue → fetch → ack, timed until every job is acked.
	ModeLifecycle = "lifecycle"
	// ModeLatency enqueues single jobs at a fixed Rate (open loop) while
	// Workers drain them, and reports the enqueue → handler-start latency.
	ModeLatency = "latency"
)

// Modes lists every mode, in the order of the documentation.
var Modes = []string{ModeEnqueue, ModeEnqueueBatch, ModeProcess, ModeLifecycle, ModeLatency}

// Transports of a run's producers and workers.
const (
	// TransportHTTP sends each request as an HTTP/1.1 request over a pool
	// of keep-alive connections.
	TransportHTTP = "http"
	// TransportStream sends every request as a frame of one spool-stream/1
	// connection (docs/protocol.md, "Stream transport").
	TransportStream = "stream"
)

// Limits on the options, so that every run is bounded.
const (
	// MaxQueues is the most queues a run spreads over (the server's bound
	// on the queues of one fetch).
	MaxQueues = 100
	// MaxGroups bounds the groups a run spreads each queue's jobs over.
	MaxGroups = 1_000_000
	// MaxBatch is the most jobs per enqueue request (the server's default
	// batch bound).
	MaxBatch = loadgen.MaxBatch
	// MaxConcurrency bounds producers and the jobs each worker runs at
	// once.
	MaxConcurrency = 10_000
	// MaxWorkers bounds the worker loops.
	MaxWorkers = 1000
	// MaxJobs bounds the jobs of one run.
	MaxJobs = 100_000_000
	// MaxPayloadBytes bounds the payload of each job.
	MaxPayloadBytes = 512 << 10
	// MaxWork bounds the simulated work of each job.
	MaxWork = time.Minute
	// MaxRate bounds the enqueue rate of the latency mode, in jobs a
	// second.
	MaxRate = 1_000_000
	// MaxDuration bounds --duration.
	MaxDuration = 24 * time.Hour
	// MaxBodyBytes bounds one prebuilt batch request, Batch ×
	// PayloadBytes (the server's default request body bound).
	MaxBodyBytes = 64 << 20
	// MaxErrors is how many failed requests end a run early: past it the
	// server is evidently not coping, and the run reports what it saw.
	MaxErrors = 1000
)

// Options configure one run. Zero values take the defaults of the mode.
type Options struct {
	// Batcher sends the single-job enqueues of the enqueue mode through
	// the Go client's Batcher, which shares one request between the calls
	// made at about the same time, instead of one request per job.
	Batcher bool
	// Transport carries the producers' and workers' requests: TransportHTTP
	// or TransportStream. Defaults to TransportHTTP. The count check after
	// the run uses HTTP either way.
	Transport string
	// Mode is one of the Mode constants.
	Mode string
	// Server is the base URL of a running server. Empty starts an
	// embedded server as a child process on a temporary data folder.
	Server string
	// ServerPID is the process id of Server, whose CPU and memory are then
	// read from /proc; without it they are reported as unknown. Only with
	// Server.
	ServerPID int
	// Token is the bearer token sent with every request, for a Server
	// that requires auth (docs/protocol.md, "Auth"). Only with Server.
	Token string
	// Durability, when set, is the durability level of every job enqueued
	// (full, process or memory); empty takes the queue's (full).
	Durability string
	// DB, when set, is a PostgreSQL URL for the embedded server's store
	// (spool server --db) instead of SQLite in a temporary folder.
	DB string
	// Sync is the durability of the embedded server: full or normal.
	// Defaults to full.
	Sync string
	// Jobs is how many jobs the run moves. Defaults to 50000 (enqueue,
	// lifecycle), 500000 (enqueue-batch) or 200000 (process); the latency
	// mode runs for Duration unless Jobs is set.
	Jobs int
	// Duration, when set, bounds the enqueueing of the enqueue,
	// enqueue-batch, lifecycle and latency modes by time instead of (or as
	// well as) by Jobs; in lifecycle and latency modes the run then
	// finishes the jobs already enqueued. Defaults to 10s in latency mode
	// when Jobs is not set.
	Duration time.Duration
	// Batch is the number of jobs per enqueue request. Defaults to 100 in
	// enqueue-batch mode and 1 elsewhere; enqueue and latency modes always
	// send one. In process mode it is the prefill's batch (default 1000).
	Batch int
	// Concurrency is the number of producer clients in the enqueue modes,
	// and the number of jobs each worker runs at once in the process,
	// lifecycle and latency modes. Defaults to 10 and 100 respectively.
	Concurrency int
	// Workers is the number of worker loops, each long-polling
	// POST /v1/fetch for its free slots and acking finished jobs in
	// batches while it fetches more. Defaults to 1.
	Workers int
	// Producers is the number of producer clients in lifecycle mode
	// (default 10), and of senders in latency mode (default: enough for
	// the rate, at least 8).
	Producers int
	// Queues spreads the jobs over this many queues; workers fetch from all
	// of them. Defaults to 1.
	Queues int
	// Groups spreads the jobs of every queue over this many groups
	// ("g0", "g1", …) in turn. Defaults to none.
	Groups int
	// Limits, when set, are set on every queue of the run before the load
	// starts (PUT /v1/queues/{name}/limits). Defaults to none.
	Limits job.Limits
	// Runs makes the workers fetch runs of ordered groups (the fetch's
	// "runs"): a free group hands a worker several of its jobs in order.
	Runs bool
	// MaxGroups, when positive, bounds the groups of each queue a worker's
	// fetch takes jobs of (the fetch's "max_groups").
	MaxGroups int
	// Rate is the enqueue rate of latency mode, in jobs a second. Defaults
	// to 1000.
	Rate float64
	// Work is the simulated work of each job. Defaults to none.
	Work time.Duration
	// PayloadBytes is the size of each job's payload. Defaults to 100.
	PayloadBytes int
	// Timeout bounds the run, the embedded server's start included; a run
	// that reaches it stops and reports what it measured. Zero means no
	// bound beyond the run's own job count or duration. (Stopping the
	// embedded server afterwards has its own bound.)
	Timeout time.Duration
	// Progress, when set, receives a live progress line once a second.
	Progress io.Writer
	// Warnings receives a line before the run when the machine is busy,
	// and one after it when the machine was busy during it (MachineLoad).
	// Defaults to Progress, or os.Stderr when Progress is nil too.
	Warnings io.Writer
	// Label prefixes the progress line (the preset names its runs).
	Label string
	// ScrapeMetrics, when set, scrapes GET /metrics at this interval
	// (at least MinScrapeEvery) during the run, as Prometheus would, so
	// that the run shows what the scrapes cost the queue. Defaults to 0:
	// no scrapes.
	ScrapeMetrics time.Duration
	// WatchEvents keeps one reader on GET /v1/events with no filter
	// during the run, reading every job event, so that the run shows what
	// a dashboard following the events costs the queue. Defaults to false.
	WatchEvents bool
	// WatchDashboard loads what an open dashboard overview loads, every
	// DashboardRefresh: its live fragment and its throughput chart's
	// data.
	WatchDashboard bool
	// ServerCommand builds the command that runs the embedded server with
	// the given arguments ("server --addr A --data D --sync S --log-level
	// warn"). Defaults to DefaultServerCommand, which re-executes the
	// running binary.
	ServerCommand func(args []string) (*exec.Cmd, error)
}

// workerMode reports whether the mode runs workers.
func workerMode(mode string) bool {
	return mode == ModeProcess || mode == ModeLifecycle || mode == ModeLatency
}

// withDefaults returns o with the mode's defaults filled in, or an error
// naming the first option that is out of bounds.
func (o Options) withDefaults() (Options, error) {
	known := false
	for _, m := range Modes {
		known = known || o.Mode == m
	}
	if !known {
		return o, fmt.Errorf("unknown mode %q: want one of %s", o.Mode, strings.Join(Modes, ", "))
	}
	if o.Sync == "" {
		o.Sync = "full"
	}
	if o.Sync != "full" && o.Sync != "normal" {
		return o, fmt.Errorf("sync %q: want full or normal", o.Sync)
	}
	if o.Transport == "" {
		o.Transport = TransportHTTP
	}
	if o.Transport != TransportHTTP && o.Transport != TransportStream {
		return o, fmt.Errorf("transport %q: want %s or %s", o.Transport, TransportHTTP, TransportStream)
	}
	if o.Server != "" {
		u, err := url.Parse(o.Server)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return o, fmt.Errorf("server %q: want a URL like http://127.0.0.1:7311", o.Server)
		}
		o.Server = strings.TrimRight(o.Server, "/")
		if o.Transport == TransportStream && u.Scheme != "http" {
			return o, fmt.Errorf("server %q: the stream transport needs an http:// URL", o.Server)
		}
	} else if o.ServerPID != 0 {
		return o, errors.New("a server pid needs a server URL: the embedded server is measured anyway")
	} else if o.Token != "" {
		return o, errors.New("a token needs a server URL: the embedded server runs without auth")
	}
	if o.Duration < 0 || o.Duration > MaxDuration {
		return o, fmt.Errorf("duration %v: want 0 to %v", o.Duration, MaxDuration)
	}
	if o.Mode == ModeProcess && o.Duration > 0 {
		return o, errors.New("duration does not apply to process mode, which drains a prefilled number of jobs; use jobs")
	}
	if o.Jobs == 0 && o.Duration == 0 {
		switch o.Mode {
		case ModeEnqueueBatch:
			o.Jobs = 500_000
		case ModeProcess:
			o.Jobs = 200_000
		case ModeLatency:
			o.Duration = 10 * time.Second
		default:
			o.Jobs = 50_000
		}
	}
	switch o.Mode {
	case ModeEnqueue, ModeLatency:
		if o.Batch > 1 {
			return o, fmt.Errorf("%s mode sends one job per request; use enqueue-batch for batches", o.Mode)
		}
		o.Batch = 1
	case ModeEnqueueBatch:
		o.Batch = orDefault(o.Batch, 100)
	case ModeProcess:
		o.Batch = orDefault(o.Batch, 1000)
	default:
		o.Batch = orDefault(o.Batch, 1)
	}
	if workerMode(o.Mode) {
		o.Concurrency = orDefault(o.Concurrency, 100)
		o.Workers = orDefault(o.Workers, 1)
	} else {
		o.Concurrency = orDefault(o.Concurrency, 10)
		o.Workers = 0
	}
	switch o.Mode {
	case ModeLifecycle:
		o.Producers = orDefault(o.Producers, 10)
	case ModeLatency:
		o.Rate = orDefaultFloat(o.Rate, 1000)
		o.Producers = orDefault(o.Producers, min(max(int(o.Rate/20), 8), 512))
	default:
		o.Producers = 0
	}
	o.Queues = orDefault(o.Queues, 1)
	o.PayloadBytes = orDefault(o.PayloadBytes, 100)
	for _, c := range []struct {
		name    string
		v, l, h int
	}{
		{"jobs", o.Jobs, 0, MaxJobs},
		{"batch", o.Batch, 1, MaxBatch},
		{"concurrency", o.Concurrency, 1, MaxConcurrency},
		{"workers", o.Workers, 0, MaxWorkers},
		{"producers", o.Producers, 0, MaxConcurrency},
		{"queues", o.Queues, 1, MaxQueues},
		{"groups", o.Groups, 0, MaxGroups},
		{"payload bytes", o.PayloadBytes, 1, MaxPayloadBytes},
		{"server pid", o.ServerPID, 0, 1 << 30},
	} {
		if c.v < c.l || c.v > c.h {
			return o, fmt.Errorf("%s %d: want %d to %d", c.name, c.v, c.l, c.h)
		}
	}
	if body := o.Batch * (o.PayloadBytes + 64); body > MaxBodyBytes {
		return o, fmt.Errorf("batch %d of %d-byte payloads makes %d MiB requests: want at most %d MiB", o.Batch, o.PayloadBytes, body>>20, MaxBodyBytes>>20)
	}
	if o.Rate < 0 || o.Rate > MaxRate || (o.Mode == ModeLatency && o.Rate == 0) {
		return o, fmt.Errorf("rate %v: want more than 0 and at most %d jobs a second", o.Rate, MaxRate)
	}
	if o.Work < 0 || o.Work > MaxWork {
		return o, fmt.Errorf("work %v: want 0 to %v", o.Work, MaxWork)
	}
	if o.Work > 0 && !workerMode(o.Mode) {
		return o, fmt.Errorf("work applies to the modes with workers, not %s", o.Mode)
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("timeout %v: want 0 (none) or more", o.Timeout)
	}
	if o.ScrapeMetrics < 0 || (o.ScrapeMetrics > 0 && o.ScrapeMetrics < MinScrapeEvery) || o.ScrapeMetrics > MaxDuration {
		return o, fmt.Errorf("scrape-metrics %v: want 0 (none) or %v to %v", o.ScrapeMetrics, MinScrapeEvery, MaxDuration)
	}
	if err := o.Limits.Check(); err != nil {
		return o, fmt.Errorf("limits: %w", err)
	}
	if o.ServerCommand == nil {
		o.ServerCommand = DefaultServerCommand
	}
	return o, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func orDefaultFloat(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// Run runs one benchmark and returns what it measured. A run stopped
// early by ctx, by Options.Timeout or by too many errors still returns its
// Result, with Interrupted saying why; errors are returned only when the
// run could not start (bad options, a server that does not come up).
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	before := sampleBefore(ctx)
	o.warn(before)
	t, err := openTarget(ctx, o)
	if err != nil {
		return nil, err
	}
	res := newRunner(o, t).run(ctx)
	if err := t.close(res); err != nil {
		res.addError(err.Error())
	}
	res.MachineBefore = before
	o.warn(res.MachineDuring)
	return res, nil
}

// warn writes m's warning, if the machine was busy, to o.Warnings.
func (o Options) warn(m *MachineLoad) {
	msg := m.warning()
	if msg == "" {
		return
	}
	w := o.Warnings
	if w == nil {
		w = o.Progress
	}
	if w == nil {
		w = os.Stderr
	}
	label := ""
	if o.Label != "" {
		label = " " + o.Label
	}
	fmt.Fprintf(w, "spool bench%s: %s\n", label, msg)
}
