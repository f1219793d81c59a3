package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spoolq/spool/internal/humanize"
)

// Print writes res as a table for people, no line wider than maxWidth. A
// run with errors, or one that stopped early, says so first and last, in
// capitals.
func Print(w io.Writer, res *Result) {
	warn := warning(res)
	if warn != "" {
		printWrapped(w, "", "    ", warn)
	}
	head := fmt.Sprintf("spool bench %s — %s server", res.Mode, res.Server)
	if res.Sync != "" {
		head += ", sync " + res.Sync
	}
	if res.Transport != "" {
		head += ", transport " + res.Transport
	}
	printWrapped(w, "", "  ", fmt.Sprintf("%s, %d CPUs", head, res.CPUs))
	printWrapped(w, "  ", "  ", describeSettings(res))
	fmt.Fprintln(w)

	printField(w, "elapsed", fmt.Sprintf("%.2f s", res.Seconds))
	printField(w, "jobs", fmt.Sprintf("%s enqueued, %s processed", thousands(float64(res.Enqueued)), thousands(float64(res.Processed))))
	printField(w, "throughput", fmt.Sprintf("%s jobs/s   %s requests/s", thousands(res.JobsPerSec), thousands(res.OpsPerSec)))
	if res.Efficiency != nil {
		printField(w, "efficiency", fmt.Sprintf("%.1f%% of the theoretical %s jobs/s (workers × concurrency / work)",
			100**res.Efficiency, thousands(*res.TheoreticalJobsPerSec)))
	}
	printField(w, "server CPU", fmt.Sprintf("%s   peak RSS %s (sampled max %s)",
		orUnknown(res.ServerCPUPercent, "%.0f%%"), orUnknown(res.ServerPeakRSSMB, "%.1f MB"), orUnknown(res.ServerSampledRSSMB, "%.1f MB")))
	printField(w, "client CPU", fmt.Sprintf("%s   peak RSS %s", orUnknown(res.ClientCPUPercent, "%.0f%%"), orUnknown(res.ClientPeakRSSMB, "%.1f MB")))
	for _, m := range []*MachineLoad{res.MachineBefore, res.MachineDuring} {
		if m != nil && m.Busy {
			printField(w, "machine", m.describe())
		}
	}
	printField(w, "errors", fmt.Sprint(res.Errors))
	if o := res.Observers; o != nil {
		if o.ScrapeEvery != "" {
			lat := "no answer"
			if s := o.ScrapeLatency; s != nil {
				lat = fmt.Sprintf("p50 %.2f ms, max %.2f ms", s.P50, s.Max)
			}
			printField(w, "metrics", fmt.Sprintf("scraped every %s: %d scrapes (%s), %s KiB each", o.ScrapeEvery, o.Scrapes, lat, thousands(float64(o.ScrapeBytes)/1024)))
		}
		if o.Watched {
			printField(w, "events", fmt.Sprintf("watched: %s events read, %d drops", thousands(float64(o.Events)), o.Drops))
		}
		if o.DashboardLoads > 0 {
			printField(w, "dashboard", fmt.Sprintf("overview reloaded %d times (every %v)", o.DashboardLoads, DashboardRefresh))
		}
		if o.Failures > 0 {
			printField(w, "observers", fmt.Sprintf("%d failed requests", o.Failures))
		}
	}
	if v := res.Verification; v != nil {
		verdict := "ok"
		if !v.OK {
			verdict = "MISMATCH"
		}
		printField(w, "server counts", fmt.Sprintf("%s: %s (expected %d)", verdict, formatCounts(v.Counts), v.Expected))
	}

	printLatencies(w, res.Latency)
	if res.Latency.Fetch != nil {
		printWrapped(w, "", " ", fmt.Sprintf("(fetches long-poll up to %d ms when no job is ready, so their latency includes waiting for work)", fetchWaitMS))
	}
	if res.Mode == ModeLatency {
		printWrapped(w, "", " ", "(latency mode measures from each job's send, or from its scheduled send time when its sender was behind, so stalls are not hidden)")
	}
	if len(res.ServerLog) > 0 {
		fmt.Fprintln(w, "\nserver log:")
		for _, l := range res.ServerLog {
			printWrapped(w, "  ", "    ", l)
		}
	}
	if warn != "" {
		fmt.Fprintln(w)
		printWrapped(w, "", "    ", strings.Replace(warn, "FIGURES BELOW", "FIGURES ABOVE", 1))
		for _, s := range res.ErrorSamples {
			printWrapped(w, "  ", "    ", s)
		}
	}
}

