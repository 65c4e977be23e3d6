package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/gapscope/gapscope/internal/event"
)

// EventWriter writes statements as JSON lines, buffered, each line led by
// the events schema version ("v", event.SchemaVersion); docs/events.md
// describes every field. It is not safe for concurrent use.
//
// Lines are appended by a hand-written encoder, several times faster than
// encoding/json and allocation-free; its output is byte-for-byte what
// encoding/json produces (tested). Should event.Statement gain or change a
// field the encoder does not know, the writer falls back to encoding/json,
// so output stays complete, only slower.
type EventWriter struct {
	bw   *bufio.Writer
	enc  *json.Encoder
	line []byte
	err  error // first write error; later calls return it
}

// NewEventWriter buffers 64 KiB at a time to w.
func NewEventWriter(w io.Writer) *EventWriter {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &EventWriter{bw: bw, enc: enc}
}

// Write appends one statement as a line.
func (e *EventWriter) Write(s *event.Statement) error {
	if e.err != nil {
		return e.err
	}
	var err error
	if fastEncoderCurrent {
		e.line = appendStatement(e.line[:0], s)
		e.line = append(e.line, '\n')
		_, err = e.bw.Write(e.line)
	} else {
		err = e.enc.Encode(versioned{V: event.SchemaVersion, Statement: s})
	}
	if err != nil {
		e.err = fmt.Errorf("writing events: %w", err)
	}
	return e.err
}

// Flush writes buffered lines through.
func (e *EventWriter) Flush() error {
	if e.err != nil {
		return e.err
	}
	if err := e.bw.Flush(); err != nil {
		e.err = fmt.Errorf("writing events: %w", err)
	}
	return e.err
}

// encodedFields lists, in order, the event.Statement fields appendStatement
// writes: name, JSON tag, Go type.
var encodedFields = []string{
	"Conn conn string", "ConnID conn_id,omitempty uint64", "User user,omitempty string",
	"DB db,omitempty string", "Cmd cmd string", "SQL sql,omitempty string", "Digest digest,omitempty string",
	"DigestText digest_text,omitempty string", "TReqFirst t_req_first int64", "TReqLast t_req_last int64",
	"TRespFirst t_resp_first,omitempty int64", "TRespLast t_resp_last,omitempty int64",
	"ClientUS client_us int64", "RequestUS request_us int64", "QueueUS queue_us int64",
	"ExecUS exec_us int64", "SendStallUS send_stall_us int64", "DeliveryUS delivery_us int64",
	"ServerUS server_us,omitempty int64", "TransitUS transit_us,omitempty int64", "Rows rows int64", "ReqBytes req_bytes,omitempty int64",
	"RespBytes resp_bytes int64", "Error error *event.Error", "LockUS lock_us,omitempty int64",
	"RowsExamined rows_examined,omitempty int64", "ZeroWindowUS zero_window_us int64", "ZeroWindows - []event.Span",
	"Retransmits retransmits int", "PoolGroup pool_group,omitempty *int", "Joined joined bool",
	"JoinSource join_source,omitempty string", "Outlier outlier,omitempty bool", "Notes notes,omitempty []string",
	"Fingerprint fingerprint,omitempty string", "Tags tags,omitempty map[string]string",
	"Why reason,omitempty event.Reason", "Statements statements,omitempty []event.StatementPart",
}

// fastEncoderCurrent is true when event.Statement has exactly the fields
// appendStatement knows (read only after init).
var fastEncoderCurrent = slices.Equal(statementFields(), encodedFields)

func statementFields() []string {
	t := reflect.TypeFor[event.Statement]()
	fields := make([]string, t.NumField())
	for i := range fields {
		f := t.Field(i)
		fields[i] = f.Name + " " + f.Tag.Get("json") + " " + f.Type.String()
	}
	return fields
}

// versioned is one line of an events file: the schema version, then the
// statement's fields. Writing it with encoding/json is the reference the
// fast encoder matches; reading into it takes the version and the
// statement in one pass.
type versioned struct {
	V int `json:"v"`
	*event.Statement
}

