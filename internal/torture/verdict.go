package torture

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// Verdict is the outcome of one scenario run: whether it met its pass
// marks, and which it missed.
type Verdict struct {
	// Scenario names the scenario.
	Scenario string `json:"scenario"`
	// Pass is true when no pass mark was missed.
	Pass bool `json:"pass"`
	// Violations describe each missed pass mark.
	Violations []string `json:"violations,omitempty"`
	// Seconds is how long the run took.
	Seconds float64 `json:"seconds"`
}

// failf records a missed pass mark.
func (v *Verdict) failf(format string, args ...any) {
	v.Violations = append(v.Violations, fmt.Sprintf(format, args...))
}

// finish sets Pass and Seconds.
func (v *Verdict) finish(began time.Time) {
	v.Pass = len(v.Violations) == 0
	v.Seconds = seconds(time.Since(began))
}

// Failures returns the missed pass marks; empty when the run passed.
func (v *Verdict) Failures() []string { return v.Violations }

// Result is a scenario's report: a verdict plus its figures.
type Result interface {
	Failures() []string
}

// PrintJSON writes r as one line of JSON.
func PrintJSON(w io.Writer, r Result) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// logf writes a progress line to w when w is not nil.
func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "torture: "+format+"\n", args...)
	}
}

// seconds is d in seconds rounded to the millisecond, for reports.
func seconds(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000) / 1000
}

// mb is n bytes in MiB, for reports.
func mb(n int64) float64 {
	return float64(n*10/(1<<20)) / 10
}