// printLatencies writes the latency table, one row per kind measured.
func printLatencies(w io.Writer, l Latencies) {
	rows := []struct {
		name string
		s    *LatencyStats
	}{
		{"enqueue request", l.Enqueue},
		{"fetch request", l.Fetch},
		{"ack request", l.Ack},
		{"enqueue → start", l.Start},
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, row := range rows {
		s := row.s
		if s == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(tw, "latency ms\tavg\tp50\tp99\tp99.9\tmax\tcount\t")
			header = true
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t\n", row.name, s.Avg, s.P50, s.P99, s.P999, s.Max, s.Count)
	}
	tw.Flush()
}

// warning is the loud line of a run that had errors or stopped early, or
// "" for a clean run.
func warning(res *Result) string {
	var parts []string
	if res.Errors > 0 {
		parts = append(parts, fmt.Sprintf("THIS RUN HAD %d ERRORS", res.Errors))
	}
	if res.Interrupted != "" {
		parts = append(parts, "IT STOPPED EARLY ("+strings.ToUpper(res.Interrupted)+")")
	}
	if len(parts) == 0 {
		return ""
	}
	return "!!! " + strings.Join(parts, "; ") + " — THE FIGURES BELOW ARE NOT A CLEAN MEASUREMENT !!!"
}

func describeSettings(res *Result) string {
	s := res.Settings
	var parts []string
	if s.Jobs > 0 {
		parts = append(parts, thousands(float64(s.Jobs))+" jobs")
	}
	if s.Duration != "" {
		parts = append(parts, "for "+s.Duration)
	}
	switch res.Mode {
	case ModeEnqueue:
		parts = append(parts, plural(s.Concurrency, "client"))
	case ModeEnqueueBatch:
		parts = append(parts, fmt.Sprintf("%s × batch %d", plural(s.Concurrency, "client"), s.Batch))
	case ModeProcess:
		parts = append(parts, fmt.Sprintf("%s × concurrency %d", plural(s.Workers, "worker"), s.Concurrency), fmt.Sprintf("prefill batch %d", s.Batch))
	case ModeLifecycle:
		parts = append(parts, fmt.Sprintf("%s × batch %d", plural(s.Producers, "producer"), s.Batch), fmt.Sprintf("%s × concurrency %d", plural(s.Workers, "worker"), s.Concurrency))
	case ModeLatency:
		parts = append(parts, fmt.Sprintf("rate %s/s from %s", strconv.FormatFloat(s.Rate, 'f', -1, 64), plural(s.Producers, "sender")), fmt.Sprintf("%s × concurrency %d", plural(s.Workers, "worker"), s.Concurrency))
	}
	if s.Work != "" {
		parts = append(parts, "work "+s.Work)
	}
	parts = append(parts, plural(s.Queues, "queue"), fmt.Sprintf("payload %d B", s.PayloadBytes))
	return strings.Join(parts, " · ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(float64(n)) + " " + noun + "s"
}

func orUnknown(v *float64, format string) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprintf(format, *v)
}

func formatCounts(c map[string]int64) string {
	var parts []string
	for _, state := range []string{"scheduled", "available", "active", "retrying", "completed", "dead", "cancelled"} {
		if c[state] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", state, c[state]))
		}
	}
	if len(parts) == 0 {
		return "no jobs"
	}
	return strings.Join(parts, ", ")
}

// thousands formats v rounded to an integer with thousands separators.
func thousands(v float64) string { return humanize.Int(int64(math.Round(v))) }
