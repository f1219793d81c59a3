package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
)

// When the machine counts as busy. A busy machine gives the run less CPU
// than an idle one would, so its figures come out lower; the run says so
// rather than let them pass for the machine's best.
const (
	// busyLoadPerCPU is the 1-minute load average, per CPU, from which
	// the machine counts as loaded before a run.
	busyLoadPerCPU = 0.5
	// busyOtherPercent is the share of the machine's CPU time (all CPUs
	// together) used by processes other than the bench and its server
	// from which the machine counts as busy.
	busyOtherPercent = 20.0
	// busyStealPercent is the share of the machine's CPU time taken by the
	// hypervisor for other guests (steal) from which the machine counts as
	// busy.
	busyStealPercent = 3.0
	// loadSampleTime is how long the machine is watched before a run.
	loadSampleTime = 300 * time.Millisecond
)

// Phases of a machine-load sample.
const (
	// PhaseBefore is the short sample taken before a run starts.
	PhaseBefore = "before"
	// PhaseDuring is the timed window of the run.
	PhaseDuring = "during"
)

// MachineLoad is how busy the machine was, apart from the run, over one
// sample. It is measured from /proc (Linux); elsewhere a run has none.
type MachineLoad struct {
	// Phase is PhaseBefore or PhaseDuring.
	Phase string `json:"phase"`
	// Seconds is the length of the sample.
	Seconds float64 `json:"seconds"`
	// CPUs is the number of CPUs of the machine.
	CPUs int `json:"cpus"`
	// Load1 is the 1-minute load average at the end of the sample. During
	// a run it counts the run too, so it is reported but not judged.
	Load1 float64 `json:"load1"`
	// OtherCPUPercent is the share of the machine's CPU time, all CPUs
	// together (so at most 100), used by processes other than the bench
	// and its server. Nil when the server's CPU time is unknown (a server
	// given by URL without its pid) or spread over other processes (an
	// embedded server on PostgreSQL).
	OtherCPUPercent *float64 `json:"other_cpu_percent"`
	// StealPercent is the share of the machine's CPU time the hypervisor
	// gave to other guests.
	StealPercent float64 `json:"steal_percent"`
	// Busy is true when the figures above make the machine busy (see
	// machineBusy); the run then warned.
	Busy bool `json:"busy"`
}

// cpuTimes is the machine's CPU time by use, summed over its CPUs, in
// clock ticks, from the first line of /proc/stat.
type cpuTimes struct {
	busy, idle, steal int64
}

// procTicksPerSecond is the unit of the CPU times in /proc/stat and
// /proc/<pid>/stat (USER_HZ), 100 on every Linux architecture Go runs on.
const procTicksPerSecond = 100

// errNoProcStat is returned where /proc/stat is missing (not Linux).
var errNoProcStat = errors.New("no /proc/stat")

// parseCPUTimes reads the "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq and steal ticks (guest time is already in
// user and nice).
func parseCPUTimes(stat []byte) (cpuTimes, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return cpuTimes{}, fmt.Errorf("first line %q: want \"cpu\" and at least 8 counters", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(string(f[i+1]), 10, 64)
		if err != nil || n < 0 {
			return cpuTimes{}, fmt.Errorf("counter %d %q: want a count of ticks", i+1, f[i+1])
		}
		v[i] = n
	}
	return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7]}, nil
}

// parseLoad1 reads the 1-minute load average, the first field of
// /proc/loadavg.
func parseLoad1(loadavg []byte) (float64, error) {
	f := bytes.Fields(loadavg)
	if len(f) == 0 {
		return 0, errors.New("empty /proc/loadavg")
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("load average %q: want a number", f[0])
	}
	return v, nil
}

// readCPUTimes reads the machine's CPU times, or errNoProcStat where
// there is no /proc/stat.
func readCPUTimes() (cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, errNoProcStat
	}
	return parseCPUTimes(b)
}

