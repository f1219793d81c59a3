package bench

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkWidth fails t for every line of out wider than maxWidth.
func checkWidth(t *testing.T, what, out string) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > maxWidth {
			t.Errorf("%s, line %d is %d columns wide, more than %d:\n%s", what, i+1, n, maxWidth, l)
		}
	}
}

// bigResult is a run of mode with large figures in every field, long
// error messages and server log lines.
func bigResult(mode string) *Result {
	big := func(v float64) *float64 { return &v }
	stats := &LatencyStats{Avg: 123456.78, P50: 99999.99, P99: 1234567.89, P999: 2345678.91, Max: 98765432.1, Count: 100_000_000}
	res := &Result{Name: "BullMQ realistic 1 × 500, 10ms work", Mode: mode, Server: "http://spool-bench-target.internal.example.com:7311",
		Sync: "normal", CPUs: 128, Transport: TransportStream,
		Settings: Settings{Jobs: MaxJobs, Duration: "23h59m59s", Batch: MaxBatch, Concurrency: MaxConcurrency, Workers: MaxWorkers,
			Producers: MaxConcurrency, Queues: MaxQueues, Groups: MaxGroups, Limits: "limit-rate 1000000/1h0m0s, max-active 10000, group-rate 1000/1m0s, ordered",
			Rate: MaxRate, Work: "59.999999s", PayloadBytes: MaxPayloadBytes},
		Seconds: 86399.99, Enqueued: MaxJobs, Processed: MaxJobs, Requests: MaxJobs, OpsPerSec: 12_345_678, JobsPerSec: 98_765_432,
		EnqueuePerSec: 98_765_432, TheoreticalJobsPerSec: big(1e9), Efficiency: big(0.987),
		Latency:          Latencies{Enqueue: stats, Fetch: stats, Ack: stats, Start: stats},
		ServerCPUPercent: big(12800), ServerPeakRSSMB: big(123456.7), ServerSampledRSSMB: big(123456.7),
		ClientCPUPercent: big(12800), ClientPeakRSSMB: big(123456.7),
		MachineBefore: &MachineLoad{Phase: PhaseBefore, Seconds: 0.3, CPUs: 128, Load1: 1234.56, OtherCPUPercent: big(99.9), StealPercent: 45.6, Busy: true},
		MachineDuring: &MachineLoad{Phase: PhaseDuring, Seconds: 86399.99, CPUs: 128, Load1: 1234.56, OtherCPUPercent: big(99.9), StealPercent: 45.6, Busy: true},
		Observers: &Observers{ScrapeEvery: "1h0m0s", Scrapes: 1_000_000, ScrapeLatency: stats, ScrapeBytes: 1 << 40,
			Watched: true, Events: MaxJobs, Drops: 1_000_000, DashboardLoads: 1_000_000, Failures: 1_000_000},
		Verification: &Verification{Expected: MaxJobs, Counts: map[string]int64{"scheduled": MaxJobs, "available": MaxJobs, "active": MaxJobs,
			"retrying": MaxJobs, "completed": MaxJobs, "dead": MaxJobs, "cancelled": MaxJobs}},
		Interrupted: "stopped after 1000 errors",
		ServerLog: []string{`time=2030-01-01T00:00:00.000Z level=WARN msg="store: commit took long" queue=` + strings.Repeat("q", 200) +
			` took=12.3s jobs=100000 detail="` + strings.Repeat("a long explanation of what went wrong ", 8) + `"`},
	}
	for i := 0; i < maxErrorSamples; i++ {
		res.addError(fmt.Sprintf("POST /v1/jobs/batch: 503 Service Unavailable: %s%d", strings.Repeat("overloaded, try again later; ", 10), i))
	}
	res.Errors = 1_000_000
	return res
}

// TestPrintFitsWidth drives the printout of every mode with large figures
// and long texts, and checks that no line is wider than maxWidth and that
// the figures are all there.
func TestPrintFitsWidth(t *testing.T) {
	t.Parallel()
	for _, mode := range Modes {
		res := bigResult(mode)
		var b bytes.Buffer
		Print(&b, res)
		out := b.String()
		checkWidth(t, mode, out)
		for _, want := range []string{"100,000,000 enqueued", "98,765,432 jobs/s", "12,345,678 requests/s", "98.7% of the theoretical 1,000,000,000",
			"12800%", "123456.7 MB", "2345678.91", "98765432.10", "100000000", "1000000 drops", "load average 1234.56 on 128 CPUs",
			"steal 45.6%", "MISMATCH", "cancelled 100000000", "THIS RUN HAD 1000000 ERRORS", "try again later; 4"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the printout lacks %q:\n%s", mode, want, out)
			}
		}
	}
}

// TestPrintPresetFitsWidth prints a preset of every seed configuration,
// with large figures, a failed start and a run stopped with long errors,
// and its plan, and checks that no line is wider than maxWidth and that
// every figure, setup and source is there.
func TestPrintPresetFitsWidth(t *testing.T) {
	t.Parallel()
	var plan bytes.Buffer
	PrintPresetPlan(&plan, PresetSeeds, Options{Server: "http://spool-bench-target.internal.example.com:7311"})
	checkWidth(t, "plan", plan.String())

	cases := seedCases()
	p := &PresetResult{Preset: PresetSeeds, Server: "embedded", Sync: "full", CPUs: 128, Seconds: 86400, Interrupted: "interrupted during the last one"}
	for i, c := range cases {
		run := PresetRun{Name: c.name, Metric: c.metric, Reference: c.ref, SameRunAs: c.shared}
		switch {
		case i == 3:
			run.Error = "start the embedded server: " + strings.Repeat("it did not say it was listening; ", 6)
		default:
			run.Spool, run.MBps = ptr(12_345_678), ptr(mbPerSec(12_345_678, MaxPayloadBytes))
			if c.shared == "" {
				run.Result = bigResult(c.opts.Mode)
			}
		}
		p.Runs = append(p.Runs, run)
	}
	p.Ratios = presetRatios(cases, p.Runs)
	var b bytes.Buffer
	PrintPreset(&b, p)
	out := b.String()
	checkWidth(t, "preset", out)
	for _, want := range []string{"12,345,678 *", "6472690.83", "12800%", "488,650", "247.87", "ordered / unordered, 1,000 partitions: 100 %",
		"could not run: start the embedded server", "THE PRESET HAD", "other processes 100% of the CPU time"} {
		if !strings.Contains(out, want) {
			t.Errorf("the preset's printout lacks %q:\n%s", want, out)
		}
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, c := range cases {
		if !strings.Contains(out, c.name) {
			t.Errorf("the preset's printout lacks the row %q", c.name)
		}
		for _, s := range []string{c.ref.Setup, c.ref.Source, c.ref.System, c.ref.Hardware, c.ref.Note} {
			if !strings.Contains(flat, strings.Join(strings.Fields(s), " ")) {
				t.Errorf("the preset's printout lacks %q", s)
			}
		}
	}
}

func TestWrap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text, first, hang string
		width             int
		want              []string
	}{
		{"a bb ccc dddd", "", "", 6, []string{"a bb", "ccc", "dddd"}},
		{"a bb ccc", "> ", "  ", 6, []string{"> a bb", "  ccc"}},
		{"abcdefghij", "", "", 4, []string{"abcd", "efgh", "ij"}},
		{"x ××××××", "", "", 4, []string{"x", "××××", "××"}},
		{"", "> ", "  ", 6, []string{"> "}},
	} {
		got := wrap(c.text, c.width, c.first, c.hang)
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.text, c.width, got, c.want)
		}
	}
}
