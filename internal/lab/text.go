package lab

import (
	"fmt"
	"io"

	"github.com/gapscope/gapscope/internal/report"
)

// WriteText prints what the scenario did, what gapscope saw and its
// findings.
func (r *Result) WriteText(out io.Writer) error {
	fmt.Fprintf(out, "\ngapscope lab %s (%s, %s)\n\nsettings: %v\n\nwhat gapscope saw:\n", r.Scenario, r.Server, r.Elapsed.Round(100_000_000), r.Settings)
	for _, s := range r.Seen {
		fmt.Fprintf(out, "  - %s\n", s)
	}
	fmt.Fprintln(out, "\nfindings:")
	if err := report.WriteFindingsBrief(out, r.Findings); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "\n(--format json shows every statement and all the evidence)")
	return err
}

// Held counts the conditions that hold.
func (rep *FieldReport) Held() int {
	held := 0
	for _, c := range rep.Conditions {
		if c.Holds {
			held++
		}
	}
	return held
}
