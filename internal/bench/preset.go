package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spoolq/spool/internal/job"
)

// PresetSeeds is the preset that runs the configurations of the published
// benchmarks of Jobbie, BullMQ and Queen, and Spool's own comparison of an
// ordered queue with an unordered one.
const PresetSeeds = "seeds"

// presetCase is one configuration of a preset and the published figure it
// is compared with. metric picks Spool's figure: "jobs" (the run's jobs a
// second), "enqueue" (its enqueue rate) or "process" (its processing rate,
// in a run that enqueues at the same time).
type presetCase struct {
	name   string
	opts   Options
	ref    *Reference
	metric string
	// shared names an earlier case whose run this one reports a second
	// figure of, instead of running again.
	shared string
	// over names an earlier case: the printout then gives this case's
	// figure as a percentage of that one's, on a line labelled ratio
	// under the table.
	over  string
	ratio string
}

// The shape of Queen's C++-benchmark configurations.
const (
	// queenThreads is the threads of the tool's documented runs, which
	// Spool runs as producers (enqueue-batch clients) or workers.
	queenThreads = 10
	// queenPartitions is the partitions of the tool's single-queue mode.
	queenPartitions = 4
	// queenPayloadBytes is the payload of those configurations, for the
	// tool's message: its MB/s count 300 bytes for each pushed message in
	// MiB (24.57 at 85,862 msg/s), which is 286 bytes in the megabytes of
	// 10^6 bytes that Spool's MB/s are counted in.
	queenPayloadBytes = 290
)

// queenCPPCase is test (T1 to T5) of Queen's C++ benchmark as Spool runs
// it: the producer as queenThreads clients enqueueing batches of batch,
// the consumer as a prefilled backlog drained by queenThreads workers,
// each fetching a run of one partition of up to batch at a time, as the
// tool's consumer leases one partition a pop; both spread over
// queenPartitions groups, ordered for the consumer (Queen's partitions),
// with payloads of queenPayloadBytes. published is the test's message
// count and jobs Spool's, larger where the published count would be timed
// in a fraction of a second.
func queenCPPCase(test string, consumer bool, batch, published, jobs int, figure, mbps float64) presetCase {
	role := "producer"
	o := Options{Mode: ModeEnqueueBatch, Concurrency: queenThreads, Batch: batch}
	groups := "groups"
	if consumer {
		role, groups = "consumer", "ordered partitions, a run of one a fetch"
		o = Options{Mode: ModeProcess, Workers: queenThreads, Concurrency: batch, Limits: job.Limits{Ordered: true}, Runs: true, MaxGroups: 1}
	}
	o.Jobs, o.Groups, o.PayloadBytes = jobs, queenPartitions, queenPayloadBytes
	setup := fmt.Sprintf("%s %s: %d threads × batch %s, %s messages (Spool: ", test, role, queenThreads, thousands(float64(batch)), thousands(float64(published)))
	if jobs != published {
		setup += thousands(float64(jobs)) + " jobs for a run of a second or more, "
	}
	setup += fmt.Sprintf("%d %s)", queenPartitions, groups)
	return presetCase{
		name:   fmt.Sprintf("Queen %s %s, batch %d", test, role, batch),
		opts:   o,
		ref:    refMB(srcQueenCPP, figure, mbps, setup),
		metric: "jobs",
	}
}

