package mysqlproto

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// afterHandshake returns a script's chunks with the handshake cut off, as a
// capture that began mid-connection would see them.
func afterHandshake(deprecate bool, build func(s *script)) []chunk {
	s := newScript(deprecate)
	s.handshake()
	n := len(s.chunks)
	build(s)
	return s.chunks[n:]
}

func TestMidStreamLearnsEOFMode(t *testing.T) {
	for _, deprecate := range []bool{false, true} {
		chunks := afterHandshake(deprecate, func(s *script) {
			s.server(textRow("tail of an earlier response")) // ignored until a command
			s.client(query("SELECT a FROM t"))
			s.resultSet(3, rows(2), 2)
			s.prepare("SELECT ?", 5, 1, 1)
			s.client(execPayload(5, 0, true, int64(8)))
			s.server(s.resultPayloads(1, rows(1), 2, true)...)
			s.client(query("SELECT 1; SELECT 2"))
			s.server(s.resultPayloads(1, rows(1), 2|statusMoreResults, false)...)
			s.resultSet(1, rows(1), 2)
		})
		r, d := decodeChunks(chunks, Options{MidStream: true}, nil)
		want := []summary{
			{Cmd: "COM_QUERY", SQL: "SELECT a FROM t", Rows: 2, ResultSets: 1, Note: noteMidStream},
			{Cmd: "COM_STMT_PREPARE", SQL: "SELECT ?"},
			{Cmd: "COM_STMT_EXECUTE", SQL: "SELECT ?", Rows: 1, ResultSets: 1, Params: "8"},
			{Cmd: "COM_QUERY", SQL: "SELECT 1; SELECT 2", Rows: 2, ResultSets: 2},
		}
		if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
			t.Errorf("deprecate=%v:\n got %+v\nwant %+v", deprecate, got, want)
		}
		if d.Info().SeenHandshake {
			t.Error("SeenHandshake after a mid-stream start")
		}
	}
}