// readLoad1 reads the 1-minute load average, 0 when it cannot.
func readLoad1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := parseLoad1(b)
	return v
}

// loadSample is what a MachineLoad is computed from: the machine's CPU
// times at both ends of the sample, and the CPU time the bench and its
// server used in between (ownKnown false when that is unknown).
type loadSample struct {
	phase    string
	from, to cpuTimes
	wall     time.Duration
	cpus     int
	load1    float64
	own      time.Duration
	ownKnown bool
}

// machineLoad computes the figures of a sample and whether they make the
// machine busy; nil when the sample has no ticks (too short to judge).
func machineLoad(s loadSample) *MachineLoad {
	busy := s.to.busy - s.from.busy
	steal := s.to.steal - s.from.steal
	total := busy + steal + s.to.idle - s.from.idle
	if total <= 0 || busy < 0 || steal < 0 {
		return nil
	}
	m := &MachineLoad{Phase: s.phase, Seconds: s.wall.Seconds(), CPUs: s.cpus, Load1: s.load1,
		StealPercent: 100 * float64(steal) / float64(total)}
	if s.ownKnown {
		others := float64(busy)/procTicksPerSecond - s.own.Seconds()
		m.OtherCPUPercent = ptr(100 * max(others, 0) / (float64(total) / procTicksPerSecond))
	}
	m.Busy = machineBusy(m)
	return m
}

// machineBusy says whether m is a busy machine: steal of busyStealPercent
// or more, or other processes using busyOtherPercent of the CPU time or
// more. Before a run that sample is short, so it counts only when the
// 1-minute load average agrees (busyLoadPerCPU); the average alone is not
// enough, as it trails by a minute and still counts a run just ended.
func machineBusy(m *MachineLoad) bool {
	if m.StealPercent >= busyStealPercent {
		return true
	}
	if m.OtherCPUPercent == nil || *m.OtherCPUPercent < busyOtherPercent {
		return false
	}
	return m.Phase != PhaseBefore || m.Load1 >= busyLoadPerCPU*float64(m.CPUs)
}

// describe gives m's figures in a phrase: "load average 1.60 on 2 CPUs,
// other processes 45% of the CPU time, steal 0.0%, over 0.3 s".
func (m *MachineLoad) describe() string {
	s := ""
	if m.Phase == PhaseBefore {
		s = fmt.Sprintf("load average %.2f on %d CPUs, ", m.Load1, m.CPUs)
	}
	if m.OtherCPUPercent != nil {
		s += fmt.Sprintf("other processes %.0f%% of the CPU time, ", *m.OtherCPUPercent)
	}
	return s + fmt.Sprintf("steal %.1f%%, over %.1f s %s the run", m.StealPercent, m.Seconds, m.Phase)
}

// warning is the line a busy sample prints, "" for a machine that is not
// busy.
func (m *MachineLoad) warning() string {
	if m == nil || !m.Busy {
		return ""
	}
	if m.Phase == PhaseBefore {
		return "the machine is busy (" + m.describe() + "): the figures will be lower than on an idle machine"
	}
	return "the machine was busy during the run (" + m.describe() + "): the figures are lower than on an idle machine"
}

// sampleBefore watches the machine for loadSampleTime before a run; nil
// where there is no /proc/stat or when ctx ends first.
func sampleBefore(ctx context.Context) *MachineLoad {
	from, err := readCPUTimes()
	if err != nil {
		return nil
	}
	self0, _, selfOK := selfUsage()
	start := time.Now()
	t := time.NewTimer(loadSampleTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-t.C:
	}
	to, err := readCPUTimes()
	if err != nil {
		return nil
	}
	self1, _, _ := selfUsage()
	return machineLoad(loadSample{phase: PhaseBefore, from: from, to: to, wall: time.Since(start),
		cpus: runtime.NumCPU(), load1: readLoad1(), own: self1 - self0, ownKnown: selfOK})
}
