package event

import "fmt"

// Reason says why a statement lacks one of its halves: a wire statement
// the join gave up without its server row, a server statement that had no
// wire statement (server-only), or a server row no wire statement took.
// Its name is the stable identifier that events, coverage counts and
// metric labels carry; its text is the sentence a person reads. Code
// compares reasons, never their text: rewording a sentence changes no label.
type Reason uint8

// The reasons. Append new ones (a reason's number is not part of any
// output; its name is).
const (
	ReasonNone Reason = iota

	// What the capture found that may keep a wire statement from its
	// server row: its reason where no join runs (analyze); where one runs,
	// the join's reason replaces it (such statements often join).
	NoResponse // COM_QUIT and the like: no response, nothing to join
	TLS        // encrypted, and the connection's id unknown: no text to match
	NoText     // a prepared statement prepared before the capture started
	Incomplete // the connection ended mid-response
	MidStream  // the capture started mid-connection

	// The join gave a wire statement up.
	NoConn   // the connection's thread was never learnt
	NoRow    // the server recorded later statements of the connection, not this one
	Expired  // its row was not read within --max-wait
	Evicted  // given up early: too many statements waiting for their rows
	RunEnd   // the run ended before its row was read
	Restart  // the server restarted before its row was read
	RingLost // history_long turned over before watch read its row

	// watch never handed it to the join.
	NoServer   // the server's statement history is not read this run
	SampledOut // left out of the join sample (the CPU budget)
	NoReason   // unjoined with no reason recorded (a bug if ever seen)

	// A server statement with no wire half (server-only events).
	NoCapture  // the run has no capture (--no-capture, or it could not open)
	UnixSocket // the client connected through the server's unix socket

	// A server row no wire statement took.
	RowNoWire  // no wire statement: not captured, sampled out, or watch's own
	RowExpired // no wire statement within --max-wait
	RowEvicted // given up early (too many pending)
	RowRunEnd  // no wire statement by the end of the run

	// A matched statement whose split the evidence cannot explain.
	UnexplainedDelivery // delivery far beyond the round trip and bytes, no stall behind it

	// Not a statement: a replica's binlog stream.
	ReplicaStream // COM_BINLOG_DUMP(_GTID): the server streams the binlog until the replica disconnects

	reasonCount
)

var reasonTable = [reasonCount]struct{ name, text string }{
	ReasonNone:          {"", ""},
	NoResponse:          {"no_response", "not joined: no response to join (COM_QUIT, COM_STMT_CLOSE and the like)"},
	TLS:                 {"tls", "not joined: encrypted (TLS) and the connection's id unknown, so no text to match"},
	NoText:              {"no_text", "not joined: statement text unknown (prepared before the capture started)"},
	Incomplete:          {"incomplete", "not joined: the response did not complete before the connection ended"},
	MidStream:           {"mid_stream", "not joined: the capture started mid-connection"},
	NoConn:              {"no_conn", "not joined: thread unknown (the connection's id was never learnt: opened before watch and gone before the processlist was read, or not TCP)"},
	NoRow:               {"no_row", "not joined: server row never seen (the server recorded later statements of this connection, not this one)"},
	Expired:             {"expired", "not joined: server row not read within --max-wait"},
	Evicted:             {"evicted", "not joined: given up early, too many statements waiting for their rows"},
	RunEnd:              {"run_end", "not joined: the run ended before its server row was read"},
	Restart:             {"restart", "not joined: the server restarted before its row was read"},
	RingLost:            {"ring_lost", "not joined: ring lost (performance_schema's history_long turned over before watch read this statement's row)"},
	NoServer:            {"no_server", "not joined: performance_schema's statement history is not read this run (see the run's notes)"},
	SampledOut:          {"sampled_out", "not joined: left out of the join sample (CPU budget): counted and timed at the client, not decomposed"},
	NoReason:            {"no_reason", "not joined: no reason recorded"},
	NoCapture:           {"no_capture", "server only: no wire capture, client time unknown"},
	UnixSocket:          {"unix_socket", "server only: the client connected through the server's unix socket, which no packet capture sees; client time unknown"},
	RowNoWire:           {"row_no_wire", "no wire statement (not captured, left out of the join sample, or watch's own)"},
	RowExpired:          {"row_expired", "no wire statement within --max-wait"},
	RowEvicted:          {"row_evicted", "given up early (too many pending)"},
	RowRunEnd:           {"row_run_end", "no wire statement by the end of the run"},
	UnexplainedDelivery: {"unexplained_delivery", "not joined: split withheld, the delivery is far longer than the round trip and the response's bytes explain, with no zero window or retransmit behind it; part of the server's work is probably missing from the server rows found (client and server time kept)"},
	ReplicaStream:       {"replica_stream", "not a statement: a replica's binlog stream (COM_BINLOG_DUMP), which the server sends until the replica disconnects; reported when it began, left out of latency figures"},
}

// String is the reason's stable name ("" for none).
func (r Reason) String() string {
	if r >= reasonCount {
		return fmt.Sprintf("reason_%d", uint8(r))
	}
	return reasonTable[r].name
}

// Text is the sentence that explains the reason.
func (r Reason) Text() string {
	if r >= reasonCount {
		return r.String()
	}
	return reasonTable[r].text
}

// ServerOnly reports whether r explains a server statement without a wire half.
func (r Reason) ServerOnly() bool { return r == NoCapture || r == UnixSocket }

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

// UnjoinedReasons are the reasons a wire statement can stay unjoined, in
// table order: exporters list every one so that a rate of zero is a series.
func UnjoinedReasons() []Reason {
	out := make([]Reason, 0, NoReason+1)
	for r := NoResponse; r <= NoReason; r++ {
		out = append(out, r)
	}
	return append(out, UnexplainedDelivery)
}

// UnmatchedRowReasons are the reasons a server row can go untaken.
func UnmatchedRowReasons() []Reason {
	return []Reason{RowNoWire, RowExpired, RowEvicted, RowRunEnd}
}

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
