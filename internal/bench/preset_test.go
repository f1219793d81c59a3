package bench

import (
	"bytes"
	"context"
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

// TestRunPreset runs a small preset of two runs and three rows and checks
// the combined table.
func TestRunPreset(t *testing.T) {
	t.Parallel()
	src := Reference{System: "Sys", Hardware: "a laptop", Source: "https://example.com/bench"}
	cases := []presetCase{
		{name: "small enqueue", opts: Options{Mode: ModeEnqueueBatch, Jobs: 200, Batch: 50, Concurrency: 2}, ref: ref(src, 1234, "enqueue"), metric: "jobs"},
		{name: "small lifecycle push", opts: Options{Mode: ModeLifecycle, Jobs: 100, Producers: 2, Workers: 1, Concurrency: 10}, ref: ref(src, 0, "push"), metric: "enqueue"},
		{name: "small lifecycle pop", ref: ref(src, 99, "pop"), metric: "process", shared: "small lifecycle push"},
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
	var b bytes.Buffer
	PrintPreset(&b, p)
	out := b.String()
	for _, want := range []string{"small enqueue", "1,234", "n/a", "[1] https://example.com/bench", "Sys; a laptop"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "!!!") {
		t.Errorf("clean preset warns:\n%s", out)
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
	out := b.String()
	for _, want := range []string{"Jobbie enqueue c=1", "enqueue: 15,000 jobs · 1 client", "BullMQ add_bulk 100,000", "100,000 jobs · 8 clients × batch 100"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}