// seedCases are the configurations of the seeds preset. The job counts are
// Spool's own, chosen so that each run lasts a few seconds and the whole
// preset about two minutes on a 2-core machine; each reference states the
// size of the published run.
func seedCases() []presetCase {
	enq := func(c, jobs int) Options { return Options{Mode: ModeEnqueue, Concurrency: c, Jobs: jobs} }
	batch := func(c, b, jobs int) Options {
		return Options{Mode: ModeEnqueueBatch, Concurrency: c, Batch: b, Jobs: jobs}
	}
	life := func(p, b, w, c, jobs int) Options {
		return Options{Mode: ModeLifecycle, Producers: p, Batch: b, Workers: w, Concurrency: c, Jobs: jobs}
	}
	proc := func(w, c, jobs int) Options {
		return Options{Mode: ModeProcess, Workers: w, Concurrency: c, Jobs: jobs}
	}
	partitions := func(ordered bool) Options {
		o := proc(4, 500, 100_000)
		o.Groups, o.Limits = 1000, job.Limits{Ordered: ordered}
		return o
	}
	// fewPartitions is the shape of Queen's tool: queenThreads workers each
	// fetching up to 1,000 jobs of one queue spread over queenPartitions
	// groups, ordered (Queen's partitions, taken in runs) or not; jobs as
	// many as make a run of a second or more.
	fewPartitions := func(ordered bool, jobs int) Options {
		o := proc(queenThreads, 1000, jobs)
		o.Groups, o.Limits, o.Runs = queenPartitions, job.Limits{Ordered: ordered}, ordered
		return o
	}
	j, b, qb := srcJobbie, srcBullMQ, srcQueenBP
	const ownSetup = "Spool's own: ordered vs unordered, same settings otherwise"
	const fewSetup = "Spool's own: Queen's tool's shape, 10 workers fetching up to 1,000 of 4 partitions, ordered (in runs) vs unordered"
	return []presetCase{
		{name: "Jobbie enqueue c=1", opts: enq(1, 15_000), ref: ref(j, 2532, "enqueue, 1 client"), metric: "jobs"},
		{name: "Jobbie enqueue c=10", opts: enq(10, 50_000), ref: ref(j, 7928, "enqueue, 10 clients"), metric: "jobs"},
		{name: "Jobbie enqueue c=50", opts: enq(50, 60_000), ref: ref(j, 11344, "enqueue, 50 clients"), metric: "jobs"},
		{name: "Jobbie lifecycle c=1", opts: life(1, 1, 1, 1, 5_000), ref: ref(j, 636, "enqueue + fetch + ack, 1 client"), metric: "jobs"},
		{name: "Jobbie lifecycle c=10", opts: life(10, 1, 10, 1, 20_000), ref: ref(j, 1879, "enqueue + fetch + ack, 10 clients"), metric: "jobs"},
		{name: "Jobbie lifecycle c=50", opts: life(50, 1, 50, 1, 30_000), ref: ref(j, 2232, "enqueue + fetch + ack, 50 clients"), metric: "jobs"},
		{name: "BullMQ 1 worker × 100", opts: proc(1, 100, 100_000), ref: ref(b, 2427, "1 worker, concurrency 100, 500 jobs"), metric: "jobs"},
		{name: "BullMQ 1 worker × 200", opts: proc(1, 200, 100_000), ref: ref(b, 2801, "1 worker, concurrency 200, 1,000 jobs"), metric: "jobs"},
		{name: "BullMQ 1 worker × 500", opts: proc(1, 500, 100_000), ref: ref(b, 4901, "1 worker, concurrency 500, 2,500 jobs"), metric: "jobs"},
		{name: "BullMQ 1 × 500 (multi-worker table)", ref: ref(b, 4111, "1 worker × 500, 2,500 jobs (second table)"), metric: "jobs", shared: "BullMQ 1 worker × 500"},
		{name: "BullMQ 5 workers × 500", opts: proc(5, 500, 200_000), ref: ref(b, 12363, "5 workers × 500, 12,500 jobs"), metric: "jobs"},
		{name: "BullMQ 10 workers × 500", opts: proc(10, 500, 200_000), ref: ref(b, 16501, "10 workers × 500, 25,000 jobs"), metric: "jobs"},
		{name: "BullMQ realistic 1 × 500, 10ms work", opts: Options{Mode: ModeProcess, Workers: 1, Concurrency: 500, Work: 10 * time.Millisecond, Jobs: 100_000},
			ref: ref(b, 0, "1 worker × 500, 10 ms jobs, 5,000 jobs: script published, no result"), metric: "jobs"},
		{name: "BullMQ add_bulk 100,000", opts: batch(8, 100, 100_000), ref: ref(b, 58000, "add_bulk of 100,000, chunks of 100 over 8 connections"), metric: "jobs"},
		{name: "Queen push, batch 1", opts: life(50, 1, 50, 100, 40_000), ref: ref(qb, 5796, "bp-1, 1,001 partitions: push at batch 1"), metric: "enqueue"},
		{name: "Queen pop, push batch 1", ref: ref(qb, 4768, "bp-1: pop during that push"), metric: "process", shared: "Queen push, batch 1"},
		{name: "Queen push, batch 10", opts: life(50, 10, 50, 100, 120_000), ref: ref(qb, 39060, "bp-10, 1,001 partitions: push at batch 10"), metric: "enqueue"},
		{name: "Queen pop, push batch 10", ref: ref(qb, 38351, "bp-10: pop during that push"), metric: "process", shared: "Queen push, batch 10"},
		{name: "Queen push, batch 100", opts: life(50, 100, 50, 100, 200_000), ref: ref(qb, 104400, "bp-100, 1,001 partitions: push at batch 100"), metric: "enqueue"},
		{name: "Queen pop, push batch 100", ref: ref(qb, 101675, "bp-100: pop during that push"), metric: "process", shared: "Queen push, batch 100"},
		queenCPPCase("T1", false, 1, 10_000, 10_000, 785, 0.22),
		queenCPPCase("T1", true, 1, 10_000, 10_000, 456, 0.23),
		queenCPPCase("T2", false, 10, 10_000, 100_000, 7677, 2.20),
		queenCPPCase("T2", true, 10, 10_000, 50_000, 4989, 2.53),
		queenCPPCase("T3", false, 100, 10_000, 200_000, 39065, 11.18),
		queenCPPCase("T3", true, 100, 10_000, 100_000, 30079, 15.26),
		queenCPPCase("T4", false, 1000, 10_000, 200_000, 85862, 24.57),
		queenCPPCase("T4", true, 1000, 10_000, 100_000, 488650, 247.87),
		queenCPPCase("T5", false, 1000, 100_000, 500_000, 90601, 25.92),
		queenCPPCase("T5", true, 1000, 100_000, 200_000, 84530, 42.96),
		{name: "unordered, 1,000 groups", opts: partitions(false), ref: ref(srcSpool, 0, ownSetup), metric: "jobs"},
		{name: "ordered, 1,000 partitions", opts: partitions(true), ref: ref(srcSpool, 0, ownSetup), metric: "jobs",
			over: "unordered, 1,000 groups", ratio: "ordered / unordered, 1,000 partitions"},
		{name: "unordered, 4 groups, fetch 1,000", opts: fewPartitions(false, 100_000), ref: ref(srcSpool, 0, fewSetup), metric: "jobs"},
		{name: "ordered runs, 4 partitions, fetch 1,000", opts: fewPartitions(true, 100_000), ref: ref(srcSpool, 0, fewSetup), metric: "jobs",
			over: "unordered, 4 groups, fetch 1,000", ratio: "ordered in runs / unordered, 4 partitions"},
	}
}

