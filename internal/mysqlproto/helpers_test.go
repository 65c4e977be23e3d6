package mysqlproto

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// chunk is one delivery of bytes in one direction at one capture time.
type chunk struct {
	dir  Direction
	ts   int64
	data []byte
}

// script builds a connection's byte streams: a handshake, commands and
// responses with correct sequence ids, optionally in the compressed
// protocol after the login.
type script struct {
	deprecate  bool
	compress   bool
	clientCaps uint32
	serverCaps uint32
	chunks     []chunk
	ts         int64
	seq        byte
	zseq       byte
	afterLogin bool
}

const testCaps = capLongPassword | capConnectWithDB | capProtocol41 | capSecureConnection |
	capMultiStatements | capMultiResults | capPluginAuth | capLocalFiles | capAuthLenencData

func newScript(deprecate bool) *script {
	s := &script{deprecate: deprecate, ts: 1_000_000, clientCaps: testCaps, serverCaps: testCaps | capDeprecateEOF | capCompress | capSSL}
	if deprecate {
		s.clientCaps |= capDeprecateEOF
	}
	return s
}

func (s *script) add(dir Direction, data []byte) {
	s.ts += 100
	if s.compress && s.afterLogin {
		data = s.compressChunk(data)
	}
	s.chunks = append(s.chunks, chunk{dir: dir, ts: s.ts, data: data})
}

// compressChunk wraps data in compressed packets: small ones raw, larger
// ones zlib, and data above 64 bytes split in two compressed packets so
// that MySQL packets straddle them.
func (s *script) compressChunk(data []byte) []byte {
	var out []byte
	parts := [][]byte{data}
	if len(data) > 64 {
		parts = [][]byte{data[:len(data)/2-3], data[len(data)/2-3:]}
	}
	for _, p := range parts {
		body, ulen := p, 0
		if len(p) >= 50 {
			var b bytes.Buffer
			w := zlib.NewWriter(&b)
			w.Write(p)
			w.Close()
			body, ulen = b.Bytes(), len(p)
		}
		out = append(out, byte(len(body)), byte(len(body)>>8), byte(len(body)>>16), s.zseq,
			byte(ulen), byte(ulen>>8), byte(ulen>>16))
		out = append(out, body...)
		s.zseq++
	}
	return out
}

func frame(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// client sends a command (sequence 0).
func (s *script) client(payload []byte) {
	s.seq, s.zseq = 0, 0
	s.add(ClientToServer, frame(0, payload))
	s.seq = 1
}

// clientMore sends a packet continuing the client's sequence (file data,
// auth data).
func (s *script) clientMore(payload []byte) {
	s.add(ClientToServer, frame(s.seq, payload))
	s.seq++
}

// server sends payloads in one chunk with consecutive sequence ids.
func (s *script) server(payloads ...[]byte) {
	var out []byte
	for _, p := range payloads {
		out = append(out, frame(s.seq, p)...)
		s.seq++
	}
	s.add(ServerToClient, out)
}

func (s *script) handshake() {
	s.seq = 0
	s.server(greetingPayload("10.11.6-MariaDB", 42, s.serverCaps, mariaCacheMetadata, "mysql_native_password"))
	caps := s.clientCaps
	if s.compress {
		caps |= capCompress
	}
	s.add(ClientToServer, frame(1, loginPayload(caps, "app", "shop", "mysql_native_password")))
	s.seq = 2
	s.server(okPayload(0, 0, 0, 2, 0))
	s.afterLogin = true
}

// resultSet sends a whole text result set ending with status.
func (s *script) resultSet(cols int, rows [][]any, status uint16) {
	s.server(s.resultPayloads(cols, rows, status, false)...)
}

func (s *script) resultPayloads(cols int, rows [][]any, status uint16, binary bool) [][]byte {
	ps := [][]byte{lenenc(uint64(cols))}
	for i := range cols {
		ps = append(ps, colDef(fmt.Sprintf("c%d", i)))
	}
	if !s.deprecate {
		ps = append(ps, eofPayload(0, status&^statusMoreResults|0x0002))
	}
	for _, r := range rows {
		if binary {
			ps = append(ps, binRow(r))
		} else {
			ps = append(ps, textRow(r...))
		}
	}
	return append(ps, s.endMarker(status))
}

func (s *script) endMarker(status uint16) []byte {
	if s.deprecate {
		return okPayload(0xfe, 0, 0, status, 0)
	}
	return eofPayload(0, status)
}

// defs sends a prepare response's definition group with its EOF.
func (s *script) defs(n int) [][]byte {
	var ps [][]byte
	for i := range n {
		ps = append(ps, colDef(fmt.Sprintf("p%d", i)))
	}
	if n > 0 && !s.deprecate {
		ps = append(ps, eofPayload(0, 2))
	}
	return ps
}

func (s *script) prepare(sql string, id uint32, params, cols int) {
	s.client(append([]byte{comStmtPrepare}, sql...))
	ok := []byte{0}
	ok = binary.LittleEndian.AppendUint32(ok, id)
	ok = binary.LittleEndian.AppendUint16(ok, uint16(cols))
	ok = binary.LittleEndian.AppendUint16(ok, uint16(params))
	ok = append(ok, 0, 0, 0)
	ps := append([][]byte{ok}, s.defs(params)...)
	s.server(append(ps, s.defs(cols)...)...)
}

func greetingPayload(version string, connID, caps, mariaCaps uint32, plugin string) []byte {
	b := append([]byte{10}, version...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, connID)
	b = append(b, "abcdefgh"...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps))
	b = append(b, 33, 2, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(caps>>16))
	b = append(b, 21, 0, 0, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, mariaCaps)
	b = append(b, "ijklmnopqrst"...)
	b = append(b, 0)
	b = append(b, plugin...)
	return append(b, 0)
}

