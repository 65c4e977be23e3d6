package watch

import (
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
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

// serverStatement turns a performance_schema row into a statement event for
// the server-only mode (no capture): only server_us is known. The SQL shown
// is the server's digest text, literals already replaced.
func serverStatement(r *collect.ServerStatement) *event.Statement {
	s := &event.Statement{
		ConnID: r.ConnID, DB: r.Schema, Cmd: commandOf(r.EventName),
		SQL: r.DigestText, Digest: r.Digest, DigestText: r.DigestText,
		TReqFirst: r.StartUS, TReqLast: r.StartUS,
		ServerUS: int64(r.TimerWait / collect.PicosPerMicro), Rows: r.RowsSent,
		RowsExamined: r.RowsExamined, LockUS: int64(r.LockTimePS / collect.PicosPerMicro),
		Notes: []string{event.NoCapture.Text()}, Why: event.NoCapture,
	}
	if r.MySQLErrno != 0 {
		s.Error = &event.Error{Code: uint16(r.MySQLErrno)}
	}
	return s
}

// commandOf maps an event name to the protocol command that produced it.
func commandOf(eventName string) string {
	switch {
	case strings.HasPrefix(eventName, "statement/sql/"):
		return "COM_QUERY"
	case eventName == "statement/com/Execute":
		return "COM_STMT_EXECUTE"
	case eventName == "statement/com/Prepare":
		return "COM_STMT_PREPARE"
	case strings.HasPrefix(eventName, "statement/com/"):
		return "COM_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(eventName, "statement/com/"), " ", "_"))
	}
	return eventName
}