// PresetResult is what a preset measured.
type PresetResult struct {
	Preset  string      `json:"preset"`
	Server  string      `json:"server"`
	Sync    string      `json:"sync,omitempty"`
	CPUs    int         `json:"cpus"`
	Seconds float64     `json:"seconds"`
	Runs    []PresetRun `json:"runs"`
	// Ratios compare configurations of the preset with one another.
	Ratios []PresetRatio `json:"ratios,omitempty"`
	// Interrupted says why the preset stopped before its last
	// configuration, if it did.
	Interrupted string `json:"interrupted,omitempty"`
}

// PresetRun is one configuration of a preset: Spool's figure for it, the
// run it comes from, and the published figure it is compared with.
type PresetRun struct {
	Name   string   `json:"name"`
	Metric string   `json:"metric"`
	Spool  *float64 `json:"spool_jobs_per_sec"`
	// MBps is Spool's figure in payload megabytes (10^6 bytes) a
	// second: Spool times the run's payload bytes, the JSON and HTTP
	// around the payloads not counted.
	MBps      *float64   `json:"spool_mb_per_sec"`
	Reference *Reference `json:"reference"`
	Result    *Result    `json:"result,omitempty"`
	// SameRunAs names the configuration whose run this figure comes
	// from, when one run gives two figures.
	SameRunAs string `json:"same_run_as,omitempty"`
	// Error is why the configuration could not run.
	Error string `json:"error,omitempty"`
}

// PresetRatio is Spool's figure for one configuration of a preset as a
// fraction of its figure for another.
type PresetRatio struct {
	// Label says what is compared.
	Label string `json:"label"`
	// Of and Over name the configurations: Ratio is Of's figure over
	// Over's, nil when either has none.
	Of    string   `json:"of"`
	Over  string   `json:"over"`
	Ratio *float64 `json:"ratio"`
}

