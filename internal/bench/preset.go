package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// PresetSeeds is the preset that runs the configurations of the published
// benchmarks of Jobbie, BullMQ and Queen.
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
}

// seedCases are the configurations of the seeds preset. The job counts are
// Spool's own, chosen so that each run lasts a few seconds and the whole
// preset two to three minutes on a 2-core machine; each reference states
// the size of the published run.
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
	j, b, qb, qt := srcJobbie, srcBullMQ, srcQueenBP, srcQueenT5
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
		{name: "Queen producer, batch 1000", opts: batch(10, 1000, 500_000), ref: ref(qt, 90601, "T5 producer, batch 1,000, 100,000 messages"), metric: "jobs"},
		{name: "Queen consumer, batch 1000", opts: proc(10, 1000, 200_000), ref: ref(qt, 84530, "T5 consumer, batch 1,000, 100,000 messages"), metric: "jobs"},
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
	// Interrupted says why the preset stopped before its last
	// configuration, if it did.
	Interrupted string `json:"interrupted,omitempty"`
}

// PresetRun is one configuration of a preset: Spool's figure for it, the
// run it comes from, and the published figure it is compared with.
type PresetRun struct {
	Name      string     `json:"name"`
	Metric    string     `json:"metric"`
	Spool     *float64   `json:"spool_jobs_per_sec"`
	Reference *Reference `json:"reference"`
	Result    *Result    `json:"result,omitempty"`
	// SameRunAs names the configuration whose run this figure comes
	// from, when one run gives two figures.
	SameRunAs string `json:"same_run_as,omitempty"`
	// Error is why the configuration could not run.
	Error string `json:"error,omitempty"`
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
// pid, token, sync, payload, progress and server command. It stops early when ctx
// ends, keeping what it measured.
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
			o.PayloadBytes, o.Progress = base.PayloadBytes, base.Progress
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
	out.Seconds = time.Since(start).Seconds()
	return out
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
