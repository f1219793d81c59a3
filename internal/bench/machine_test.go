package bench

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseCPUTimes(t *testing.T) {
	t.Parallel()
	stat := []byte("cpu  100 5 50 1000 20 3 2 40 7 0\ncpu0 50 2 25 500 10 1 1 20 3 0\nintr 1\n")
	got, err := parseCPUTimes(stat)
	if err != nil {
		t.Fatal(err)
	}
	// busy: user + nice + system + irq + softirq; idle: idle + iowait;
	// guest (7) is already in user.
	if want := (cpuTimes{busy: 160, idle: 1020, steal: 40}); got != want {
		t.Errorf("parseCPUTimes = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "intr 1\n", "cpu 1 2 3\n", "cpu 1 2 3 x 5 6 7 8\n", "cpu 1 2 3 -4 5 6 7 8\n"} {
		if _, err := parseCPUTimes([]byte(bad)); err == nil {
			t.Errorf("parseCPUTimes(%q): no error", bad)
		}
	}
}

func TestParseLoad1(t *testing.T) {
	t.Parallel()
	if got, err := parseLoad1([]byte("1.62 0.80 0.41 3/512 12345\n")); err != nil || got != 1.62 {
		t.Errorf("parseLoad1 = %v, %v; want 1.62", got, err)
	}
	for _, bad := range []string{"", "x 1 2", "-1 0 0"} {
		if _, err := parseLoad1([]byte(bad)); err == nil {
			t.Errorf("parseLoad1(%q): no error", bad)
		}
	}
}

// TestMachineLoad checks the decision on samples of a 2-CPU machine over
// 10 s (2,000 ticks in all): who is counted as other processes, and when
// the run warns.
func TestMachineLoad(t *testing.T) {
	t.Parallel()
	from := cpuTimes{busy: 10_000, idle: 50_000, steal: 100}
	sample := func(phase string, busy, steal int64, load1 float64, own time.Duration, ownKnown bool) loadSample {
		return loadSample{phase: phase, from: from,
			to:   cpuTimes{busy: from.busy + busy, idle: from.idle + 2000 - busy - steal, steal: from.steal + steal},
			wall: 10 * time.Second, cpus: 2, load1: load1, own: own, ownKnown: ownKnown}
	}
	for _, c := range []struct {
		name      string
		s         loadSample
		other     float64 // -1: unknown
		steal     float64
		busy      bool
		inMessage []string
	}{
		{"idle before", sample(PhaseBefore, 40, 0, 0.1, 0, true), 2, 0, false, nil},
		{"busy before", sample(PhaseBefore, 1000, 0, 1.6, 0, true), 50, 0, true,
			[]string{"the machine is busy", "load average 1.60 on 2 CPUs", "other processes 50% of the CPU time", "will be lower than on an idle machine"}},
		// The load average of a run that just ended, on a machine idle now.
		{"stale load average before", sample(PhaseBefore, 40, 0, 1.9, 0, true), 2, 0, false, nil},
		// A short burst while the load average is low.
		{"burst before, low load", sample(PhaseBefore, 1000, 0, 0.3, 0, true), 50, 0, false, nil},
		{"steal before", sample(PhaseBefore, 40, 100, 0.1, 0, true), 2, 5, true, []string{"steal 5.0%"}},
		// The run's own CPU time is not counted: 18 of the 19 busy seconds
		// are the bench's and its server's.
		{"busy run, own work", sample(PhaseDuring, 1900, 0, 2.5, 18*time.Second, true), 5, 0, false, nil},
		{"busy run, others", sample(PhaseDuring, 1900, 0, 2.5, 10*time.Second, true), 45, 0, true,
			[]string{"the machine was busy during the run", "other processes 45% of the CPU time", "figures are lower", "over 10.0 s"}},
		// Own time measured a little above the machine's is not negative.
		{"own above machine", sample(PhaseDuring, 1000, 0, 2, 11*time.Second, true), 0, 0, false, nil},
		{"server unknown", sample(PhaseDuring, 1900, 0, 2.5, 0, false), -1, 0, false, nil},
		{"server unknown, steal", sample(PhaseDuring, 1900, 80, 2.5, 0, false), -1, 4, true, []string{"steal 4.0%"}},
	} {
		m := machineLoad(c.s)
		if m == nil {
			t.Errorf("%s: no figures", c.name)
			continue
		}
		other := -1.0
		if m.OtherCPUPercent != nil {
			other = *m.OtherCPUPercent
		}
		if !near(other, c.other) || !near(m.StealPercent, c.steal) || m.Busy != c.busy || m.CPUs != 2 || m.Seconds != 10 {
			t.Errorf("%s: %+v (other %v): want other %v, steal %v, busy %v", c.name, m, other, c.other, c.steal, c.busy)
		}
		msg := m.warning()
		if (msg != "") != c.busy {
			t.Errorf("%s: warning %q, busy %v", c.name, msg, c.busy)
		}
		for _, want := range c.inMessage {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: warning %q lacks %q", c.name, msg, want)
			}
		}
	}
	if m := machineLoad(loadSample{phase: PhaseBefore, from: from, to: from, cpus: 2}); m != nil {
		t.Errorf("a sample without ticks: %+v, want none", m)
	}
}

func near(a, b float64) bool { return a-b < 0.01 && b-a < 0.01 }

// TestWarnGoesToWarnings checks where a busy machine's line goes, with
// the preset's label, and that a machine that is not busy prints nothing.
func TestWarnGoesToWarnings(t *testing.T) {
	t.Parallel()
	busy := &MachineLoad{Phase: PhaseDuring, Seconds: 2, CPUs: 2, StealPercent: 9, Busy: true}
	var warnings, progress bytes.Buffer
	Options{Warnings: &warnings, Progress: &progress, Label: "[1/2 x]"}.warn(busy)
	Options{Warnings: &warnings}.warn(&MachineLoad{Phase: PhaseDuring, Seconds: 2, CPUs: 2})
	Options{Warnings: &warnings}.warn(nil)
	if got := warnings.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "spool bench [1/2 x]: the machine was busy") || progress.Len() != 0 {
		t.Errorf("warnings %q, progress %q", got, progress.String())
	}
	Options{Progress: &progress}.warn(busy)
	if !strings.Contains(progress.String(), "steal 9.0%") {
		t.Errorf("without Warnings, progress got %q", progress.String())
	}
}

// TestRunMeasuresMachine checks that a run on Linux carries the machine's
// figures before and during it.
func TestRunMeasuresMachine(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the machine's load is read from /proc")
	}
	var warnings bytes.Buffer
	res := run(t, Options{Mode: ModeEnqueue, Duration: 300 * time.Millisecond, Warnings: &warnings})
	b, d := res.MachineBefore, res.MachineDuring
	if b == nil || d == nil || b.Phase != PhaseBefore || d.Phase != PhaseDuring || d.OtherCPUPercent == nil || b.CPUs != runtime.NumCPU() {
		t.Fatalf("machine before %+v, during %+v", b, d)
	}
	if (b.Busy || d.Busy) != (warnings.Len() > 0) {
		t.Errorf("busy before %v, during %v, but warnings %q", b.Busy, d.Busy, warnings.String())
	}
}
