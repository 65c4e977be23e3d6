package join

import (
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// ServerOnly turns a server row into a statement event of its own, for a
// statement no wire statement can have: the run has no capture, or its
// client was not on the captured wire (why says which). Only the server's
// side is known: server_us, rows, the digest (the SQL shown is the
// server's digest text, literals already replaced); the client's times
// are unknown, not zero.
func ServerOnly(r *collect.ServerStatement, why event.Reason) *event.Statement {
	s := &event.Statement{
		ConnID: r.ConnID, DB: r.Schema, Cmd: commandOf(r.EventName),
		SQL: r.DigestText, Digest: r.Digest, DigestText: r.DigestText,
		TReqFirst: r.StartUS, TReqLast: r.StartUS,
		ServerUS: int64(r.TimerWait / collect.PicosPerMicro), Rows: r.RowsSent,
		RowsExamined: r.RowsExamined, LockUS: int64(r.LockTimePS / collect.PicosPerMicro),
		Notes: []string{why.Text()}, Why: why,
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
