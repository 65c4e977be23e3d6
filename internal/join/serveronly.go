package join

import (
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// ServerOnly turns a server row into a statement event of its own, for a
// statement no wire statement can have: the run has no capture, or its
// client was not on the captured wire (why says which). Only the server's
// side is known: server_us, rows, the digest, and the statement's text
// from the row's SQL_TEXT, which text redacts as the capture redacts a
// wire statement's; the client's times are unknown, not zero.
func ServerOnly(r *collect.ServerStatement, why event.Reason, text *ServerText) *event.Statement {
	if StreamEvent(r.EventName) {
		why = event.ReplicaStream // a replica's binlog stream, whatever kept it off the wire
	}
	s := &event.Statement{
		ConnID: r.ConnID, DB: r.Schema, Cmd: commandOf(r.EventName),
		Digest: r.Digest, DigestText: r.DigestText,
		TReqFirst: r.StartUS, TReqLast: r.StartUS,
		ServerUS: int64(r.TimerWait / collect.PicosPerMicro), Rows: r.RowsSent,
		RowsExamined: r.RowsExamined, LockUS: int64(r.LockTimePS / collect.PicosPerMicro),
		Notes: []string{why.Text()}, Why: why,
	}
	text.fill(s, r)
	if r.MySQLErrno != 0 {
		s.Error = &event.Error{Code: uint16(r.MySQLErrno)}
	}
	return s
}

// Notes of a server-only statement's text.
const (
	noteTextCutByServer = "statement text cut by performance_schema (performance_schema_max_sql_text_length): sql holds its start, cut at \"...\""
	noteTextCutByRead   = "statement text cut: watch read its first characters and the row left performance_schema before it was read whole; sql holds its start, cut at \"...\""
	noteTextFromDigest  = "statement text unknown (performance_schema kept too little of it): sql is the server's digest text"
)

// ServerText gives server-only statements their text, the way the capture
// gives a wire statement its own: by default the text normalised (gapscope's
// digest text, literals replaced by ?) followed by its trailing
// sqlcommenter comment, with KeepLiterals the text as the client sent it.
// A text performance_schema cut short is shown cut, with a note; only a
// text that is empty, or whose cut left no SQL at all, gives way to the
// server's digest text. It is not safe for concurrent use.
type ServerText struct {
	keep bool
	norm *sqltext.Normalizer
}

// NewServerText returns a ServerText that keeps literals when keepLiterals.
func NewServerText(keepLiterals bool) *ServerText {
	return &ServerText{keep: keepLiterals, norm: sqltext.NewNormalizer(sqltext.DefaultCacheSize)}
}

// fill sets s's SQL, and its fingerprint and tags when the text is whole.
func (t *ServerText) fill(s *event.Statement, r *collect.ServerStatement) {
	raw := r.SQLText
	if raw == "" {
		s.SQL = r.DigestText // a command without text (Ping, Execute on MariaDB), or the digest alone
		return
	}
	if !sqlCommand(s.Cmd) {
		s.SQL = raw // a schema or table name: no literals (as the capture's)
		return
	}
	cut := r.TextCut != collect.TextWhole
	body := raw
	if cut {
		body = strings.TrimSuffix(raw, "...") // the server's cut mark, or a read's cut
	}
	digestText, digest := t.norm.Normalize([]byte(body))
	if digestText == "" { // nothing but a comment (cut inside one) or white space
		s.SQL = r.DigestText
		if cut && r.DigestText != "" {
			s.Notes = append(s.Notes, noteTextFromDigest)
		}
		return
	}
	if s.Digest == "" { // no digest from the server (statements_digest off): gapscope's own
		s.Digest, s.DigestText = digest, digestText
	}
	switch {
	case cut && t.keep:
		s.SQL = body + "..."
	case cut:
		s.SQL = digestText + " ..."
	case t.keep:
		s.SQL = raw
	default:
		s.SQL = digestText
	}
	if cut {
		note := noteTextCutByServer
		if r.TextCut == collect.TextCutByRead {
			note = noteTextCutByRead
		}
		s.Notes = append(s.Notes, note)
		return // a cut text's shape is not the statement's: exporters key on the server's digest text
	}
	comment, tags := sqltext.Comment([]byte(raw))
	if !t.keep && comment != "" {
		s.SQL += " " + comment // the digest text drops comments; the application's context stays
	}
	s.Fingerprint, s.Tags = digest, tags
}

// sqlCommand reports whether a command's text is SQL, whose literals are
// redacted (the capture's COM_QUERY, COM_STMT_PREPARE, COM_STMT_EXECUTE).
func sqlCommand(cmd string) bool {
	return cmd == "COM_QUERY" || cmd == "COM_STMT_PREPARE" || cmd == "COM_STMT_EXECUTE"
}

// StreamEvent reports whether a server row is a replica's binlog stream
// (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID): no statement.
func StreamEvent(eventName string) bool {
	return eventName == "statement/com/Binlog Dump" || eventName == "statement/com/Binlog Dump GTID"
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
