package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// PrintPresetPlan lists the configurations a preset will run, with their
// job counts, before it starts: a block of two lines each, the number and
// name, then the settings, no line wider than maxWidth.
func PrintPresetPlan(w io.Writer, name string, base Options) {
	cases, err := presetCases(name)
	if err != nil {
		return
	}
	target := "a fresh embedded server each (sync " + orDefaultString(base.Sync, "full") + ")"
	if base.Server != "" {
		target = base.Server
	}
	printWrapped(w, "", "  ", fmt.Sprintf("spool bench --preset %s: %d configurations against %s", name, len(cases), target))
	for i, c := range cases {
		if c.shared != "" {
			continue
		}
		fmt.Fprintf(w, "%4d  %s\n", i+1, c.name)
		o, err := c.opts.withDefaults()
		if err != nil {
			printWrapped(w, "      ", "      ", err.Error())
			continue
		}
		printWrapped(w, "      ", "      ", o.Mode+": "+describePlanned(o))
	}
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
// ones, then its ratios, then the setups of the published figures, their
// sources, and any run that had errors or ran on a busy machine; no line
// is wider than maxWidth. The rows are numbered as in the plan.
func PrintPreset(w io.Writer, p *PresetResult) {
	if n := p.Errors(); n > 0 || p.Interrupted != "" {
		printWrapped(w, "", "    ", fmt.Sprintf("!!! %s — SEE BELOW !!!", presetWarning(p)))
		fmt.Fprintln(w)
	}
	head := fmt.Sprintf("spool bench --preset %s — %s server", p.Preset, p.Server)
	if p.Sync != "" {
		head += ", sync " + p.Sync
	}
	printWrapped(w, "", "  ", fmt.Sprintf("%s, %d CPUs, %.0f s in all", head, p.CPUs, p.Seconds))
	fmt.Fprintln(w)

	sources := map[string]int{}
	var order []string
	tab := table{header: []string{"#", "configuration", "spool jobs/s", "spool MB/s", "server CPU", "errors", "pub. msg/s", "pub. MB/s", "src"},
		left: map[int]bool{1: true}}
	var setups []string
	stopped := false
	for i, r := range p.Runs {
		spool, spoolMB, cpu, errs := "failed", "", "", ""
		switch {
		case r.Error != "":
			errs = "-"
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
				spool += " *"
				stopped = true
			}
		}
		if r.SameRunAs != "" {
			cpu, errs = "″", "″"
		}
		published, publishedMB, src := "n/a", "n/a", ""
		if ref := r.Reference; ref != nil {
			if ref.Figure != nil {
				published = thousands(*ref.Figure)
			}
			if ref.FigureMBps != nil {
				publishedMB = formatMBps(*ref.FigureMBps)
			}
			if sources[ref.Source] == 0 {
				order = append(order, ref.Source)
				sources[ref.Source] = len(order)
			}
			src = fmt.Sprintf("[%d]", sources[ref.Source])
			setups = append(setups, fmt.Sprintf("%4d  ", i+1), ref.Setup+" "+src)
		}
		tab.rows = append(tab.rows, []string{fmt.Sprint(i + 1), r.Name, spool, spoolMB, cpu, errs, published, publishedMB, src})
	}
	tab.print(w)
	if stopped {
		fmt.Fprintln(w, "  * the run stopped early (see below)")
	}
	fmt.Fprintln(w, "  pub.: the published figure, in its source's units; ″: a second figure of an earlier row's run")
	if len(p.Ratios) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range p.Ratios {
		printWrapped(w, "", "  ", formatRatio(r, p.Runs))
	}

	if len(setups) > 0 {
		fmt.Fprintln(w, "\nSetups of the published figures, by row ([n]: the source below):")
		for i := 0; i < len(setups); i += 2 {
			printWrapped(w, setups[i], "      ", setups[i+1])
		}
	}
	fmt.Fprintln(w, "\nSources (figures as published, on their hardware — not measured here):")
	for i, src := range order {
		for _, r := range p.Runs {
			if r.Reference != nil && r.Reference.Source == src {
				printWrapped(w, fmt.Sprintf("  [%d] ", i+1), "      ", src)
				printWrapped(w, "      ", "        ", r.Reference.System+"; "+r.Reference.Hardware)
				if r.Reference.Note != "" {
					printWrapped(w, "      ", "        ", "Note: "+r.Reference.Note)
				}
				break
			}
		}
	}
	fmt.Fprintln(w, "  n/a: the source publishes no figure for that configuration.")
	printWrapped(w, "", "", "Spool's figures are jobs a second in the timed window: enqueued in the enqueue modes and the push rows, "+
		"acked (processed) elsewhere. Other machines, other durability settings: compare orders of magnitude, not digits.")
	printWrapped(w, "", "", "Spool's MB/s are jobs/s × payload bytes / 1,000,000: payload bytes only (the plan gives each configuration's payload), "+
		"not the JSON and HTTP around them. Published MB/s are as their source counts them: see its note.")

	var busy []string
	for _, r := range p.Runs {
		if res := r.Result; res != nil {
			for _, m := range []*MachineLoad{res.MachineBefore, res.MachineDuring} {
				if m != nil && m.Busy {
					busy = append(busy, r.Name+": "+m.describe())
				}
			}
		}
	}
	if len(busy) > 0 {
		fmt.Fprintln(w, "\nRuns on a busy machine (their figures are lower than on an idle one):")
		for _, b := range busy {
			printWrapped(w, "  ", "    ", b)
		}
	}

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
		fmt.Fprintln(w)
		printWrapped(w, "", "    ", fmt.Sprintf("!!! %s !!!", presetWarning(p)))
		if p.Interrupted != "" {
			printWrapped(w, "  ", "    ", p.Interrupted)
		}
		for _, b := range bad {
			printWrapped(w, "  ", "    ", b)
		}
	}
}

// table is a table of text cells, numbers right-aligned under their
// headers and the columns in left left-aligned, two spaces apart.
type table struct {
	header []string
	rows   [][]string
	left   map[int]bool
}

func (t table) print(w io.Writer) {
	width := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range append([][]string{t.header}, t.rows...) {
		var b strings.Builder
		for i, c := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			if t.left[i] {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				fmt.Fprintf(&b, "%*s", width[i], c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
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