// appendStatement appends s, led by the schema version, as encoding/json
// would write versioned (HTML escaping off).
func appendStatement(b []byte, s *event.Statement) []byte {
	b = strconv.AppendInt(append(b, `{"v":`...), event.SchemaVersion, 10)
	b = appendStr(append(b, `,"conn":`...), s.Conn)
	if s.ConnID != 0 {
		b = strconv.AppendUint(append(b, `,"conn_id":`...), s.ConnID, 10)
	}
	b = optStr(b, `,"user":`, s.User)
	b = optStr(b, `,"db":`, s.DB)
	b = appendStr(append(b, `,"cmd":`...), s.Cmd)
	b = optStr(b, `,"sql":`, s.SQL)
	b = optStr(b, `,"digest":`, s.Digest)
	b = optStr(b, `,"digest_text":`, s.DigestText)
	b = appendInt(b, `,"t_req_first":`, s.TReqFirst)
	b = appendInt(b, `,"t_req_last":`, s.TReqLast)
	b = optInt(b, `,"t_resp_first":`, s.TRespFirst)
	b = optInt(b, `,"t_resp_last":`, s.TRespLast)
	b = appendInt(b, `,"client_us":`, s.ClientUS)
	b = appendInt(b, `,"request_us":`, s.RequestUS)
	b = appendInt(b, `,"queue_us":`, s.QueueUS)
	b = appendInt(b, `,"exec_us":`, s.ExecUS)
	b = appendInt(b, `,"send_stall_us":`, s.SendStallUS)
	b = appendInt(b, `,"delivery_us":`, s.DeliveryUS)
	b = optInt(b, `,"server_us":`, s.ServerUS)
	b = optInt(b, `,"transit_us":`, s.TransitUS)
	b = appendInt(b, `,"rows":`, s.Rows)
	b = optInt(b, `,"req_bytes":`, s.ReqBytes)
	b = appendInt(b, `,"resp_bytes":`, s.RespBytes)
	b = appendError(append(b, `,"error":`...), s.Error)
	b = optInt(b, `,"lock_us":`, s.LockUS)
	b = optInt(b, `,"rows_examined":`, s.RowsExamined)
	// ZeroWindows is not part of the JSON form (json:"-").
	b = appendInt(b, `,"zero_window_us":`, s.ZeroWindowUS)
	b = appendInt(b, `,"retransmits":`, int64(s.Retransmits))
	if s.PoolGroup != nil {
		b = appendInt(b, `,"pool_group":`, int64(*s.PoolGroup))
	}
	b = strconv.AppendBool(append(b, `,"joined":`...), s.Joined)
	if s.JoinSource != "" {
		b = appendStr(append(b, `,"join_source":`...), s.JoinSource)
	}
	if s.Outlier {
		b = append(b, `,"outlier":true`...)
	}
	if len(s.Notes) > 0 {
		b = append(b, `,"notes":[`...)
		for i, n := range s.Notes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStr(b, n)
		}
		b = append(b, ']')
	}
	b = optStr(b, `,"fingerprint":`, s.Fingerprint)
	b = appendTags(b, s.Tags)
	if s.Why != event.ReasonNone {
		b = appendStr(append(b, `,"reason":`...), s.Why.String())
	}
	if len(s.Statements) > 0 {
		b = append(b, `,"statements":[`...)
		for i, p := range s.Statements {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if p.Digest != "" {
				b = appendStr(append(b, `"digest":`...), p.Digest)
				b = append(b, ',')
			}
			if p.DigestText != "" {
				b = appendStr(append(b, `"digest_text":`...), p.DigestText)
				b = append(b, ',')
			}
			b = strconv.AppendInt(append(b, `"server_us":`...), p.ServerUS, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendTags appends the tags object, keys sorted as encoding/json sorts
// them.
func appendTags(b []byte, tags map[string]string) []byte {
	if len(tags) == 0 {
		return b
	}
	b = append(b, `,"tags":{`...)
	for i, k := range slices.Sorted(maps.Keys(tags)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStr(append(appendStr(b, k), ':'), tags[k])
	}
	return append(b, '}')
}

func appendError(b []byte, e *event.Error) []byte {
	if e == nil {
		return append(b, "null"...)
	}
	b = strconv.AppendUint(append(b, `{"code":`...), uint64(e.Code), 10)
	b = appendStr(append(b, `,"state":`...), e.State)
	b = appendStr(append(b, `,"msg":`...), e.Msg)
	return append(b, '}')
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(b, key...), v, 10)
}

func optInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendInt(b, key, v)
}

func optStr(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendStr(append(b, key...), v)
}

const hexDigits = "0123456789abcdef"

// appendStr appends s as a JSON string the way encoding/json does without
// HTML escaping: invalid UTF-8 becomes U+FFFD, and U+2028/U+2029 are
// escaped for JavaScript.
func appendStr(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, `\u202`...)
				b = append(b, hexDigits[r&0xF])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

// checkVersion refuses a line written with a newer events schema than
// event.SchemaVersion: its fields may no longer mean what this gapscope
// thinks they mean.
func checkVersion(v int) error {
	if v > event.SchemaVersion {
		return fmt.Errorf("events schema v%d is newer than this gapscope reads (v%d): use a newer gapscope", v, event.SchemaVersion)
	}
	return nil
}

// EventsRead says what ReadEvents found in a file.
type EventsRead struct {
	// Statements is the number of whole lines read.
	Statements int
	// TornBytes is the length of a last line cut short by a writer that
	// stopped mid-line (killed, or its disk full): left out, 0 when none.
	TornBytes int
}

// TornNote says what a torn tail means for the reader; "" when none.
func (r EventsRead) TornNote(path string) string {
	if r.TornBytes == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the last line is torn (%d bytes without an end: its writer stopped mid-line); read the %d whole lines before it",
		path, r.TornBytes, r.Statements)
}

// LineError is a line of an events file that does not parse.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadEvents reads JSON-lines statements (EventWriter's output) from r and
// calls fn with each. Lines without "v" (written before the schema was
// versioned) read as version 1; a line of a newer version than this
// gapscope knows is a *LineError, not a statement half understood. A last line that has no newline and does not parse is
// a torn tail, what a writer killed mid-write leaves: it is counted in
// TornBytes and left out, since every line before it is whole. Any other
// line that does not parse is a *LineError.
func ReadEvents(r io.Reader, fn func(*event.Statement)) (EventsRead, error) {
	var res EventsRead
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return res, err
		}
		last := err == io.EOF
		if len(bytes.TrimSpace(b)) > 0 {
			st := new(event.Statement)
			ln := versioned{Statement: st}
			if jerr := json.Unmarshal(b, &ln); jerr != nil {
				if last { // no newline: the writer stopped inside this line
					res.TornBytes = len(b)
					return res, nil
				}
				return res, &LineError{Line: line, Err: jerr}
			}
			if verr := checkVersion(ln.V); verr != nil {
				return res, &LineError{Line: line, Err: verr}
			}
			res.Statements++
			fn(st)
		}
		if last {
			return res, nil
		}
	}
}
