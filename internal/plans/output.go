package plans

import (
	"fmt"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
)

// Output is the plans command's result, its --format json document.
type Output struct {
	Stats    Stats           `json:"stats"`
	Plans    []Caught        `json:"plans"`
	Raised   []event.Finding `json:"raised"`   // every PLAN_FLIP raised during the run
	Findings []event.Finding `json:"findings"` // those still open at the end
}

// WriteText prints the counts, the plans caught and the findings still
// open.
func (d Output) WriteText(w io.Writer) error {
	s := d.Stats
	fmt.Fprintf(w, "polls %d, live plans %d (%d ended first), SHOW ANALYZE %d, EXPLAIN %d, traces %d, rate-limited %d, refused %d, errors %d\n",
		s.Polls, s.LivePlans, s.Ended, s.LiveAnalyzes, s.Explains, s.Traces, s.RateLimited, s.Refused, s.Errors)
	if s.History == "" {
		fmt.Fprintln(w, "no statement history: usual plans come only from fast executions seen in the processlist; turn on the events_statements_current and events_statements_history_long consumers")
	}
	if s.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", s.LastError)
	}
	fmt.Fprintf(w, "\nplans caught:\n")
	if len(d.Plans) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, p := range d.Plans {
		fmt.Fprintf(w, "  %s  %-7s %-17s %9s  %s  [%s] %s\n", time.UnixMicro(p.TimeUS).Format("15:04:05.000"), p.Role, p.Source,
			report.Micros(p.ElapsedUS), p.Signature, p.Digest, clip(p.DigestText, 80))
	}
	fmt.Fprintf(w, "\nPLAN_FLIP raised: %d, still open: %d\n\n", len(d.Raised), len(d.Findings))
	return report.WriteFindingsText(w, d.Findings)
}