// A prepare response seen before the EOF mode is known ends at its last
// definition; a trailing EOF must not become the next command's response.
func TestMidStreamPrepareTrailingEOF(t *testing.T) {
	chunks := afterHandshake(false, func(s *script) {
		s.prepare("SELECT ?", 5, 1, 1)
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	})
	r, _ := decodeChunks(chunks, Options{MidStream: true}, nil)
	want := []summary{{Cmd: "COM_STMT_PREPARE", SQL: "SELECT ?", Note: noteMidStream}, {Cmd: "COM_PING"}}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestMissedHandshakeWithoutMidStreamOption(t *testing.T) {
	chunks := afterHandshake(true, func(s *script) {
		s.client(query("SELECT 1"))
		s.resultSet(1, rows(1), 2)
		s.client(query("SELECT 2"))
		s.resultSet(1, rows(1), 2)
	})
	r, _ := decodeChunks(chunks, Options{}, nil)
	// The first command is what revealed the missed handshake; decoding
	// resumes at the next one.
	want := []summary{{Cmd: "COM_QUERY", SQL: "SELECT 2", Rows: 1, ResultSets: 1, Note: noteMidStream}}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestGapResyncs(t *testing.T) {
	s := newScript(false)
	s.handshake()
	s.client(query("SELECT * FROM big"))
	ps := s.resultPayloads(2, rows(10), 2, false)
	s.server(ps[:5]...)
	cut := len(s.chunks)
	s.server(ps[5:]...)
	s.client(query("SELECT 2"))
	s.resultSet(1, rows(1), 2)

	r := &recorder{}
	d := NewConnDecoder(r, Options{})
	for i, c := range s.chunks {
		if i == cut {
			d.Gap(ServerToClient, c.ts)
			continue // these bytes were lost
		}
		d.Feed(c.dir, c.ts, c.data)
	}
	want := []summary{
		{Cmd: "COM_QUERY", SQL: "SELECT * FROM big", ResultSets: 1, Incomplete: true, Note: noteGap},
		{Cmd: "COM_QUERY", SQL: "SELECT 2", Rows: 1, ResultSets: 1, Note: noteResync},
	}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestCloseEmitsPendingIncomplete(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(query("SELECT SLEEP(100)"))
	r, _ := decodeChunks(s.chunks, Options{}, nil)
	want := []summary{{Cmd: "COM_QUERY", SQL: "SELECT SLEEP(100)", Incomplete: true, Note: noteClosed}}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
	if r.exs[0].RespLast != 0 {
		t.Errorf("RespLast = %d for a command without response", r.exs[0].RespLast)
	}
}

func TestPipelinedCommands(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(query("SELECT 1"))
	s.client(query("SELECT 2"))
	s.seq = 1
	s.resultSet(1, rows(1), 2)
	s.seq = 1
	s.resultSet(1, rows(2), 2)
	r, _ := decodeChunks(s.chunks, Options{}, nil)
	want := []summary{
		{Cmd: "COM_QUERY", SQL: "SELECT 1", Rows: 1, ResultSets: 1},
		{Cmd: "COM_QUERY", SQL: "SELECT 2", Rows: 2, ResultSets: 1},
	}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestNextCommandCutsBrokenResponse(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(query("SELECT a FROM t"))
	ps := s.resultPayloads(1, rows(3), 2, false)
	s.server(ps[:len(ps)-1]...) // the end marker never comes
	s.client([]byte{comPing})
	s.server(okPayload(0, 0, 0, 2, 0))
	r, _ := decodeChunks(s.chunks, Options{}, nil)
	want := []summary{
		{Cmd: "COM_QUERY", SQL: "SELECT a FROM t", ResultSets: 1, Incomplete: true, Note: noteCutShort},
		{Cmd: "COM_PING"},
	}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestHandshakeInfo(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(append([]byte{comInitDB}, "other"...))
	s.server(okPayload(0, 0, 0, 2, 0))
	r, d := decodeChunks(s.chunks, Options{}, nil)
	info := d.Info()
	if info.ServerVersion != "10.11.6-MariaDB" || info.ConnID != 42 || info.User != "app" ||
		info.AuthPlugin != "mysql_native_password" || !info.SeenHandshake || !info.AuthOK || !info.DeprecateEOF {
		t.Errorf("info = %+v", info)
	}
	if info.MariaDBCaps != 0 {
		t.Errorf("MariaDBCaps = %#x, want 0 (the client set CLIENT_MYSQL)", info.MariaDBCaps)
	}
	if r.infos[0].DB != "other" {
		t.Errorf("DB after COM_INIT_DB = %q", r.infos[0].DB)
	}
}

func TestMariaDBExtendedCaps(t *testing.T) {
	s := newScript(false)
	s.serverCaps &^= capLongPassword
	s.clientCaps &^= capLongPassword
	s.handshake()
	_, d := decodeChunks(s.chunks, Options{}, nil)
	if got := d.Info().MariaDBCaps; got != mariaCacheMetadata {
		t.Errorf("MariaDBCaps = %#x, want %#x", got, mariaCacheMetadata)
	}
}

func TestSSLRequestStopsDecoding(t *testing.T) {
	var chunks []chunk
	g := greetingPayload("8.0.36", 7, testCaps|capSSL, 0, "caching_sha2_password")
	chunks = append(chunks, chunk{ServerToClient, 1, frame(0, g)})
	ssl := loginPayload(testCaps|capSSL, "", "", "")[:32]
	chunks = append(chunks, chunk{ClientToServer, 2, frame(1, ssl)})
	chunks = append(chunks, chunk{ClientToServer, 3, []byte{0x16, 0x03, 0x01, 0x02, 0x00, 1, 2, 3}})
	chunks = append(chunks, chunk{ServerToClient, 4, []byte{0x16, 0x03, 0x03, 0, 0x5a}})
	r, d := decodeChunks(chunks, Options{}, nil)
	if !d.Info().TLS || len(r.exs) != 0 {
		t.Errorf("TLS=%v exchanges=%d", d.Info().TLS, len(r.exs))
	}
}

func TestLoginRefused(t *testing.T) {
	s := newScript(false)
	s.seq = 0
	s.server(greetingPayload("10.11.6-MariaDB", 3, s.serverCaps, 0, "mysql_native_password"))
	s.add(ClientToServer, frame(1, loginPayload(s.clientCaps, "app", "", "mysql_native_password")))
	s.seq = 2
	s.server(append([]byte{0xfe}, "caching_sha2_password\x00abc"...)) // auth switch
	s.clientMore([]byte{1, 2, 3})
	s.server([]byte{0x01, 0x04}) // perform full authentication
	s.clientMore([]byte{2})
	s.server(errPayload(1045, "28000", "Access denied for user 'app'"))
	_, d := decodeChunks(s.chunks, Options{}, nil)
	info := d.Info()
	if info.LoginErr == nil || info.LoginErr.Code != 1045 || info.AuthOK || info.AuthPlugin != "caching_sha2_password" {
		t.Errorf("info = %+v err=%+v", info, info.LoginErr)
	}
}

// TestLargePayloads sends a query and a row of more than 16 MiB: each is
// split into several packets, the query comes back whole and the row counts
// once.
func TestLargePayloads(t *testing.T) {
	for _, compress := range []bool{false, true} {
		s := newScript(true)
		s.compress = compress
		s.handshake()
		big := strings.Repeat("x", 17<<20)
		sql := "SELECT '" + big + "'"
		s.clientBig(query(sql))
		s.server(lenenc(1), colDef("c"))
		s.serverBig(textRow(big))
		s.server(textRow("small"), s.endMarker(2))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
		r, _ := decodeChunks(s.chunks, Options{}, func(b []byte) [][]byte { return splitEvery(b, 1<<16) })
		if len(r.exs) != 2 || string(r.exs[0].SQL) != sql || r.exs[0].Rows != 2 || r.exs[1].CmdName != "COM_PING" {
			t.Fatalf("compress=%v: %d exchanges, first rows=%d sql len=%d", compress, len(r.exs), r.exs[0].Rows, len(r.exs[0].SQL))
		}
		if !compress && r.exs[0].ReqBytes != int64(len(sql)+1+8) {
			t.Errorf("ReqBytes = %d, want %d (two packet headers)", r.exs[0].ReqBytes, len(sql)+1+8)
		}
	}
}

// clientBig and serverBig send a payload split into 0xffffff packets.
func (s *script) clientBig(payload []byte) {
	s.seq = 0
	s.zseq = 0
	s.add(ClientToServer, splitPackets(&s.seq, payload))
}

func (s *script) serverBig(payload []byte) { s.add(ServerToClient, splitPackets(&s.seq, payload)) }

func splitPackets(seq *byte, payload []byte) []byte {
	var out []byte
	for {
		n := min(len(payload), maxPacket)
		out = append(out, frame(*seq, payload[:n])...)
		*seq++
		payload = payload[n:]
		if n < maxPacket {
			return out
		}
	}
}

func TestCompressedMultiplePacketsInOne(t *testing.T) {
	s := newScript(false)
	s.compress = true
	s.handshake()
	// One compressed packet carries a whole result set of many packets.
	s.client(query("SELECT * FROM t"))
	s.resultSet(3, rows(40), 2)
	r, d := decodeChunks(s.chunks, Options{}, nil)
	if len(r.exs) != 1 || r.exs[0].Rows != 40 || !d.Info().Compressed {
		t.Fatalf("%+v", summaries(r.exs))
	}
	var wire int64
	for _, c := range s.chunks[3:] {
		if c.dir == ServerToClient {
			wire += int64(len(c.data))
		}
	}
	if r.exs[0].RespBytes != wire {
		t.Errorf("RespBytes = %d, want the compressed wire bytes %d", r.exs[0].RespBytes, wire)
	}
}

func TestCorruptCompressedResyncs(t *testing.T) {
	s := newScript(false)
	s.compress = true
	s.handshake()
	s.client(query("SELECT 1"))
	bad := []byte{10, 0, 0, 1, 100, 0, 0, 0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8}
	s.chunks = append(s.chunks, chunk{ServerToClient, s.ts + 1, bad})
	s.ts += 10
	s.client(query("SELECT 2"))
	s.resultSet(1, rows(1), 2)
	r, _ := decodeChunks(s.chunks, Options{}, nil)
	want := []summary{
		{Cmd: "COM_QUERY", SQL: "SELECT 1", Incomplete: true, Note: noteBadCompressed},
		{Cmd: "COM_QUERY", SQL: "SELECT 2", Rows: 1, ResultSets: 1, Note: noteResync},
	}
	if got := summaries(r.exs); !reflect.DeepEqual(got, want) {
		t.Errorf("\n got %+v\nwant %+v", got, want)
	}
}

func TestTimesAndBytes(t *testing.T) {
	r := &recorder{}
	d := NewConnDecoder(r, Options{MidStream: true})
	q := frame(0, query("SELECT 1"))
	d.Feed(ClientToServer, 100, q[:6])
	d.Feed(ClientToServer, 150, q[6:])
	s := newScript(true)
	s.seq = 1
	s.resultSet(1, rows(1), 2)
	resp := s.chunks[0].data
	d.Feed(ServerToClient, 300, resp[:10])
	d.Feed(ServerToClient, 420, resp[10:])
	ex := r.exs[0]
	if ex.ReqFirst != 100 || ex.ReqLast != 150 || ex.RespFirst != 300 || ex.RespLast != 420 {
		t.Errorf("times %d %d %d %d", ex.ReqFirst, ex.ReqLast, ex.RespFirst, ex.RespLast)
	}
	if ex.ReqBytes != int64(len(q)) || ex.RespBytes != int64(len(resp)) {
		t.Errorf("bytes %d %d, want %d %d", ex.ReqBytes, ex.RespBytes, len(q), len(resp))
	}
}

func TestDetect(t *testing.T) {
	g := frame(0, greetingPayload("10.11.6-MariaDB-0+deb12u1", 9, testCaps, 0, "mysql_native_password"))
	cases := []struct {
		name       string
		data       []byte
		greet, cmd bool
	}{
		{"greeting", g, true, false},
		{"greeting prefix", g[:40], true, false},
		{"greeting cut in the version", g[:20], false, false},
		{"query", frame(0, query("select 1")), false, true},
		{"query with comment", frame(0, query("/* x */ SELECT 1")), false, true},
		{"ping", frame(0, []byte{comPing}), false, true},
		{"ping wrong length", frame(0, []byte{comPing, 0}), false, false},
		{"execute", frame(0, execPayload(1, 0, true, int64(1))), false, true},
		{"close", frame(0, binary.LittleEndian.AppendUint32([]byte{comStmtClose}, 1)), false, true},
		{"seq 1", frame(1, query("select 1")), false, false},
		{"binary garbage query", frame(0, []byte{comQuery, 0x00, 0x01}), false, false},
		{"http", []byte("GET / HTTP/1.1\r\n"), false, false},
		{"tls hello", []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, false, false},
		{"short", []byte{1, 0, 0}, false, false},
	}
	for _, c := range cases {
		if got := LooksLikeGreeting(c.data); got != c.greet {
			t.Errorf("%s: LooksLikeGreeting = %v", c.name, got)
		}
		if got := LooksLikeCommand(c.data); got != c.cmd {
			t.Errorf("%s: LooksLikeCommand = %v", c.name, got)
		}
	}
}

func TestCommandName(t *testing.T) {
	for cmd, want := range map[byte]string{0x03: "COM_QUERY", 0x17: "COM_STMT_EXECUTE", 0x1f: "COM_RESET_CONNECTION",
		0x42: "COM_UNKNOWN_0x42", 0xfa: "COM_STMT_BULK_EXECUTE", 0xff: "COM_UNKNOWN_0xFF"} {
		if got := CommandName(cmd); got != want {
			t.Errorf("CommandName(%#x) = %q, want %q", cmd, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = CommandName(0x99) }); n != 0 {
		t.Errorf("CommandName allocates %v times", n)
	}
}

func TestStatementMemoryReused(t *testing.T) {
	s := newScript(true)
	s.handshake()
	for i := range 3 {
		s.prepare("SELECT ?", uint32(i+1), 1, 1)
		s.client(binary.LittleEndian.AppendUint32([]byte{comStmtClose}, uint32(i+1)))
	}
	_, d := decodeChunks(s.chunks, Options{}, nil)
	if len(d.stmts) != 0 || len(d.freeStmts) != 1 {
		t.Errorf("stmts=%d free=%d, want 0 and 1", len(d.stmts), len(d.freeStmts))
	}
	if !bytes.Equal(d.freeStmts[0].sql, []byte("SELECT ?")) {
		t.Errorf("freed statement text %q", d.freeStmts[0].sql)
	}
}

// memoHandler records, for each execute, its text and what an earlier
// execute left in its memo, and leaves its own.
type memoHandler struct{ seen []string }

func (h *memoHandler) OnExchange(ex *Exchange, _ *ConnInfo) {
	if ex.Cmd != comStmtExecute {
		return
	}
	if ex.Memo == nil {
		h.seen = append(h.seen, string(ex.SQL)+" | no memo")
		return
	}
	before, _ := (*ex.Memo).(string)
	h.seen = append(h.seen, string(ex.SQL)+" | "+before)
	*ex.Memo = "from " + string(ex.SQL)
}

// An execute finds in Exchange.Memo what the handler derived from the
// statement's text on an earlier execute; the id prepared again with a
// new text starts with an empty memo.
func TestExecuteMemo(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.prepare("SELECT ?", 5, 1, 3)
	for range 2 {
		s.client(execPayload(5, 0, true, int64(1)))
		s.server(s.resultPayloads(3, rows(1), 2, true)...)
	}
	s.client(binary.LittleEndian.AppendUint32([]byte{comStmtClose}, 5))
	s.prepare("SELECT ? + 1", 5, 1, 3)
	s.client(execPayload(5, 0, true, int64(2)))
	s.server(s.resultPayloads(3, rows(1), 2, true)...)
	h := &memoHandler{}
	d := NewConnDecoder(h, Options{})
	for _, c := range s.chunks {
		d.Feed(c.dir, c.ts, c.data)
	}
	want := []string{"SELECT ? | ", "SELECT ? | from SELECT ?", "SELECT ? + 1 | "}
	if !slices.Equal(h.seen, want) {
		t.Errorf("executes saw %q, want %q", h.seen, want)
	}
}
