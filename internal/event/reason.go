package event

import "fmt"

// Reason says why a statement lacks one of its halves: a wire statement
// the join gave up without its server row, a server statement that had no
// wire statement (server-only), or a server row no wire statement took.
// Its name is the stable identifier that events, coverage counts and
// metric labels carry; its text is the sentence a person reads, rendered
// from the reason where output is written (never stored on a statement and
// read back). Code compares reasons and their attributes (Kind, By,
// Deliberate, Waited), never their text or their numbers: rewording a
// sentence changes no label, and a reason appended to the table is
// classified by its entry, not by where it sits.
type Reason uint8

// The reasons. Append new ones, each with its entry in reasonTable (a
// reason's number is not part of any output; its name is).
const (
	ReasonNone Reason = iota

	NoResponse // COM_QUIT and the like: no response, nothing to join
	TLS        // encrypted, and the connection's id unknown: no text to match
	NoText     // a prepared statement prepared before the capture started
	Incomplete // the connection ended mid-response
	MidStream  // the capture started mid-connection
	NoConn     // the connection's thread was never learnt
	NoRow      // the server recorded later statements of the connection, not this one
	Expired    // its row was not read within --max-wait
	Evicted    // given up early: too many statements waiting for their rows
	RunEnd     // the run ended before its row was read
	Restart    // the server restarted before its row was read
	RingLost   // history_long turned over before watch read its row
	NoServer   // the server's statement history is not read this run
	SampledOut // left out of the join sample (the CPU budget)
	NoReason   // unjoined with no reason recorded (a bug if ever seen)
	NoCapture  // server only: the run has no capture (--no-capture, or it could not open)
	UnixSocket // server only: the client connected through the server's unix socket
	RowNoWire  // a server row with no wire statement: not captured, sampled out, or watch's own
	RowExpired // a server row with no wire statement within --max-wait
	RowEvicted // a server row given up early (too many pending)
	RowRunEnd  // a server row with no wire statement by the end of the run

	UnexplainedDelivery // matched, split withheld: delivery far beyond the round trip and bytes, no stall behind it

	// Not a statement: a replica's binlog stream.
	ReplicaStream // COM_BINLOG_DUMP(_GTID): the server streams the binlog until the replica disconnects

	reasonCount
)

// Kind is what a reason explains: which half is missing, and of what.
type Kind uint8

const (
	kindUnset Kind = iota // an entry without a kind: a table error (TestReasonTableComplete)
	// KindUnjoined: a wire statement without its server row.
	KindUnjoined
	// KindWithheld: a wire statement matched to its server rows whose
	// split the evidence cannot explain: withheld, it reads as unjoined.
	KindWithheld
	// KindServerOnly: a server statement with no wire half (a server-only
	// event).
	KindServerOnly
	// KindUnmatchedRow: a server row no wire statement took (counted, never
	// an event of its own).
	KindUnmatchedRow
	// KindStream: no statement at all (a replica's binlog stream): kept
	// out of every latency figure.
	KindStream
)

var kindTable = [...]struct{ name, lead string }{
	kindUnset:        {"", ""},
	KindUnjoined:     {"unjoined", "not joined: "},
	KindWithheld:     {"withheld", "not joined: "},
	KindServerOnly:   {"server only", "server only: "},
	KindUnmatchedRow: {"unmatched row", ""},
	KindStream:       {"stream", "not a statement: "},
}

// String names the kind as docs/events.md's table does.
func (k Kind) String() string {
	if int(k) >= len(kindTable) {
		return fmt.Sprintf("kind_%d", uint8(k))
	}
	return kindTable[k].name
}

// Lead is what a reason's sentence begins with for its kind ("not joined: ",
// "server only: ", none for a row): a line that says the kind already
// writes the reason's Phrase instead.
func (k Kind) Lead() string {
	if int(k) >= len(kindTable) {
		return ""
	}
	return kindTable[k].lead
}

// Source is the stage that records a reason on a statement, or counts it.
type Source uint8

const (
	sourceUnset Source = iota // an entry without a source: a table error
	// ByCapture: the capture, from what it saw. Its own note on the
	// statement says it, so the reason's sentence is not written beside
	// it; it is the reason where no join runs (analyze), and where one
	// runs the join's replaces it (such statements usually do join).
	ByCapture
	// ByJoin: the join, giving a statement up or a row unmatched.
	ByJoin
	// ByWatch: watch, which decides every statement's reason last
	// (watch.UnjoinedReason): what the join cannot know (the ring's
	// losses, the join sample, no response, a run without capture).
	ByWatch
)

var sourceNames = [...]string{sourceUnset: "", ByCapture: "capture", ByJoin: "join", ByWatch: "watch"}

// String names the source as docs/events.md's table does.
func (s Source) String() string {
	if int(s) >= len(sourceNames) {
		return fmt.Sprintf("source_%d", uint8(s))
	}
	return sourceNames[s]
}

