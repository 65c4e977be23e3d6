package watch

import (
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// serverStatement turns a performance_schema row into a statement event for
// the server-only mode (no capture): only server_us is known. The SQL shown
// is the server's digest text, literals already replaced.
func serverStatement(r *collect.ServerStatement) *event.Statement {
	s := &event.Statement{
		ConnID: r.ConnID, DB: r.Schema, Cmd: commandOf(r.EventName),
		SQL: r.DigestText, Digest: r.Digest, DigestText: r.DigestText,
		TReqFirst: r.StartUS, TReqLast: r.StartUS,
		ServerUS: int64(r.TimerWait / collect.PicosPerMicro), Rows: r.RowsSent,
		Notes: []string{"server only: no wire capture"},
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
