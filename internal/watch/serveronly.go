package watch

import (
	"strings"

	"github.com/gapscope/gapscope/internal/report"
)

// ServerOnlyMetric names the ranking of a run without the wire: the
// server's own time, TIMER_WAIT of its statement history.
const ServerOnlyMetric = "server time (performance_schema), no wire"

// wireUnknown are what only the wire shows of a statement: without it they
// are unknown, and must not read as zero.
var wireUnknown = []string{"queue", "send stall", "delivery", "client time", report.UnknownRespBytes}

// noteServerOnly says why the run is server-only (what took the wire
// away): the profile ranks digests by the server's time (the tally's,
// made so) and names what the wire would have added as unknown.
func noteServerOnly(notes *noteList, why string) {
	notes.add("%s: the profile is the server's time (performance_schema TIMER_WAIT); what the wire would add (%s) is unknown",
		why, strings.Join(wireUnknown, ", "))
}

// serverOnlyProfile ranks digests by the server's time, for a run without
// the wire.
func serverOnlyProfile() *report.Profile {
	return report.NewProfile(report.ProfileOptions{Metric: report.ServerLatency,
		MetricLabel: ServerOnlyMetric, Unknown: wireUnknown})
}
