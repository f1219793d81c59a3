package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// PrintPresetPlan lists the configurations a preset will run, with their
// job counts, before it starts.
func PrintPresetPlan(w io.Writer, name string, base Options) {
	cases, err := presetCases(name)
	if err != nil {
		return
	}
	target := "a fresh embedded server each (sync " + orDefaultString(base.Sync, "full") + ")"
	if base.Server != "" {
		target = base.Server
	}
	fmt.Fprintf(w, "spool bench --preset %s: %d configurations against %s\n", name, len(cases), target)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range cases {
		if c.shared != "" {
			continue
		}
		o, err := c.opts.withDefaults()
		if err != nil {
			fmt.Fprintf(tw, "  %d\t%s\t%v\n", i+1, c.name, err)
			continue
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s: %s\n", i+1, c.name, o.Mode, describePlanned(o))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// describePlanned describes the settings of a configuration, with its
// groups and limits, which set configurations apart in a preset.
func describePlanned(o Options) string {
	s := settingsOf(o)
	d := describeSettings(&Result{Mode: o.Mode, Settings: s})
	if s.Groups > 0 {
		d += " · " + plural(s.Groups, "group")
	}
	if s.Limits != "" {
		d += " · " + s.Limits
	}
	return d
}

// PrintPreset writes a preset's figures side by side with the published
// ones, then its ratios, then the sources of the published figures, then
// any run that had errors.
func PrintPreset(w io.Writer, p *PresetResult) {
	if n := p.Errors(); n > 0 || p.Interrupted != "" {
		fmt.Fprintf(w, "!!! %s — SEE BELOW !!!\n\n", presetWarning(p))
	}
	fmt.Fprintf(w, "spool bench --preset %s — %s server", p.Preset, p.Server)
	if p.Sync != "" {
		fmt.Fprintf(w, ", sync %s", p.Sync)
	}
	fmt.Fprintf(w, ", %d CPUs, %.0f s in all\n\n", p.CPUs, p.Seconds)

	sources := map[string]int{}
	var order []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "configuration\tspool jobs/s\tspool MB/s\tserver CPU\terrors\tpublished msg/s\tpublished MB/s\tsetup [source]")
	for _, r := range p.Runs {
		spool, spoolMB, cpu, errs := "failed", "", "", ""
		switch {
		case r.Error != "":
			errs = "start failed"
		case r.Spool != nil:
			spool = thousands(*r.Spool)
		}
		if r.MBps != nil {
			spoolMB = formatMBps(*r.MBps)
		}
		if res := r.Result; res != nil {
			cpu = orUnknown(res.ServerCPUPercent, "%.0f%%")
			errs = fmt.Sprint(res.Errors)
			if res.Interrupted != "" {
				spool += " (stopped early)"
			}
		}
		if r.SameRunAs != "" {
			cpu, errs = "″", "″"
		}
		published, publishedMB := "n/a", "n/a"
		ref := ""
		if r.Reference != nil {
			if r.Reference.Figure != nil {
				published = thousands(*r.Reference.Figure)
			}
			if r.Reference.FigureMBps != nil {
				publishedMB = formatMBps(*r.Reference.FigureMBps)
			}
			key := r.Reference.Source
			if sources[key] == 0 {
				order = append(order, key)
				sources[key] = len(order)
			}
			ref = fmt.Sprintf("%s [%d]", r.Reference.Setup, sources[key])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, spool, spoolMB, cpu, errs, published, publishedMB, ref)
	}
	tw.Flush()
	if len(p.Ratios) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range p.Ratios {
		fmt.Fprintln(w, formatRatio(r, p.Runs))
	}

	fmt.Fprintln(w, "\nSources (figures as published, on their hardware — not measured here):")
	for i, src := range order {
		for _, r := range p.Runs {
			if r.Reference != nil && r.Reference.Source == src {
				fmt.Fprintf(w, "  [%d] %s\n      %s; %s\n", i+1, src, r.Reference.System, r.Reference.Hardware)
				if r.Reference.Note != "" {
					fmt.Fprintf(w, "      Note: %s\n", r.Reference.Note)
				}
				break
			}
		}
	}
	fmt.Fprintln(w, "  n/a: the source publishes no figure for that configuration.")
	fmt.Fprintln(w, "Spool's figures are jobs a second in the timed window: enqueued in the enqueue modes and the push rows,")
	fmt.Fprintln(w, "acked (processed) elsewhere. Other machines, other durability settings: compare orders of magnitude, not digits.")
	fmt.Fprintln(w, "Spool's MB/s are jobs/s × payload bytes / 1,000,000: payload bytes only (the plan gives each configuration's payload),")
	fmt.Fprintln(w, "not the JSON and HTTP around them. Published MB/s are as their source counts them: see its note.")

	var bad []string
	for _, r := range p.Runs {
		switch {
		case r.Error != "":
			bad = append(bad, fmt.Sprintf("%s: could not run: %s", r.Name, r.Error))
		case r.Result != nil && (r.Result.Errors > 0 || r.Result.Interrupted != ""):
			msg := fmt.Sprintf("%s: %d errors", r.Name, r.Result.Errors)
			if r.Result.Interrupted != "" {
				msg += ", " + r.Result.Interrupted
			}
			if len(r.Result.ErrorSamples) > 0 {
				msg += ": " + strings.Join(r.Result.ErrorSamples, " | ")
			}
			bad = append(bad, msg)
		}
	}
	if len(bad) > 0 || p.Interrupted != "" {
		fmt.Fprintf(w, "\n!!! %s !!!\n", presetWarning(p))
		if p.Interrupted != "" {
			fmt.Fprintln(w, "  "+p.Interrupted)
		}
		for _, b := range bad {
			fmt.Fprintln(w, "  "+b)
		}
	}
}

// formatRatio is the line of a ratio: the percentage and the two figures
// it comes from.
func formatRatio(r PresetRatio, runs []PresetRun) string {
	if r.Ratio == nil {
		return fmt.Sprintf("%s: n/a (a run has no figure)", r.Label)
	}
	var of, over float64
	for _, run := range runs {
		switch {
		case run.Name == r.Of && run.Spool != nil:
			of = *run.Spool
		case run.Name == r.Over && run.Spool != nil:
			over = *run.Spool
		}
	}
	return fmt.Sprintf("%s: %.0f %% (%s / %s jobs/s)", r.Label, 100**r.Ratio, thousands(of), thousands(over))
}

// formatMBps formats megabytes a second with two decimals, as the
// published figures are.
func formatMBps(v float64) string { return fmt.Sprintf("%.2f", v) }

func presetWarning(p *PresetResult) string {
	var parts []string
	if n := p.Errors(); n > 0 {
		parts = append(parts, fmt.Sprintf("THE PRESET HAD %d ERRORS", n))
	}
	if p.Interrupted != "" {
		parts = append(parts, "IT STOPPED EARLY")
	}
	return strings.Join(parts, "; ") + " — THOSE FIGURES ARE NOT A CLEAN MEASUREMENT"
}
