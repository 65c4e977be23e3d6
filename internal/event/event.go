// Package event holds the types every other gapscope package shares: the
// statement event (docs/events.md), server-side samples and findings. It imports
// only the standard library so that every layer can depend on it.
package event

import (
	"iter"
	"slices"
)

// Error is a server error returned to a statement (an ERR packet).
type Error struct {
	Code  uint16 `json:"code"`
	State string `json:"state"`
	Msg   string `json:"msg"`
}

// SchemaVersion is the version of the statement event's JSON form, written
// as "v" at the head of every line of an events file (docs/events.md). It
// changes when a field changes meaning or is removed, not when one is added.
const SchemaVersion = 1

// Statement is one client command and its response, as seen on the wire and,
// when joined, as recorded by the server. Times are Unix microseconds,
// durations microseconds. Field names are part of gapscope's interface.
type Statement struct {
	Conn       string `json:"conn"`
	ConnID     uint64 `json:"conn_id,omitempty"`
	User       string `json:"user,omitempty"`
	DB         string `json:"db,omitempty"`
	Cmd        string `json:"cmd"`
	SQL        string `json:"sql,omitempty"`
	Digest     string `json:"digest,omitempty"`
	DigestText string `json:"digest_text,omitempty"`

	TReqFirst  int64 `json:"t_req_first"`
	TReqLast   int64 `json:"t_req_last"`
	TRespFirst int64 `json:"t_resp_first,omitempty"`
	TRespLast  int64 `json:"t_resp_last,omitempty"`

	// Parts: the client time and its five parts (docs/events.md).
	Parts
	// ServerUS is the server's own time; written when known (Knows),
	// 0 included.
	ServerUS int64 `json:"server_us,omitempty"`
	// TransitUS is the one-way time between the capture point and the
	// server, measured from TCP when the capture is not on the server's
	// host (half the connection's smallest round trip): the request reaches
	// the server this long after t_req_last, the response left it this long
	// before t_resp_first.
	TransitUS int64 `json:"transit_us,omitempty"`

	Rows int64 `json:"rows"`
	// ReqBytes: written when known (Knows), 0 included.
	ReqBytes  int64  `json:"req_bytes,omitempty"`
	RespBytes int64  `json:"resp_bytes"`
	Error     *Error `json:"error"`

	// The server's lock time and rows examined: from a slow log, or a
	// server-only statement's performance_schema row; written when known
	// (Knows), 0 included, and left out for a wire statement, whose join
	// does not carry them.
	LockUS       int64 `json:"lock_us,omitempty"`
	RowsExamined int64 `json:"rows_examined,omitempty"`

	ZeroWindowUS int64 `json:"zero_window_us"`
	// ZeroWindows are the intervals during the response in which the client
	// advertised a zero (or full) receive window; join uses them to find the
	// part of server time spent unable to send.
	ZeroWindows []Span `json:"-"`
	Retransmits int    `json:"retransmits"`
	PoolGroup   *int   `json:"pool_group,omitempty"`
	Joined      bool   `json:"joined"`
	// JoinSource names the performance_schema table the server row came
	// from: events_statements_history_long (the periodic read),
	// events_statements_history or events_statements_current (reads of
	// the statement's own thread, for a statement that stood out), or
	// "events_statements_current (read while running; end from the wire)"
	// for one whose thread no longer kept its row (docs/events.md).
	JoinSource string `json:"join_source,omitempty"`
	// Outlier: the statement's client time stood out (watch's outlier
	// rule), so watch read its thread's history for it.
	Outlier bool `json:"outlier,omitempty"`
	// Notes are what limits the statement's numbers, as sentences. What
	// a code says is not among them: the reason's sentence (Why) and the
	// rows' (RowsBy) are rendered from their codes where the statement
	// is written (AllNotes), and read back into them (DecodeLine).
	Notes []string `json:"notes,omitempty"`
	// Fingerprint is gapscope's own digest of the wire text: unlike Digest,
	// which the join replaces with the server's DIGEST, it is the same for
	// a statement whether it joined or not, so exporters key on it.
	Fingerprint string `json:"fingerprint,omitempty"`
	// TextHash identifies the exact text sent (sqltext.TextHash, 0: none):
	// evidence for the join, never written.
	TextHash uint64 `json:"-"`
	// Tags are the sqlcommenter key='value' tags of the statement's
	// trailing comment (route, framework, W3C traceparent...). Read only:
	// the executes of one prepared statement share the map.
	Tags map[string]string `json:"tags,omitempty"`
	// Why names, when a half is missing or the split is withheld, the
	// reason (written as its stable name; its sentence is written among
	// the notes, Reason.Note): a wire statement left unjoined, a server
	// statement with no wire half (server-only), or a joined one whose
	// split the evidence cannot explain.
	Why Reason `json:"reason,omitempty"`
	// RowsBy says where Rows came from when the wire could not count them
	// (a header-only capture cut the answer); written as a note
	// (NoteRowsUnknown, NoteRowsFromServer).
	RowsBy RowsSource `json:"-"`
	// Statements are the server's statements of one request that ran
	// several (a multi-statement COM_QUERY), in order, when joined: exec
	// spans from the first's start to the last's end.
	Statements []StatementPart `json:"statements,omitempty"`
	// TxnInfo places the statement in its connection's transactions, from
	// the status flags of the responses.
	TxnInfo
	// LockWait, when not nil, is what is known of a lock the statement
	// waited for (docs/decomposition.md): a pointer, because few
	// statements have one.
	*LockWait
	// Known marks the counters the statement's source knows beyond what
	// the source itself implies (Knows): a slow log that has a
	// Bytes_received line, say. The JSON form writes such a counter even
	// when it is 0, and reading JSON sets the mark for a key it finds.
	Known Counters `json:"-"`

	// slab is the block of Slabs this statement was handed out from (nil
	// for any other statement): Release gives it back.
	slab *slab
}