// Errors is the total number of errors of the preset's runs, failed starts
// included.
func (p *PresetResult) Errors() int64 {
	var n int64
	for _, r := range p.Runs {
		if r.Error != "" {
			n++
		}
		if r.Result != nil && r.SameRunAs == "" {
			n += r.Result.Errors
		}
	}
	return n
}

func presetCases(name string) ([]presetCase, error) {
	if name != PresetSeeds {
		return nil, fmt.Errorf("unknown preset %q: want %s", name, PresetSeeds)
	}
	return seedCases(), nil
}

// RunPreset runs every configuration of the named preset in turn, each on
// a fresh embedded server (or against base.Server), with base's server,
// pid, token, sync, progress and server command, and base's payload when
// it sets one (otherwise each configuration's own). It stops early when
// ctx ends, keeping what it measured.
func RunPreset(ctx context.Context, name string, base Options) (*PresetResult, error) {
	cases, err := presetCases(name)
	if err != nil {
		return nil, err
	}
	return runPreset(ctx, name, cases, base), nil
}

func runPreset(ctx context.Context, name string, cases []presetCase, base Options) *PresetResult {
	start := time.Now()
	out := &PresetResult{Preset: name, Server: "embedded", CPUs: runtime.NumCPU()}
	if base.Server != "" {
		out.Server = base.Server
	} else {
		out.Sync = orDefaultString(base.Sync, "full")
	}
	byName := map[string]*Result{}
	for i, c := range cases {
		if ctx.Err() != nil {
			out.Interrupted = "interrupted before " + c.name
			break
		}
		run := PresetRun{Name: c.name, Metric: c.metric, Reference: c.ref, SameRunAs: c.shared}
		var res *Result
		if c.shared != "" {
			res = byName[c.shared]
		} else {
			o := c.opts
			o.Server, o.ServerPID, o.Token, o.Sync, o.ServerCommand = base.Server, base.ServerPID, base.Token, base.Sync, base.ServerCommand
			o.Progress, o.Warnings = base.Progress, base.Warnings
			if base.PayloadBytes != 0 {
				o.PayloadBytes = base.PayloadBytes
			}
			o.Label = fmt.Sprintf("[%d/%d %s]", i+1, len(cases), c.name)
			var err error
			res, err = Run(ctx, o)
			if err != nil {
				if ctx.Err() != nil {
					out.Interrupted = "interrupted before " + c.name
					break
				}
				run.Error = err.Error()
			} else {
				res.Name = c.name
				byName[c.name] = res
			}
		}
		if res != nil {
			run.Spool = presetFigure(res, c.metric)
			run.MBps = ptr(mbPerSec(*run.Spool, res.Settings.PayloadBytes))
			if c.shared == "" {
				run.Result = res
			}
		}
		out.Runs = append(out.Runs, run)
		if ctx.Err() != nil {
			out.Interrupted = "interrupted during " + c.name
			break
		}
	}
	out.Ratios = presetRatios(cases, out.Runs)
	out.Seconds = time.Since(start).Seconds()
	return out
}

// presetRatios are the ratios the cases ask for, of the runs that were
// made; a ratio whose runs failed has a nil Ratio.
func presetRatios(cases []presetCase, runs []PresetRun) []PresetRatio {
	byName := map[string]*PresetRun{}
	for i := range runs {
		byName[runs[i].Name] = &runs[i]
	}
	var out []PresetRatio
	for _, c := range cases {
		of, over := byName[c.name], byName[c.over]
		if c.over == "" || of == nil || over == nil {
			continue
		}
		r := PresetRatio{Label: c.ratio, Of: c.name, Over: c.over}
		if of.Spool != nil && over.Spool != nil && *over.Spool > 0 {
			r.Ratio = ptr(*of.Spool / *over.Spool)
		}
		out = append(out, r)
	}
	return out
}

// mbPerSec is jobsPerSec jobs of payloadBytes each, in megabytes (10^6
// bytes) a second.
func mbPerSec(jobsPerSec float64, payloadBytes int) float64 {
	return jobsPerSec * float64(payloadBytes) / 1e6
}

func presetFigure(res *Result, metric string) *float64 {
	if metric == "enqueue" {
		return ptr(res.EnqueuePerSec)
	}
	return ptr(res.JobsPerSec)
}

func orDefaultString(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
