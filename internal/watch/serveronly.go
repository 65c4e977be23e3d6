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

// serverOnly turns the run into a server-only one, why saying what took
// the wire away: the profile ranks digests by the server's time, names
// what the wire would have added as unknown, and a note says so.
func (e *engine) serverOnly(why string) {
	e.noWire = true
	e.sink.mu.Lock()
	e.sink.profile = report.NewProfile(report.ProfileOptions{Metric: report.ServerLatency,
		MetricLabel: ServerOnlyMetric, Unknown: wireUnknown})
	e.sink.serverOnly = true
	e.sink.mu.Unlock()
	e.notes.add("%s: the profile is the server's time (performance_schema TIMER_WAIT); what the wire would add (%s) is unknown",
		why, strings.Join(wireUnknown, ", "))
}