// RowsSource says who counted a statement's rows, when not the wire.
type RowsSource uint8

const (
	// RowsCounted: the source counted them (the wire, a slow log, the
	// server's row of a server-only statement).
	RowsCounted RowsSource = iota
	// RowsCut: the header-only capture (watch --capture ebpf) cut the
	// answer in the middle, and its rows went uncounted: Rows is unknown.
	RowsCut
	// RowsFromServer: cut on the wire, Rows is the server's own count
	// (performance_schema ROWS_SENT), which the join filled in.
	RowsFromServer
)

// The notes that say a RowsSource.
const (
	NoteRowsUnknown    = "header-only capture: rows unknown (part of the answer was not captured)"
	NoteRowsFromServer = "header-only capture: rows from the server's ROWS_SENT (part of the answer was not captured)"
)

// Note is the sentence written among a statement's notes for r (none for
// rows counted).
func (r RowsSource) Note() string {
	switch r {
	case RowsCut:
		return NoteRowsUnknown
	case RowsFromServer:
		return NoteRowsFromServer
	}
	return ""
}

// AllNotes are the statement's notes as written: its Notes, then the
// rows' note (RowsBy), then its reason's sentence (Why's Note), each
// once.
func (s *Statement) AllNotes() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, n := range s.Notes {
			if !yield(n) {
				return
			}
		}
		if n := s.RowsBy.Note(); n != "" && !yield(n) {
			return
		}
		if n := s.reasonNote(); n != "" {
			yield(n)
		}
	}
}

// HasNotes reports whether the statement has a note to write (AllNotes).
func (s *Statement) HasNotes() bool {
	return len(s.Notes) > 0 || s.RowsBy.Note() != "" || s.Why.Note() != ""
}

// reasonNote is the reason's sentence to write after Notes: none when
// Notes says it already (a server-only statement built with it).
func (s *Statement) reasonNote() string {
	n := s.Why.Note()
	if n == "" || slices.Contains(s.Notes, n) {
		return ""
	}
	return n
}

