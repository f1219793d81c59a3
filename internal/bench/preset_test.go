package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSeedCasesAreValid checks every configuration of the seeds preset
// against the option bounds, and that shared rows name an earlier run.
func TestSeedCasesAreValid(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range seedCases() {
		if seen[c.name] {
			t.Errorf("duplicate configuration %q", c.name)
		}
		seen[c.name] = true
		if c.ref == nil || c.ref.Source == "" || c.ref.Hardware == "" || c.ref.Setup == "" {
			t.Errorf("%s: incomplete reference %+v", c.name, c.ref)
		}
		if c.metric != "jobs" && c.metric != "enqueue" && c.metric != "process" {
			t.Errorf("%s: metric %q", c.name, c.metric)
		}
		if c.ref != nil && c.ref.FigureMBps != nil && c.ref.Figure == nil {
			t.Errorf("%s: a published bandwidth without a published figure", c.name)
		}
		if (c.over == "") != (c.ratio == "") || (c.over != "" && !seen[c.over]) {
			t.Errorf("%s: ratio %q over %q, which must be an earlier configuration", c.name, c.ratio, c.over)
		}
		if c.shared != "" {
			if !seen[c.shared] {
				t.Errorf("%s shares the run of %q, which does not come before it", c.name, c.shared)
			}
			continue
		}
		if _, err := c.opts.withDefaults(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestSeedQueenCPP checks the configurations of Queen's C++ benchmark
// against its published table: every test's producer and consumer, with
// its figures, shaped as that test is.
func TestSeedQueenCPP(t *testing.T) {
	t.Parallel()
	type row struct {
		batch, messages int
		figure, mbps    float64
	}
	// The table of website/server/benchmarking.md, "Official Benchmark
	// Results".
	want := map[string]row{
		"Queen T1 producer, batch 1":    {1, 10_000, 785, 0.22},
		"Queen T1 consumer, batch 1":    {1, 10_000, 456, 0.23},
		"Queen T2 producer, batch 10":   {10, 10_000, 7677, 2.20},
		"Queen T2 consumer, batch 10":   {10, 10_000, 4989, 2.53},
		"Queen T3 producer, batch 100":  {100, 10_000, 39065, 11.18},
		"Queen T3 consumer, batch 100":  {100, 10_000, 30079, 15.26},
		"Queen T4 producer, batch 1000": {1000, 10_000, 85862, 24.57},
		"Queen T4 consumer, batch 1000": {1000, 10_000, 488650, 247.87},
		"Queen T5 producer, batch 1000": {1000, 100_000, 90601, 25.92},
		"Queen T5 consumer, batch 1000": {1000, 100_000, 84530, 42.96},
	}
	found := 0
	for _, c := range seedCases() {
		w, ok := want[c.name]
		if !ok {
			if c.ref != nil && c.ref.Source == srcQueenCPP.Source {
				t.Errorf("%s: an unexpected configuration of Queen's C++ benchmark", c.name)
			}
			continue
		}
		found++
		r := c.ref
		if r.Source != srcQueenCPP.Source || r.Figure == nil || *r.Figure != w.figure || r.FigureMBps == nil || *r.FigureMBps != w.mbps {
			t.Errorf("%s: %v msg/s and %v MB/s from %s, want %v and %v from %s", c.name, value(r.Figure), value(r.FigureMBps), r.Source, w.figure, w.mbps, srcQueenCPP.Source)
			continue
		}
		o := c.opts
		consumer := o.Mode == ModeProcess
		if o.PayloadBytes != queenPayloadBytes || o.Groups != 4 || o.Limits.Ordered != consumer || o.Runs != consumer ||
			(o.MaxGroups == 1) != consumer || c.metric != "jobs" {
			t.Errorf("%s: payload %d, %d groups, ordered %v, runs %v, metric %s: want %d-byte payloads over 4 groups, "+
				"ordered partitions taken in runs for a consumer", c.name, o.PayloadBytes, o.Groups, o.Limits.Ordered, o.Runs, c.metric, queenPayloadBytes)
		}
		// At least the published count; more only to time a run of a
		// second or more, within the preset's few minutes.
		if o.Jobs < w.messages || o.Jobs > 10*max(w.messages, 50_000) {
			t.Errorf("%s: %d jobs for a published run of %d", c.name, o.Jobs, w.messages)
		}
		if !strings.Contains(r.Setup, thousands(float64(w.messages))+" messages") ||
			(o.Jobs != w.messages && !strings.Contains(r.Setup, "Spool: "+thousands(float64(o.Jobs))+" jobs")) {
			t.Errorf("%s: setup %q does not state the published count and Spool's", c.name, r.Setup)
		}
		// How the published bandwidth was counted: the tool adds a fixed
		// 300 bytes for each pushed message and the JSON of each
		// delivered one, and divides by 2^20.
		bytesPerMsg := w.mbps * (1 << 20) / w.figure
		if strings.Contains(c.name, "producer") {
			if o.Mode != ModeEnqueueBatch || o.Concurrency != 10 || o.Batch != w.batch {
				t.Errorf("%s: %s, %d clients × batch %d: want enqueue-batch, 10 clients × batch %d", c.name, o.Mode, o.Concurrency, o.Batch, w.batch)
			}
			if got := math.Round(w.figure*300/(1<<20)*100) / 100; got != w.mbps {
				t.Errorf("%s: %v msg/s make %v MB/s at the tool's 300 bytes, not the %v transcribed", c.name, w.figure, got, w.mbps)
			}
		} else {
			if o.Mode != ModeProcess || o.Workers != 10 || o.Concurrency != w.batch {
				t.Errorf("%s: %s, %d workers × %d: want process, 10 workers each fetching up to %d", c.name, o.Mode, o.Workers, o.Concurrency, w.batch)
			}
			if bytesPerMsg < 520 || bytesPerMsg > 540 {
				t.Errorf("%s: %v MB/s at %v msg/s make %.0f bytes a delivered message, out of line with the other tests", c.name, w.mbps, w.figure, bytesPerMsg)
			}
		}
	}
	if found != len(want) {
		t.Errorf("found %d of the %d configurations of Queen's C++ benchmark", found, len(want))
	}
	// The payload stands for the tool's message: its T4 producer's
	// bandwidth at Spool's count of megabytes.
	if got := mbPerSec(85862, queenPayloadBytes); math.Abs(got-24.57) > 0.5 {
		t.Errorf("T4 producer at %d-byte payloads: %.2f MB/s, want about Queen's 24.57", queenPayloadBytes, got)
	}
}

// TestSeedOrderedCases checks the ordered-partition comparison: the same
// configuration twice, ordered or not, and a ratio of the two.
func TestSeedOrderedCases(t *testing.T) {
	t.Parallel()
	byName := map[string]presetCase{}
	for _, c := range seedCases() {
		byName[c.name] = c
	}
	ord, unord := byName["ordered, 1,000 partitions"], byName["unordered, 1,000 groups"]
	if ord.ref == nil || unord.ref == nil {
		t.Fatal("the ordered comparison is missing")
	}
	if !ord.opts.Limits.Ordered || unord.opts.Limits.Ordered {
		t.Errorf("ordered %v, unordered %v", ord.opts.Limits.Ordered, unord.opts.Limits.Ordered)
	}
	o := unord.opts
	o.Limits.Ordered = true
	if !reflect.DeepEqual(o, ord.opts) {
		t.Errorf("the two differ in more than order: %+v and %+v", ord.opts, unord.opts)
	}
	if o.Mode != ModeProcess || o.Jobs != 100_000 || o.Workers != 4 || o.Concurrency != 500 || o.Groups != 1000 {
		t.Errorf("settings %+v: want process, 100,000 jobs, 4 workers × 500, 1,000 groups", o)
	}
	if ord.over != unord.name || ord.ratio != "ordered / unordered, 1,000 partitions" {
		t.Errorf("ratio %q over %q", ord.ratio, ord.over)
	}
	for _, c := range []presetCase{ord, unord} {
		if c.ref.Figure != nil || c.ref.FigureMBps != nil || !strings.Contains(c.ref.Setup, "Spool's own") {
			t.Errorf("%s: %v msg/s, %v MB/s, setup %q: want no figure, Spool's own", c.name, value(c.ref.Figure), value(c.ref.FigureMBps), c.ref.Setup)
		}
	}

	// Queen's tool's shape: 10 workers fetching up to 1,000 of one queue's
	// 4 partitions, ordered in runs beside unordered.
	few, fewUnord := byName["ordered runs, 4 partitions, fetch 1,000"], byName["unordered, 4 groups, fetch 1,000"]
	if few.ref == nil || fewUnord.ref == nil {
		t.Fatal("the comparison of 4 partitions is missing")
	}
	if !few.opts.Limits.Ordered || !few.opts.Runs || fewUnord.opts.Limits.Ordered || fewUnord.opts.Runs || few.over != fewUnord.name ||
		few.ratio != "ordered in runs / unordered, 4 partitions" {
		t.Errorf("4 partitions: ordered %v runs %v, unordered %v, ratio %q over %q", few.opts.Limits.Ordered, few.opts.Runs,
			fewUnord.opts.Limits.Ordered, few.ratio, few.over)
	}
	for _, c := range []presetCase{few, fewUnord} {
		o := c.opts
		if o.Mode != ModeProcess || o.Workers != queenThreads || o.Concurrency != 1000 || o.Groups != 4 || o.Queues > 1 {
			t.Errorf("%s: settings %+v: want process, 10 workers × 1,000, one queue of 4 groups", c.name, o)
		}
	}
}

// TestRunPreset runs a small preset of two runs and three rows and checks
// the figures, the ratio and the combined table and JSON.
func TestRunPreset(t *testing.T) {
	t.Parallel()
	src := Reference{System: "Sys", Hardware: "a laptop", Source: "https://example.com/bench", Note: "counts MiB"}
	cases := []presetCase{
		{name: "small enqueue", opts: Options{Mode: ModeEnqueueBatch, Jobs: 200, Batch: 50, Concurrency: 2, PayloadBytes: 290},
			ref: refMB(src, 1234, 5.67, "enqueue"), metric: "jobs"},
		{name: "small lifecycle push", opts: Options{Mode: ModeLifecycle, Jobs: 100, Producers: 2, Workers: 1, Concurrency: 10}, ref: ref(src, 0, "push"), metric: "enqueue"},
		{name: "small lifecycle pop", ref: ref(src, 99, "pop"), metric: "process", shared: "small lifecycle push",
			over: "small enqueue", ratio: "pop / enqueue"},
	}
	p := runPreset(context.Background(), "test", cases, Options{ServerCommand: testServerCommand, Timeout: time.Minute})
	if p.Errors() != 0 || p.Interrupted != "" || len(p.Runs) != 3 {
		t.Fatalf("preset: %+v", p)
	}
	for _, r := range p.Runs {
		if r.Spool == nil || *r.Spool <= 0 {
			t.Fatalf("%s: no figure", r.Name)
		}
	}
	if p.Runs[2].Result != nil || p.Runs[2].SameRunAs != "small lifecycle push" || p.Runs[1].Result == nil {
		t.Fatalf("shared row: %+v", p.Runs[2])
	}
	if got, want := *p.Runs[2].Spool, p.Runs[1].Result.JobsPerSec; got != want {
		t.Fatalf("pop figure %v, want the run's processing rate %v", got, want)
	}
	// The configuration's own payload is kept when base sets none, and the
	// MB/s count it: 290 bytes in the first run, the default 100 in the
	// second.
	if got := p.Runs[0].Result.Settings.PayloadBytes; got != 290 {
		t.Fatalf("payload %d bytes, want the configuration's 290", got)
	}
	for i, payload := range []float64{290, 100, 100} {
		r := p.Runs[i]
		if want := *r.Spool * payload / 1e6; r.MBps == nil || math.Abs(*r.MBps-want) > 1e-9 {
			t.Errorf("%s: %v MB/s, want %v jobs/s × %v bytes = %v", r.Name, value(r.MBps), *r.Spool, payload, want)
		}
	}
	if len(p.Ratios) != 1 || p.Ratios[0].Ratio == nil || p.Ratios[0].Of != "small lifecycle pop" || p.Ratios[0].Over != "small enqueue" {
		t.Fatalf("ratios: %+v", p.Ratios)
	}
	ratio := *p.Runs[2].Spool / *p.Runs[0].Spool
	if *p.Ratios[0].Ratio != ratio {
		t.Fatalf("ratio %v, want pop over enqueue, %v", *p.Ratios[0].Ratio, ratio)
	}

	var b bytes.Buffer
	PrintPreset(&b, p)
	out := b.String()
	for _, want := range []string{"small enqueue", "1,234", "5.67", formatMBps(*p.Runs[0].MBps), "n/a", "[1] https://example.com/bench",
		"Sys; a laptop", "Note: counts MiB", fmt.Sprintf("pop / enqueue: %.0f %%", 100*ratio), "payload bytes only"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "!!!") {
		t.Errorf("clean preset warns:\n%s", out)
	}

	var doc struct {
		Runs []struct {
			Name  string   `json:"name"`
			Spool *float64 `json:"spool_jobs_per_sec"`
			MBps  *float64 `json:"spool_mb_per_sec"`
			Ref   struct {
				Figure *float64 `json:"figure"`
				MBps   *float64 `json:"figure_mb_per_sec"`
			} `json:"reference"`
		} `json:"runs"`
		Ratios []struct {
			Label string   `json:"label"`
			Ratio *float64 `json:"ratio"`
		} `json:"ratios"`
	}
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	r0 := doc.Runs[0]
	if len(doc.Runs) != 3 || r0.MBps == nil || *r0.MBps != *p.Runs[0].MBps || r0.Ref.MBps == nil || *r0.Ref.MBps != 5.67 ||
		doc.Runs[1].Ref.MBps != nil || doc.Runs[1].Ref.Figure != nil {
		t.Errorf("JSON runs: %s", js)
	}
	if len(doc.Ratios) != 1 || doc.Ratios[0].Label != "pop / enqueue" || doc.Ratios[0].Ratio == nil || *doc.Ratios[0].Ratio != ratio {
		t.Errorf("JSON ratios: %s", js)
	}
}

// TestPrintPresetColumns checks the table's columns, the MB/s figures
// and the ratio lines, on figures made up for the test.
func TestPrintPresetColumns(t *testing.T) {
	t.Parallel()
	cpu := 110.0
	res := &Result{ServerCPUPercent: &cpu}
	p := &PresetResult{Preset: "seeds", Server: "embedded", Sync: "full", CPUs: 2, Seconds: 90,
		Runs: []PresetRun{
			{Name: "Queen T4 consumer, batch 1000", Spool: ptr(60000), MBps: ptr(mbPerSec(60000, 290)),
				Reference: refMB(srcQueenCPP, 488650, 247.87, "T4 consumer"), Result: res},
			{Name: "unordered, 1,000 groups", Spool: ptr(50000), MBps: ptr(mbPerSec(50000, 100)), Reference: ref(srcSpool, 0, "Spool's own"), Result: res},
			{Name: "ordered, 1,000 partitions", Spool: ptr(39000), MBps: ptr(mbPerSec(39000, 100)), Reference: ref(srcSpool, 0, "Spool's own"), Result: res},
			{Name: "broken", Error: "no server", Reference: ref(srcSpool, 0, "Spool's own")},
		},
	}
	p.Ratios = []PresetRatio{
		{Label: "ordered / unordered, 1,000 partitions", Of: "ordered, 1,000 partitions", Over: "unordered, 1,000 groups", Ratio: ptr(39000.0 / 50000)},
		{Label: "broken / unordered", Of: "broken", Over: "unordered, 1,000 groups"},
	}
	var b bytes.Buffer
	PrintPreset(&b, p)
	out := b.String()
	lines := strings.Split(out, "\n")
	cells := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1)
			}
		}
		t.Fatalf("no line starts with %q:\n%s", prefix, out)
		return nil
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"#  ", []string{"#", "configuration", "spool jobs/s", "spool MB/s", "server CPU", "errors", "pub. msg/s", "pub. MB/s", "src"}},
		// 60,000 jobs/s × 290 bytes = 17.40 MB/s.
		{"1  Queen T4", []string{"1", "Queen T4 consumer, batch 1000", "60,000", "17.40", "110%", "0", "488,650", "247.87", "[1]"}},
		// 39,000 jobs/s × 100 bytes = 3.90 MB/s; no published figure.
		{"3  ordered", []string{"3", "ordered, 1,000 partitions", "39,000", "3.90", "110%", "0", "n/a", "n/a", "[2]"}},
		// The setups of the published figures, under the table.
		{"   1  T4", []string{"1", "T4 consumer [1]"}},
		{"   3  Spool", []string{"3", "Spool's own [2]"}},
	} {
		if got := cells(c.prefix); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("row %q:\n got %q\nwant %q", c.prefix, got, c.want)
		}
	}
	for _, want := range []string{
		"ordered / unordered, 1,000 partitions: 78 % (39,000 / 50,000 jobs/s)",
		"broken / unordered: n/a",
		"Note: " + srcQueenCPP.Note,
		"jobs/s × payload bytes / 1,000,000",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("printout lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "ordered / unordered"), strings.Index(out, "Sources"); i < 0 || j < i {
		t.Errorf("the ratio is not under the table, before the sources:\n%s", out)
	}
}

func TestPresetInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []presetCase{{name: "never", opts: Options{Mode: ModeEnqueue, Jobs: 10}, ref: ref(srcJobbie, 1, "x"), metric: "jobs"}}
	p := runPreset(ctx, "test", cases, Options{ServerCommand: testServerCommand})
	if p.Interrupted == "" || len(p.Runs) != 0 {
		t.Fatalf("preset: %+v", p)
	}
	var b bytes.Buffer
	PrintPreset(&b, p)
	if !strings.Contains(b.String(), "STOPPED EARLY") {
		t.Fatalf("no warning:\n%s", b.String())
	}
}

func TestPrintPresetPlan(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	PrintPresetPlan(&b, PresetSeeds, Options{})
	out := strings.Join(strings.Fields(b.String()), " ") // as read, lines wrapped or not
	for _, want := range []string{"Jobbie enqueue c=1", "enqueue: 15,000 jobs · 1 client", "BullMQ add_bulk 100,000", "100,000 jobs · 8 clients × batch 100",
		"Queen T1 consumer, batch 1", "process: 10,000 jobs · 10 workers × concurrency 1 · prefill batch 1000 · 1 queue · payload 290 B · 4 groups · ordered, runs, max-groups 1",
		"Queen T2 producer, batch 10", "enqueue-batch: 100,000 jobs · 10 clients × batch 10 · 1 queue · payload 290 B · 4 groups",
		"100,000 jobs · 4 workers × concurrency 500 · prefill batch 1000 · 1 queue · payload 100 B · 1,000 groups · ordered"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// value is what v points to, or nil, for messages.
func value(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