func loginPayload(caps uint32, user, db, plugin string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 33)
	b = append(b, make([]byte, 19)...)
	b = binary.LittleEndian.AppendUint32(b, mariaCacheMetadata)
	b = append(b, user...)
	b = append(b, 0, 20)
	b = append(b, bytes.Repeat([]byte{7}, 20)...)
	b = append(b, db...)
	b = append(b, 0)
	b = append(b, plugin...)
	return append(b, 0)
}

func lenenc(n uint64) []byte {
	switch {
	case n < 0xfb:
		return []byte{byte(n)}
	case n < 1<<16:
		return []byte{0xfc, byte(n), byte(n >> 8)}
	case n < 1<<24:
		return []byte{0xfd, byte(n), byte(n >> 8), byte(n >> 16)}
	}
	return binary.LittleEndian.AppendUint64([]byte{0xfe}, n)
}

func lenencStr(s []byte) []byte { return append(lenenc(uint64(len(s))), s...) }

func okPayload(hdr byte, affected, lastID uint64, status, warnings uint16) []byte {
	b := append([]byte{hdr}, lenenc(affected)...)
	b = append(b, lenenc(lastID)...)
	b = binary.LittleEndian.AppendUint16(b, status)
	return binary.LittleEndian.AppendUint16(b, warnings)
}

func errPayload(code uint16, state, msg string) []byte {
	b := binary.LittleEndian.AppendUint16([]byte{0xff}, code)
	b = append(b, '#')
	b = append(b, state...)
	return append(b, msg...)
}

func eofPayload(warnings, status uint16) []byte {
	b := binary.LittleEndian.AppendUint16([]byte{0xfe}, warnings)
	return binary.LittleEndian.AppendUint16(b, status)
}

func colDef(name string) []byte {
	var b []byte
	for _, s := range []string{"def", "shop", "t", "t", name, name} {
		b = append(b, lenencStr([]byte(s))...)
	}
	b = append(b, 0x0c, 33, 0, 0xff, 0, 0, 0, typeVarString, 0, 0, 0, 0, 0)
	return b
}

// textRow encodes values as a text-protocol row; nil is NULL.
func textRow(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			b = append(b, 0xfb)
		case []byte:
			b = append(b, lenencStr(v)...)
		default:
			b = append(b, lenencStr([]byte(fmt.Sprint(v)))...)
		}
	}
	return b
}

// binRow encodes values as a binary-protocol row of strings.
func binRow(vals []any) []byte {
	b := []byte{0}
	bitmap := make([]byte, (len(vals)+7+2)/8)
	var data []byte
	for i, v := range vals {
		if v == nil {
			bitmap[(i+2)/8] |= 1 << ((i + 2) % 8)
			continue
		}
		data = append(data, lenencStr([]byte(fmt.Sprint(v)))...)
	}
	return append(append(b, bitmap...), data...)
}

// recorder keeps deep copies of every exchange.
type recorder struct {
	exs   []Exchange
	infos []ConnInfo
}

func (r *recorder) OnExchange(ex *Exchange, info *ConnInfo) {
	c := *ex
	c.SQL = slices.Clone(ex.SQL)
	if ex.Params != nil {
		c.Params = make([][]byte, len(ex.Params))
		for i, p := range ex.Params {
			c.Params[i] = slices.Clone(p)
		}
	}
	if ex.Err != nil {
		e := *ex.Err
		c.Err = &e
	}
	r.exs = append(r.exs, c)
	r.infos = append(r.infos, *info)
}

// summary is the comparable essence of an exchange for table tests.
type summary struct {
	Cmd        string
	SQL        string
	Params     string
	Rows       int64
	ResultSets int
	Err        string
	NoResp     bool
	Incomplete bool
	Stream     bool
	Note       string
}

func summarize(ex *Exchange) summary {
	s := summary{Cmd: ex.CmdName, SQL: string(ex.SQL), Rows: ex.Rows, ResultSets: ex.ResultSets,
		NoResp: ex.NoResponse, Incomplete: ex.Incomplete, Stream: ex.Stream, Note: ex.Note}
	if ex.Params != nil {
		ps := make([]string, len(ex.Params))
		for i, p := range ex.Params {
			ps[i] = string(p)
		}
		s.Params = strings.Join(ps, ",")
		if len(s.Params) > 200 { // keep failure messages readable
			s.Params = fmt.Sprintf("%s...(%d bytes)", s.Params[:200], len(s.Params))
		}
	}
	if ex.Err != nil {
		s.Err = fmt.Sprintf("%d %s %s", ex.Err.Code, ex.Err.State, ex.Err.Msg)
	}
	return s
}

func summaries(exs []Exchange) []summary {
	out := make([]summary, len(exs))
	for i := range exs {
		out[i] = summarize(&exs[i])
	}
	return out
}

// decodeChunks feeds chunks, optionally re-split by split, and closes.
func decodeChunks(chunks []chunk, opts Options, split func([]byte) [][]byte) (*recorder, *ConnDecoder) {
	r := &recorder{}
	d := NewConnDecoder(r, opts)
	var last int64
	for _, c := range chunks {
		pieces := [][]byte{c.data}
		if split != nil {
			pieces = split(c.data)
		}
		for _, p := range pieces {
			d.Feed(c.dir, c.ts, p)
		}
		last = c.ts
	}
	d.Close(last + 1)
	return r, d
}
