package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// workloadRows are the table's rows: case name and label, in order.
var workloadRows = []struct{ name, label string }{
	{"seq", "enqueue, 1 producer (jobs/s)"},
	{"conc", "enqueue, 50 producers (jobs/s)"},
	{"bulk", "bulk, 1,000 a call (jobs/s)"},
	{"drain50", "drain, 50 handlers (jobs/s)"},
	{"drain500", "drain, 500 handlers (jobs/s)"},
	{"lat", "latency at 1,000 jobs/s, p50 / p99 (ms)"},
}

// printTable reads result lines and writes a markdown table of the
// median of each system's repetitions per workload. Columns come in the
// order the systems first appear; a cell is "n/a" when the client offers
// no call for the workload, "error" when every repetition failed, and
// "—" when the workload was not run.
func printTable(in io.Reader, out io.Writer) error {
	var systems []string
	runs := map[string]map[string][]result{} // system → case → results
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.System == "" {
			continue // not a result line
		}
		if runs[r.System] == nil {
			runs[r.System] = map[string][]result{}
			systems = append(systems, r.System)
		}
		runs[r.System][r.Case] = append(runs[r.System][r.Case], r)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	fmt.Fprint(out, "| workload |")
	for _, s := range systems {
		fmt.Fprintf(out, " %s |", s)
	}
	fmt.Fprint(out, "\n|---|")
	for range systems {
		fmt.Fprint(out, "---:|")
	}
	fmt.Fprintln(out)
	for _, w := range workloadRows {
		fmt.Fprintf(out, "| %s |", w.label)
		for _, s := range systems {
			fmt.Fprintf(out, " %s |", cell(w.name, runs[s][w.name]))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// cell is the median of the successful repetitions of one workload.
func cell(caseName string, rs []result) string {
	var ok []result
	na := false
	for _, r := range rs {
		switch {
		case r.NA:
			na = true
		case r.Error == "":
			ok = append(ok, r)
		}
	}
	switch {
	case na:
		return "n/a"
	case len(rs) == 0:
		return "—"
	case len(ok) == 0:
		return "error"
	}
	failed := ""
	if len(ok) < len(rs) {
		failed = fmt.Sprintf(" (%d of %d failed)", len(rs)-len(ok), len(rs))
	}
	if caseName == "lat" {
		p50 := median(ok, func(r result) float64 { return r.P50ms })
		p99 := median(ok, func(r result) float64 { return r.P99ms })
		return fmt.Sprintf("%s / %s%s", fmtMS(p50), fmtMS(p99), failed)
	}
	return thousands(median(ok, func(r result) float64 { return r.JobsPerSec })) + failed
}

func median(rs []result, f func(result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	sort.Float64s(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// fmtMS prints milliseconds with three significant digits or more.
func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return thousands(v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// thousands rounds v and groups its digits by three with commas.
func thousands(v float64) string {
	digits := []byte(fmt.Sprintf("%.0f", v))
	var out []byte
	for i := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, digits[i])
	}
	return string(out)
}
