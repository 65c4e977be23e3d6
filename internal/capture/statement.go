package capture

import (
	"net/netip"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// COM_* codes whose text is SQL (normalised into a digest).
const (
	comQuery       = 0x03
	comStmtPrepare = 0x16
	comStmtExecute = 0x17
)

// Notes attached to statements (static strings).
const (
	noteMidStream  = "capture started mid-connection"
	noteIncomplete = "incomplete: the response did not complete before the connection ended"
	noteNoText     = "statement text unknown: prepared before the capture started"
	noteTLS        = "tls: no sql text"
)

func formatEndpoint(e endpoint) string {
	return netip.AddrPortFrom(netip.AddrFrom16(e.ip).Unmap(), e.port).String()
}

// OnExchange turns one decoded exchange into a statement (mysqlproto.Handler).
func (f *flow) OnExchange(ex *mysqlproto.Exchange, info *mysqlproto.ConnInfo) {
	retrans := f.retrans
	f.retrans = 0
	var stalls []event.Span
	var stallUS int64
	if respLast := ex.RespLast; respLast != 0 {
		if f.ans.skipped > 0 && f.ans.lastUS > respLast {
			respLast = f.ans.lastUS // a header-only answer's end not fed to the decoder
		}
		stalls, stallUS = f.win.stalls(ex.ReqLast, respLast)
	}
	if sqltext.IsOwn(ex.SQL) {
		f.own = true
		f.t.stats.OwnStatements++
		return
	}
	s := f.newStatement(info)
	s.Cmd = ex.CmdName
	f.t.setSQL(s, ex)
	setTimes(s, ex.ReqFirst, ex.ReqLast, ex.RespFirst, ex.RespLast)
	s.Rows, s.ReqBytes, s.RespBytes = ex.Rows, ex.ReqBytes, ex.RespBytes
	if ex.Err != nil {
		s.Error = &event.Error{Code: ex.Err.Code, State: ex.Err.State, Msg: ex.Err.Msg}
		if !f.t.opts.KeepLiterals { // messages quote the values the SQL carried
			s.Error.Msg = sqltext.RedactMessage(s.Error.Msg)
		}
	}
	f.headStatement(s, ex)
	setStalls(s, stalls, stallUS)
	s.Retransmits = retrans
	s.Notes = addNote(s.Notes, ex.Note)
	if ex.Incomplete {
		s.Notes = addNote(s.Notes, noteIncomplete)
		rootCause(s, event.Incomplete)
	}
	if ex.Cmd == comStmtExecute && len(ex.SQL) == 0 {
		s.Notes = addNote(s.Notes, noteNoText)
		rootCause(s, event.NoText)
	}
	f.txn.place(s, ex)
	f.t.stats.Statements++
	f.t.emit(s)
}

// newStatement fills what the connection knows.
func (f *flow) newStatement(info *mysqlproto.ConnInfo) *event.Statement {
	s := f.t.newEvent()
	s.Conn = f.conn
	if info != nil {
		s.ConnID, s.User, s.DB = uint64(info.ConnID), info.User, info.DB
	}
	if f.midStream {
		s.Notes = addNote(s.Notes, noteMidStream)
		rootCause(s, event.MidStream)
	}
	if crossesLink(f.point) {
		s.TransitUS = f.path.transitUS()
	}
	return s
}

// newEvent returns a zeroed statement. Statements come from blocks
// (event.Slabs): one allocation of a header-typed block instead of one per
// statement, whose heap bits the allocator wrote word by word (malloc and
// the collector's sweep of the 448-byte objects were about a tenth of the
// tracker's CPU), and a block comes back for reuse when the statements'
// consumer (watch) releases all of them.
func (t *Tracker) newEvent() *event.Statement { return t.slabs.New() }

func setTimes(s *event.Statement, reqFirst, reqLast, respFirst, respLast int64) {
	s.TReqFirst, s.TReqLast, s.TRespFirst, s.TRespLast = reqFirst, reqLast, respFirst, respLast
	s.RequestUS = reqLast - reqFirst
	if respLast != 0 {
		s.ClientUS = respLast - reqFirst
	}
}

// setSQL fills SQL, Digest and DigestText. SQL is the digest text (literals
// redacted) unless KeepLiterals; then COM_STMT_EXECUTE gets its parameters
// interpolated into the prepared text. A replica's binlog stream is marked
// as such (markStream).
func (t *Tracker) setSQL(s *event.Statement, ex *mysqlproto.Exchange) {
	if ex.Stream {
		markStream(s)
	}
	if len(ex.SQL) == 0 {
		return
	}
	switch ex.Cmd {
	case comQuery, comStmtPrepare, comStmtExecute:
	default:
		s.SQL = string(ex.SQL) // a schema or table name: no literals
		return
	}
	d := t.derive(ex)
	s.DigestText, s.Digest, s.Fingerprint, s.Tags = d.digestText, d.digest, d.digest, d.tags
	if ex.Cmd == comQuery {
		s.TextHash = sqltext.TextHash(ex.SQL) // names an ended thread's row by its literals
	}
	comment := d.comment
	switch {
	case !t.opts.KeepLiterals && comment != "":
		s.SQL = s.DigestText + " " + comment // the digest text drops comments; the application's context stays
	case !t.opts.KeepLiterals:
		s.SQL = s.DigestText
	case ex.Cmd == comStmtExecute && ex.Params != nil:
		t.sqlBuf = interpolateParams(t.sqlBuf[:0], ex.SQL, ex.Params)
		s.SQL = string(t.sqlBuf)
	default:
		s.SQL = string(ex.SQL)
	}
}

// derived is what a statement's text gives: its digest and its trailing
// comment's tags.
type derived struct {
	digestText, digest, comment string
	tags                        map[string]string
}

// derive normalises ex's text, once per prepared statement: an execute
// finds what an earlier one derived in the statement's memo (the digest
// cache would cost a hash of the text and a lookup in a large map on every
// execute). The tags map is then shared by the statement's executes.
func (t *Tracker) derive(ex *mysqlproto.Exchange) derived {
	if ex.Memo != nil {
		if d, ok := (*ex.Memo).(*derived); ok {
			return *d
		}
	}
	var d derived
	d.digestText, d.digest = t.norm.Normalize(ex.SQL)
	d.comment, d.tags = sqltext.Comment(ex.SQL)
	if ex.Memo != nil {
		*ex.Memo = &d
	}
	return d
}

// markStream marks a replica's binlog stream, emitted when it began: not
// a statement, so its reason replaces whatever else the capture found,
// and keeps it out of the join and of every latency figure.
func markStream(s *event.Statement) {
	s.Why = event.ReplicaStream
	s.Notes = addNote(s.Notes, event.ReplicaStream.Text())
}

// rootCause records why s would not join, should the join fail: the
// first condition the capture found is kept.
func rootCause(s *event.Statement, r event.Reason) {
	if s.Why == event.ReasonNone {
		s.Why = r
	}
}

func addNote(notes []string, n string) []string {
	if n == "" || slices.Contains(notes, n) {
		return notes
	}
	if notes == nil {
		// Room for the notes a statement usually gathers (the capture's, then
		// the join's and watch's reason for no row): one allocation, where
		// growing by one would take a new slice per note on every statement
		// of a connection opened before the capture.
		notes = make([]string, 0, statementNotesCap)
	}
	return append(notes, n)
}

// statementNotesCap is the capacity of a statement's first notes slice.
const statementNotesCap = 4