// reasonEntry is a reason's row: its name, its classification and its
// words.
type reasonEntry struct {
	name string
	kind Kind
	by   Source
	// deliberate: the run's set-up or its CPU budget left the statement
	// without its half, nothing of the statement's own: every statement
	// of the run, or of a connection the join sample left out, has it.
	deliberate bool
	// waited: the join held the wire statement for its row and gave it up
	// because none came; watch may know why (the ring lost the row, or
	// the join sample dropped it meanwhile) and then says so instead.
	waited bool
	// label is a few words for a crowded line: the live page.
	label string
	// phrase is the sentence without its kind's lead (Kind.Lead).
	phrase string
}

// reasonTable is every reason's entry, in the constants' order; its
// length must be reasonCount (checked at compile time below), so a reason
// appended without an entry does not build.
var reasonTable = [...]reasonEntry{
	ReasonNone: {},
	NoResponse: {"no_response", KindUnjoined, ByWatch, false, false,
		"no response to join (COM_QUIT and the like)",
		"no response to join (COM_QUIT, COM_STMT_CLOSE and the like)"},
	TLS: {"tls", KindUnjoined, ByCapture, false, false,
		"encrypted (TLS): no text to match",
		"encrypted (TLS) and the connection's id unknown, so no text to match"},
	NoText: {"no_text", KindUnjoined, ByCapture, false, false,
		"prepared before the capture started",
		"statement text unknown (prepared before the capture started)"},
	Incomplete: {"incomplete", KindUnjoined, ByCapture, false, false,
		"connection ended mid-response",
		"the response did not complete before the connection ended"},
	MidStream: {"mid_stream", KindUnjoined, ByCapture, false, false,
		"capture started mid-connection",
		"the capture started mid-connection"},
	NoConn: {"no_conn", KindUnjoined, ByJoin, false, false,
		"connection's thread never learnt",
		"thread unknown (the connection's id was never learnt: opened before watch and gone before the processlist was read, or not TCP)"},
	NoRow: {"no_row", KindUnjoined, ByJoin, false, true,
		"server row never seen",
		"server row never seen (the server recorded later statements of this connection, not this one)"},
	Expired: {"expired", KindUnjoined, ByJoin, false, true,
		"server row not read within --max-wait",
		"server row not read within --max-wait"},
	Evicted: {"evicted", KindUnjoined, ByJoin, false, false,
		"given up: too many waiting for their rows",
		"given up early, too many statements waiting for their rows"},
	RunEnd: {"run_end", KindUnjoined, ByJoin, false, true,
		"run ended before the row was read",
		"the run ended before its server row was read"},
	Restart: {"restart", KindUnjoined, ByJoin, false, false,
		"server restarted before the row was read",
		"the server restarted before its row was read"},
	RingLost: {"ring_lost", KindUnjoined, ByWatch, false, false,
		"history_long turned over before it was read",
		"ring lost (performance_schema's history_long turned over before watch read this statement's row)"},
	NoServer: {"no_server", KindUnjoined, ByWatch, true, false,
		"statement history not read this run",
		"performance_schema's statement history is not read this run (see the run's notes)"},
	SampledOut: {"sampled_out", KindUnjoined, ByWatch, true, false,
		"left out of the join sample (CPU budget)",
		"left out of the join sample (CPU budget): counted and timed at the client, not decomposed"},
	NoReason: {"no_reason", KindUnjoined, ByWatch, false, false,
		"no reason recorded",
		"no reason recorded"},
	NoCapture: {"no_capture", KindServerOnly, ByWatch, true, false,
		"no wire capture: client time unknown",
		"no wire capture, client time unknown"},
	UnixSocket: {"unix_socket", KindServerOnly, ByJoin, false, false,
		"unix socket client: not on the captured wire",
		"the client connected through the server's unix socket, which no packet capture sees; client time unknown"},
	RowNoWire: {"row_no_wire", KindUnmatchedRow, ByJoin, false, false,
		"no wire statement",
		"no wire statement (not captured, left out of the join sample, or watch's own)"},
	RowExpired: {"row_expired", KindUnmatchedRow, ByJoin, false, false,
		"no wire statement within --max-wait",
		"no wire statement within --max-wait"},
	RowEvicted: {"row_evicted", KindUnmatchedRow, ByJoin, false, false,
		"given up: too many pending",
		"given up early (too many pending)"},
	RowRunEnd: {"row_run_end", KindUnmatchedRow, ByJoin, false, false,
		"no wire statement by the end of the run",
		"no wire statement by the end of the run"},
	UnexplainedDelivery: {"unexplained_delivery", KindWithheld, ByJoin, false, false,
		"split withheld: delivery the wire cannot explain",
		"split withheld, the delivery is far longer than the round trip and the response's bytes explain, with no zero window or retransmit behind it; part of the server's work is probably missing from the server rows found (client and server time kept)"},
	ReplicaStream: {"replica_stream", KindStream, ByCapture, false, false,
		"a replica's binlog stream",
		"a replica's binlog stream (COM_BINLOG_DUMP), which the server sends until the replica disconnects; reported when it began, left out of latency figures"},
}