// SetWrittenNotes sets Notes from notes as written (AllNotes): a note a
// code says goes back into its code rather than stay a note, the rows'
// into RowsBy, the reason's sentence into Why (set before, from the
// statement's "reason"). notes is not modified.
func (s *Statement) SetWrittenNotes(notes []string) {
	why := s.Why.Note()
	coded := func(n string) bool { return n == NoteRowsUnknown || n == NoteRowsFromServer || why != "" && n == why }
	if !slices.ContainsFunc(notes, coded) {
		s.Notes = notes
		return
	}
	var kept []string
	for _, n := range notes {
		switch {
		case n == NoteRowsUnknown:
			s.RowsBy = RowsCut
		case n == NoteRowsFromServer:
			s.RowsBy = RowsFromServer
		case !coded(n):
			kept = append(kept, n)
		}
	}
	s.Notes = kept
}

// StatementPart is one of the statements the server ran for a request.
type StatementPart struct {
	Digest     string `json:"digest,omitempty"`
	DigestText string `json:"digest_text,omitempty"`
	ServerUS   int64  `json:"server_us"`
}

// Span is an interval of Unix microseconds [Start, End).
type Span struct{ Start, End int64 }

// Overlap returns the length of the part of s inside [from, to).
func (s Span) Overlap(from, to int64) int64 {
	lo, hi := max(s.Start, from), min(s.End, to)
	if hi <= lo {
		return 0
	}
	return hi - lo
}

// HasResponse reports whether the statement got a response on the wire
// (COM_QUIT, COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA get none).
func (s *Statement) HasResponse() bool { return s.TRespLast != 0 }

// RowsUnknown reports whether the statement's Rows is unknown rather than
// a count (RowsCut: the header-only capture cut its answer and no server
// row gave the count): a sum or an average over statements must leave it
// out, not count it as 0.
func (s *Statement) RowsUnknown() bool { return s.RowsBy == RowsCut }

// Severity orders findings.
type Severity string

const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Rank is the one order of severities: the higher, the more severe;
// an unknown severity ranks below info.
func (s Severity) Rank() int {
	switch s {
	case SeverityCritical:
		return 3
	case SeverityWarning:
		return 2
	case SeverityInfo:
		return 1
	}
	return 0
}

// MoreSevere compares two findings for sorting, most severe first; findings
// of equal severity compare equal, so a stable sort keeps their order.
func MoreSevere(a, b Finding) int { return b.Severity.Rank() - a.Severity.Rank() }

// Finding is a named cause with the numbers that support it and a concrete fix.
type Finding struct {
	Code     string         `json:"code"`
	Severity Severity       `json:"severity"`
	Summary  string         `json:"summary"`
	Evidence map[string]any `json:"evidence"`
	Fix      string         `json:"fix"`
}

// Sample is one server-side reading at an instant: a status counter, a
// thread-pool group's queue length, a processlist row turned into numbers.
type Sample struct {
	TimeUS int64             `json:"t"`
	Source string            `json:"source"`
	Name   string            `json:"name"`
	Value  float64           `json:"value"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Parts is a statement's client time and the five parts it splits into
// (request, queue, exec, send stall, delivery; docs/events.md), or their
// totals over statements. Events, examples and profiles share it.
type Parts struct {
	ClientUS    int64 `json:"client_us"`
	RequestUS   int64 `json:"request_us"`
	QueueUS     int64 `json:"queue_us"`
	ExecUS      int64 `json:"exec_us"`
	SendStallUS int64 `json:"send_stall_us"`
	DeliveryUS  int64 `json:"delivery_us"`
}

// Add adds q's times to p.
func (p *Parts) Add(q Parts) {
	p.ClientUS += q.ClientUS
	p.RequestUS += q.RequestUS
	p.QueueUS += q.QueueUS
	p.ExecUS += q.ExecUS
	p.SendStallUS += q.SendStallUS
	p.DeliveryUS += q.DeliveryUS
}
