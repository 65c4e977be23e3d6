package event

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Counters is a set of a statement's counters that its source may or may
// not know. A known counter is written in JSON, 0 included; an unknown one
// is left out (docs/events.md, "Absent fields: unknown, never zero").
type Counters uint8

const (
	// KnowsServerUS: the server's own time (server_us).
	KnowsServerUS Counters = 1 << iota
	// KnowsReqBytes: the request's bytes (req_bytes).
	KnowsReqBytes
	// KnowsLockUS: the server's lock time (lock_us).
	KnowsLockUS
	// KnowsRowsExamined: the rows the server examined (rows_examined).
	KnowsRowsExamined
)

// Knows reports whether the statement's source knows every counter of c.
// A counter is known when its value is not 0, when Known marks it, or when
// the statement's source implies it:
//   - a wire statement (Conn set) knows req_bytes: the wire saw the request;
//   - a statement joined to a server row (Joined, or JoinSource set: a
//     withheld split) knows server_us, and the join marks lock_us and
//     rows_examined known (Known) from the row;
//   - a server-only statement (reason no_capture or unix_socket) knows
//     server_us, lock_us and rows_examined from its performance_schema row.
//
// Other sources (a slow log) mark what they had in Known.
func (s *Statement) Knows(c Counters) bool { return s.knownCounters()&c == c }

func (s *Statement) knownCounters() Counters {
	k := s.Known
	if s.Conn != "" || s.ReqBytes != 0 {
		k |= KnowsReqBytes
	}
	if s.Joined || s.JoinSource != "" || s.ServerUS != 0 {
		k |= KnowsServerUS
	}
	if s.Why.ServerOnly() {
		k |= KnowsServerUS | KnowsLockUS | KnowsRowsExamined
	}
	if s.LockUS != 0 {
		k |= KnowsLockUS
	}
	if s.RowsExamined != 0 {
		k |= KnowsRowsExamined
	}
	return k
}

// MarshalJSON writes the statement's JSON form (docs/events.md) without
// the events file's "v": what AppendJSON appends.
func (s Statement) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// AppendJSON appends the statement's JSON form (docs/events.md), as
// encoding/json would write it with HTML escaping off, except that a known
// counter is written when 0 (Knows). It allocates nothing beyond b's growth.
func (s *Statement) AppendJSON(b []byte) []byte {
	return s.appendFields(append(b, '{'), false)
}

// AppendLine appends the statement as one line of an events file: led by
// the schema version ("v"), without the newline.
func (s *Statement) AppendLine(b []byte) []byte {
	b = strconv.AppendInt(append(b, `{"v":`...), SchemaVersion, 10)
	return s.appendFields(b, true)
}

// appendFields appends the fields after b's opening brace (and "v" when
// comma), in the struct's order, and the closing brace.
func (s *Statement) appendFields(b []byte, comma bool) []byte {
	if comma {
		b = append(b, ',')
	}
	k := s.knownCounters()
	b = appendStr(append(b, `"conn":`...), s.Conn)
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
	b = knownInt(b, `,"server_us":`, s.ServerUS, k&KnowsServerUS != 0)
	b = optInt(b, `,"transit_us":`, s.TransitUS)
	b = appendInt(b, `,"rows":`, s.Rows)
	b = knownInt(b, `,"req_bytes":`, s.ReqBytes, k&KnowsReqBytes != 0)
	b = appendInt(b, `,"resp_bytes":`, s.RespBytes)
	b = appendError(append(b, `,"error":`...), s.Error)
	b = knownInt(b, `,"lock_us":`, s.LockUS, k&KnowsLockUS != 0)
	b = knownInt(b, `,"rows_examined":`, s.RowsExamined, k&KnowsRowsExamined != 0)
	// ZeroWindows is not part of the JSON form (json:"-").
	b = appendInt(b, `,"zero_window_us":`, s.ZeroWindowUS)
	b = appendInt(b, `,"retransmits":`, int64(s.Retransmits))
	if s.PoolGroup != nil {
		b = appendInt(b, `,"pool_group":`, int64(*s.PoolGroup))
	}
	b = strconv.AppendBool(append(b, `,"joined":`...), s.Joined)
	b = optStr(b, `,"join_source":`, s.JoinSource)
	if s.Outlier {
		b = append(b, `,"outlier":true`...)
	}
	// The notes as AllNotes gives them, without its iterator: the rows'
	// and the reason's sentences are rendered from their codes here.
	if rows, why := s.RowsBy.Note(), s.reasonNote(); len(s.Notes) > 0 || rows != "" || why != "" {
		b = append(b, `,"notes":[`...)
		for i, n := range s.Notes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStr(b, n)
		}
		for _, n := range [...]string{rows, why} {
			if n == "" {
				continue
			}
			if b[len(b)-1] != '[' {
				b = append(b, ',')
			}
			b = appendStr(b, n)
		}
		b = append(b, ']')
	}
	b = optStr(b, `,"fingerprint":`, s.Fingerprint)
	b = appendTags(b, s.Tags)
	if s.Why != ReasonNone {
		b = appendStr(append(b, `,"reason":`...), s.Why.String())
	}
	if len(s.Statements) > 0 {
		b = append(b, `,"statements":[`...)
		for i := range s.Statements {
			if i > 0 {
				b = append(b, ',')
			}
			b = s.Statements[i].AppendJSON(b)
		}
		b = append(b, ']')
	}
	b = s.appendTxn(b)
	// Known is not part of the JSON form (json:"-"): it decides which
	// counters above are written.
	return append(b, '}')
}

// AppendJSON appends the part's JSON form.
func (p *StatementPart) AppendJSON(b []byte) []byte {
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
	return append(b, '}')
}

// plainStatement is Statement without its JSON methods, for decoding.
type plainStatement Statement

// statementIn is the decoding form of a statement or an events line: the
// counters that may be absent decode through pointers (outer fields take
// their keys from the embedded statement's), so a key present with 0 marks
// the counter known.
type statementIn struct {
	V int `json:"v"`
	*plainStatement

	ServerUS     *int64 `json:"server_us"`
	ReqBytes     *int64 `json:"req_bytes"`
	LockUS       *int64 `json:"lock_us"`
	RowsExamined *int64 `json:"rows_examined"`
}

// DecodeLine decodes one statement's JSON (a line of an events file, or
// what AppendJSON wrote) into s, marking in s.Known the counters whose
// keys it has; it returns the line's "v", 0 when it has none.
func DecodeLine(data []byte, s *Statement) (v int, err error) {
	in := statementIn{plainStatement: (*plainStatement)(s)}
	if err := json.Unmarshal(data, &in); err != nil {
		return 0, err
	}
	s.SetWrittenNotes(s.Notes) // the sentences of codes back into their codes
	for _, c := range []struct {
		p   *int64
		dst *int64
		k   Counters
	}{{in.ServerUS, &s.ServerUS, KnowsServerUS}, {in.ReqBytes, &s.ReqBytes, KnowsReqBytes},
		{in.LockUS, &s.LockUS, KnowsLockUS}, {in.RowsExamined, &s.RowsExamined, KnowsRowsExamined}} {
		if c.p != nil {
			*c.dst = *c.p
			s.Known |= c.k
		}
	}
	return in.V, nil
}

// UnmarshalJSON reads the JSON form (DecodeLine; "v" is ignored).
func (s *Statement) UnmarshalJSON(data []byte) error {
	_, err := DecodeLine(data, s)
	return err
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

func appendError(b []byte, e *Error) []byte {
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

// knownInt writes v when known, 0 included.
func knownInt(b []byte, key string, v int64, known bool) []byte {
	if !known {
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