// The table has an entry for every reason: a constant index out of range
// does not compile.
var _ = [1]struct{}{}[len(reasonTable)-int(reasonCount)]

func (r Reason) entry() *reasonEntry {
	if r >= reasonCount {
		return &reasonEntry{}
	}
	return &reasonTable[r]
}

// String is the reason's stable name ("" for none).
func (r Reason) String() string {
	if r >= reasonCount {
		return fmt.Sprintf("reason_%d", uint8(r))
	}
	return reasonTable[r].name
}

// Kind is what r explains.
func (r Reason) Kind() Kind { return r.entry().kind }

// By is the stage that records r.
func (r Reason) By() Source { return r.entry().by }

// Deliberate reports whether the run's set-up or its CPU budget, not the
// statement, left it without its half (no_server, sampled_out, no_capture):
// such a reason says nothing about the statement.
func (r Reason) Deliberate() bool { return r.entry().deliberate }

// Waited reports whether r is a give-up of a wire statement whose row the
// join waited for and never got (no_row, expired, run_end): watch may
// know why the row never came, and decides the reason then.
func (r Reason) Waited() bool { return r.entry().waited }

// ServerOnly reports whether r explains a server statement without a wire half.
func (r Reason) ServerOnly() bool { return r.Kind() == KindServerOnly }

// ReadsUnjoined reports whether r is a wire statement's that reads as
// unjoined: left without its row, its split withheld, or no statement (a
// replica's stream, joined: false). These are the
// reasons of the unjoined counts (UnjoinedReasons).
func (r Reason) ReadsUnjoined() bool {
	k := r.Kind()
	return k == KindUnjoined || k == KindWithheld || k == KindStream
}

// Label is a few words for r, for a crowded line (the live page).
func (r Reason) Label() string {
	if r >= reasonCount {
		return r.String()
	}
	return reasonTable[r].label
}

// Phrase is r's sentence without its kind's lead, for a line that says
// the kind already ("not joined: 12 server row never seen ...").
func (r Reason) Phrase() string {
	if r >= reasonCount {
		return r.String()
	}
	return reasonTable[r].phrase
}

// Text is the sentence that explains the reason: its kind's lead and its
// phrase.
func (r Reason) Text() string {
	if r >= reasonCount {
		return r.String()
	}
	e := &reasonTable[r]
	if e.phrase == "" {
		return ""
	}
	return e.kind.Lead() + e.phrase
}

// noteText holds every reason's sentence, built once: a statement's notes
// are rendered per statement written, and must not build a string each time.
var noteText = func() (t [reasonCount]string) {
	for r := range reasonCount {
		t[r] = r.Text()
	}
	return t
}()

// Note is the sentence written among a statement's notes for r: its
// Text, or none when r is the capture's, whose own note says it (and for
// no reason).
func (r Reason) Note() string {
	if r >= reasonCount || reasonTable[r].by == ByCapture {
		return ""
	}
	return noteText[r]
}

// MarshalText writes the name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a name written by MarshalText.
func (r *Reason) UnmarshalText(b []byte) error {
	x, ok := ParseReason(string(b))
	if !ok {
		return fmt.Errorf("unknown reason %q", b)
	}
	*r = x
	return nil
}

// ParseReason is the reason of a name.
func ParseReason(name string) (Reason, bool) {
	for r := range reasonCount {
		if reasonTable[r].name == name {
			return r, true
		}
	}
	return ReasonNone, false
}

// Reasons are every reason, in table order (ReasonNone left out).
func Reasons() []Reason {
	out := make([]Reason, 0, reasonCount-1)
	for r := ReasonNone + 1; r < reasonCount; r++ {
		out = append(out, r)
	}
	return out
}

// reasonsWhere are the reasons, in table order, that keep says.
func reasonsWhere(keep func(Reason) bool) []Reason {
	var out []Reason
	for _, r := range Reasons() {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// UnjoinedReasons are the reasons a wire statement can read as unjoined
// (ReadsUnjoined), in table order: exporters list every one so that a
// rate of zero is a series.
func UnjoinedReasons() []Reason { return reasonsWhere(Reason.ReadsUnjoined) }

// ReasonCounts counts statements by reason, without hashing a string per
// statement.
type ReasonCounts [reasonCount]int64

// Add counts one statement of r.
func (c *ReasonCounts) Add(r Reason) {
	if r < reasonCount {
		c[r]++
	}
}

// Map is the non-zero counts by name.
func (c *ReasonCounts) Map() map[string]int64 {
	m := map[string]int64{}
	for r, n := range c {
		if n > 0 && r != int(ReasonNone) {
			m[Reason(r).String()] = n
		}
	}
	return m
}
