package mysqlproto

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"reflect"
	"testing"
)

// dt is a binary DATETIME param: year, month, day, hour, minute, second, µs.
type dt [7]int

// execPayload builds COM_STMT_EXECUTE; bound says whether types are sent.
func execPayload(id uint32, flags byte, bound bool, params ...any) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{comStmtExecute}, id)
	b = append(b, flags, 1, 0, 0, 0)
	if len(params) == 0 {
		return b
	}
	bitmap := make([]byte, (len(params)+7)/8)
	var types, vals []byte
	for i, p := range params {
		switch v := p.(type) {
		case nil:
			bitmap[i/8] |= 1 << (i % 8)
			types = append(types, typeNull, 0)
		case int64:
			types = append(types, typeLongLong, 0)
			vals = binary.LittleEndian.AppendUint64(vals, uint64(v))
		case uint64:
			types = append(types, typeLongLong, 0x80)
			vals = binary.LittleEndian.AppendUint64(vals, v)
		case int8:
			types = append(types, typeTiny, 0)
			vals = append(vals, byte(v))
		case float64:
			types = append(types, typeDouble, 0)
			vals = binary.LittleEndian.AppendUint64(vals, math.Float64bits(v))
		case float32:
			types = append(types, typeFloat, 0)
			vals = binary.LittleEndian.AppendUint32(vals, math.Float32bits(v))
		case string:
			types = append(types, typeVarString, 0)
			vals = append(vals, lenencStr([]byte(v))...)
		case []byte:
			types = append(types, typeBlob, 0)
			vals = append(vals, lenencStr(v)...)
		case dt:
			types = append(types, typeDateTime, 0)
			vals = append(vals, 11, byte(v[0]), byte(v[0]>>8), byte(v[1]), byte(v[2]), byte(v[3]), byte(v[4]), byte(v[5]))
			vals = binary.LittleEndian.AppendUint32(vals, uint32(v[6]))
		case longData:
			types = append(types, typeBlob, 0)
		}
	}
	b = append(b, bitmap...)
	if bound {
		b = append(append(b, 1), types...)
	} else {
		b = append(b, 0)
	}
	return append(b, vals...)
}

// longData marks a param sent with COM_STMT_SEND_LONG_DATA.
type longData struct{}

func query(sql string) []byte { return append([]byte{comQuery}, sql...) }

func rows(n int) [][]any {
	out := make([][]any, n)
	for i := range out {
		out[i] = []any{i, "name", nil}
	}
	return out
}

// binlogDump is a replica's COM_BINLOG_DUMP: position, flags (1:
// non-blocking), its server id, the binlog file.
func binlogDump(flags uint16, file string) []byte {
	b := binary.LittleEndian.AppendUint32([]byte{comBinlogDump}, 4)
	b = binary.LittleEndian.AppendUint16(b, flags)
	b = binary.LittleEndian.AppendUint32(b, 2)
	return append(b, file...)
}

// binlogEvent is one packet of a binlog stream: 0x00, then an event of
// type typ (its 19-byte header and a body of n bytes).
func binlogEvent(typ byte, n int) []byte {
	ev := make([]byte, 1+19+n)
	ev[5] = typ
	binary.LittleEndian.PutUint32(ev[10:], uint32(19+n))
	for i := 20; i < len(ev); i++ {
		ev[i] = byte(i) // bytes of every value, 0xFE and 0xFF among them
	}
	return ev
}

// semiSyncAck is a semi-synchronous replica's acknowledgement: its own
// packet (sequence 0, magic 0xEF), binlog position and file.
func semiSyncAck() []byte {
	return append(binary.LittleEndian.AppendUint64([]byte{0xef}, 1234), "mariadb-bin.000001"...)
}

type decodeCase struct {
	name  string
	build func(s *script)
	want  []summary
}

var decodeCases = []decodeCase{
	{"query ok", func(s *script) {
		s.client(query("INSERT INTO t VALUES (1),(2),(3)"))
		s.server(okPayload(0, 3, 7, 2, 0))
	}, []summary{{Cmd: "COM_QUERY", SQL: "INSERT INTO t VALUES (1),(2),(3)", Rows: 3}}},

	{"text result set", func(s *script) {
		s.client(query("SELECT a, b, c FROM t"))
		s.resultSet(3, rows(4), 2)
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT a, b, c FROM t", Rows: 4, ResultSets: 1}}},

	{"empty result set", func(s *script) {
		s.client(query("SELECT a FROM t WHERE 0"))
		s.resultSet(1, nil, 2)
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT a FROM t WHERE 0", ResultSets: 1}}},

	{"error", func(s *script) {
		s.client(query("SELEC 1"))
		s.server(errPayload(1064, "42000", "You have an error in your SQL syntax"))
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELEC 1", Err: "1064 42000 You have an error in your SQL syntax"}}},

	{"error mid rows", func(s *script) {
		s.client(query("SELECT * FROM big"))
		ps := s.resultPayloads(3, rows(2), 2, false)
		s.server(append(ps[:len(ps)-1], errPayload(1317, "70100", "Query execution was interrupted"))...)
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT * FROM big", Rows: 2, ResultSets: 1, Err: "1317 70100 Query execution was interrupted"}}},

	{"binlog dump stream", func(s *script) {
		s.client(query("SET @master_heartbeat_period=30000000000"))
		s.server(okPayload(0, 0, 0, 2, 0))
		s.client(binlogDump(0, "mariadb-bin.000001"))
		s.server(binlogEvent(4, 30), binlogEvent(15, 240)) // rotate, format description
		s.server(binlogEvent(27, 0))                       // a heartbeat while the primary waits
		s.add(ClientToServer, frame(0, semiSyncAck()))
		s.server(binlogEvent(2, 3000), binlogEvent(16, 8)) // a transaction
	}, []summary{{Cmd: "COM_QUERY", SQL: "SET @master_heartbeat_period=30000000000"},
		{Cmd: "COM_BINLOG_DUMP", Stream: true}}},

	{"binlog dump non-blocking at the end", func(s *script) {
		s.client(binlogDump(1, "mariadb-bin.000001"))
		s.server(binlogEvent(4, 30), binlogEvent(15, 240), s.endMarker(2))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{{Cmd: "COM_BINLOG_DUMP", Stream: true}, {Cmd: "COM_PING"}}},

	{"binlog dump refused", func(s *script) {
		s.client(append([]byte{comBinlogDumpGTID}, make([]byte, 18)...))
		s.server(errPayload(1236, "HY000", "Could not find first log file name in binary log index file"))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{{Cmd: "COM_BINLOG_DUMP_GTID", Err: "1236 HY000 Could not find first log file name in binary log index file"},
		{Cmd: "COM_PING"}}},

	{"multi statements", func(s *script) {
		s.client(query("SELECT 1; UPDATE t SET a=1; SELECT 2"))
		s.server(s.resultPayloads(1, rows(1), 2|statusMoreResults, false)...)
		s.seq-- // the server's sequence continues across results
		s.seq++
		s.server(okPayload(0, 5, 0, 2|statusMoreResults, 0))
		s.resultSet(1, rows(2), 2)
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT 1; UPDATE t SET a=1; SELECT 2", Rows: 3, ResultSets: 2}}},

	{"multi statements error in second", func(s *script) {
		s.client(query("SELECT 1; SELEC 2; SELECT 3"))
		s.server(s.resultPayloads(1, rows(1), 2|statusMoreResults, false)...)
		s.server(errPayload(1064, "42000", "syntax"))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT 1; SELEC 2; SELECT 3", Rows: 1, ResultSets: 1, Err: "1064 42000 syntax"},
		{Cmd: "COM_PING"}}},

	{"call with two result sets", func(s *script) {
		s.client(query("CALL two()"))
		s.server(s.resultPayloads(2, rows(3), 2|statusMoreResults, false)...)
		s.server(s.resultPayloads(1, rows(5), 2|statusMoreResults, false)...)
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{{Cmd: "COM_QUERY", SQL: "CALL two()", Rows: 8, ResultSets: 2}}},

	{"local infile", func(s *script) {
		s.client(query("LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE t"))
		s.server(append([]byte{0xfb}, "/tmp/x.csv"...))
		s.clientMore([]byte("1,a\n2,b\n"))
		s.clientMore([]byte("3,c\n"))
		s.clientMore(nil)
		s.server(okPayload(0, 3, 0, 2, 0))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{{Cmd: "COM_QUERY", SQL: "LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE t", Rows: 3, Note: noteLocalInfile},
		{Cmd: "COM_PING"}}},

	{"local infile refused", func(s *script) {
		s.client(query("LOAD DATA LOCAL INFILE 'x' INTO TABLE t"))
		s.server(append([]byte{0xfb}, "x"...))
		s.clientMore(nil)
		s.server(errPayload(4166, "HY000", "The used command is not allowed because the MariaDB server or client has disabled the local infile capability"))
	}, []summary{{Cmd: "COM_QUERY", SQL: "LOAD DATA LOCAL INFILE 'x' INTO TABLE t", Note: noteLocalInfile,
		Err: "4166 HY000 The used command is not allowed because the MariaDB server or client has disabled the local infile capability"}}},

	{"prepared statement lifecycle", func(s *script) {
		s.prepare("SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?", 7, 5, 3)
		s.client(execPayload(7, 0, true, int64(-42), "it's", nil, 2.5, dt{2024, 1, 2, 3, 4, 5, 6}))
		s.server(s.resultPayloads(3, rows(2), 2, true)...)
		s.client(execPayload(7, 0, false, int64(1), "b", nil, 0.25, dt{2025, 12, 31, 0, 0, 0, 0}))
		s.server(s.resultPayloads(3, rows(1), 2, true)...)
		s.client(binary.LittleEndian.AppendUint32([]byte{comStmtClose}, 7))
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?"},
		{Cmd: "COM_STMT_EXECUTE", SQL: "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?", Rows: 2, ResultSets: 1,
			Params: `-42,'it\'s',NULL,2.5,'2024-01-02 03:04:05.000006'`},
		{Cmd: "COM_STMT_EXECUTE", SQL: "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?", Rows: 1, ResultSets: 1,
			Params: `1,'b',NULL,0.25,'2025-12-31 00:00:00'`},
		{Cmd: "COM_STMT_CLOSE", SQL: "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ? AND e = ?", NoResp: true},
		{Cmd: "COM_PING"},
	}},

	{"prepared insert with blob, float, tiny, unsigned", func(s *script) {
		s.prepare("INSERT INTO t VALUES (?,?,?,?)", 1, 4, 0)
		s.client(execPayload(1, 0, true, []byte{0, 1, 0xff}, float32(1.5), int8(-3), uint64(math.MaxUint64)))
		s.server(okPayload(0, 1, 99, 2, 0))
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "INSERT INTO t VALUES (?,?,?,?)"},
		{Cmd: "COM_STMT_EXECUTE", SQL: "INSERT INTO t VALUES (?,?,?,?)", Rows: 1, Params: `X'0001FF',1.5,-3,18446744073709551615`},
	}},

	{"send long data", func(s *script) {
		s.prepare("INSERT INTO t VALUES (?, ?)", 3, 2, 0)
		ld := binary.LittleEndian.AppendUint32([]byte{comStmtSendLongData}, 3)
		ld = binary.LittleEndian.AppendUint16(ld, 1)
		s.client(append(ld, bytes.Repeat([]byte("x"), 1000)...))
		s.client(execPayload(3, 0, true, int64(5), longData{}))
		s.server(okPayload(0, 1, 0, 2, 0))
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "INSERT INTO t VALUES (?, ?)"},
		{Cmd: "COM_STMT_SEND_LONG_DATA", SQL: "INSERT INTO t VALUES (?, ?)", NoResp: true},
		{Cmd: "COM_STMT_EXECUTE", SQL: "INSERT INTO t VALUES (?, ?)", Rows: 1, Params: `5,'<long data>'`},
	}},

	{"prepare error and unknown statement", func(s *script) {
		s.client(append([]byte{comStmtPrepare}, "SELEC ?"...))
		s.server(errPayload(1064, "42000", "syntax"))
		s.client(execPayload(99, 0, true, int64(1)))
		s.server(errPayload(1243, "HY000", "Unknown prepared statement handler"))
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "SELEC ?", Err: "1064 42000 syntax"},
		{Cmd: "COM_STMT_EXECUTE", Note: noteUnknownStmt, Err: "1243 HY000 Unknown prepared statement handler"},
	}},

	{"cursor and fetch", func(s *script) {
		s.prepare("SELECT a FROM t", 2, 0, 1)
		s.client(execPayload(2, 1, false))
		ps := [][]byte{lenenc(1), colDef("a")}
		ps = append(ps, s.endMarker(2|statusCursorExists))
		s.server(ps...)
		s.client(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte{comStmtFetch}, 2), 10))
		s.server(binRow([]any{1}), binRow([]any{2}), s.endMarker(2|statusCursorExists|0x80))
		s.client(binary.LittleEndian.AppendUint32([]byte{comStmtReset}, 2))
		s.server(okPayload(0, 0, 0, 2, 0))
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "SELECT a FROM t"},
		{Cmd: "COM_STMT_EXECUTE", SQL: "SELECT a FROM t", ResultSets: 1, Params: ""},
		{Cmd: "COM_STMT_FETCH", SQL: "SELECT a FROM t", Rows: 2},
		{Cmd: "COM_STMT_RESET", SQL: "SELECT a FROM t"},
	}},

	{"metadata cache: no column definitions", func(s *script) {
		s.prepare("SELECT a FROM t", 4, 0, 1)
		s.client(execPayload(4, 0, false))
		ps := [][]byte{{1, 0}}
		if !s.deprecate {
			ps = append(ps, eofPayload(0, 2))
		}
		ps = append(ps, binRow([]any{1}), s.endMarker(2))
		s.server(ps...)
	}, []summary{
		{Cmd: "COM_STMT_PREPARE", SQL: "SELECT a FROM t"},
		{Cmd: "COM_STMT_EXECUTE", SQL: "SELECT a FROM t", Rows: 1, ResultSets: 1, Params: ""},
	}},

	{"simple commands", func(s *script) {
		s.client([]byte{comPing})
		s.server(okPayload(0, 0, 0, 2, 0))
		s.client(append([]byte{comInitDB}, "other"...))
		s.server(okPayload(0, 0, 0, 2, 0))
		s.client([]byte{comStatistics})
		s.server([]byte("Uptime: 5  Threads: 1  Questions: 4"))
		s.client(append([]byte{comFieldList}, "t\x00"...))
		s.server(colDef("a"), colDef("b"), eofPayload(0, 2))
		s.client([]byte{comProcessKill, 9, 0, 0, 0})
		s.server(errPayload(1094, "HY000", "Unknown thread id: 9"))
		s.client([]byte{comSetOption, 0, 0})
		s.server(eofPayload(0, 2))
		s.client([]byte{comResetConnection})
		s.server(okPayload(0, 0, 0, 2, 0))
		s.client([]byte{0x42})
		s.server(errPayload(1047, "08S01", "Unknown command"))
		s.client([]byte{comQuit})
	}, []summary{
		{Cmd: "COM_PING"},
		{Cmd: "COM_INIT_DB", SQL: "other"},
		{Cmd: "COM_STATISTICS"},
		{Cmd: "COM_FIELD_LIST", SQL: "t"},
		{Cmd: "COM_PROCESS_KILL", Err: "1094 HY000 Unknown thread id: 9"},
		{Cmd: "COM_SET_OPTION"},
		{Cmd: "COM_RESET_CONNECTION"},
		{Cmd: "COM_UNKNOWN_0x42", Err: "1047 08S01 Unknown command"},
		{Cmd: "COM_QUIT", NoResp: true},
	}},

	{"change user with auth switch", func(s *script) {
		cu := append([]byte{comChangeUser}, "bob\x00"...)
		cu = append(cu, 20)
		cu = append(cu, bytes.Repeat([]byte{1}, 20)...)
		cu = append(cu, "sales\x00"...)
		cu = append(cu, 33, 0)
		cu = append(cu, "mysql_native_password\x00"...)
		s.client(cu)
		s.server(append(append([]byte{0xfe}, "client_ed25519\x00"...), bytes.Repeat([]byte{2}, 32)...))
		s.clientMore(bytes.Repeat([]byte{3}, 64))
		s.server(okPayload(0, 0, 0, 2, 0))
		s.client(query("SELECT 1"))
		s.resultSet(1, rows(1), 2)
	}, []summary{
		{Cmd: "COM_CHANGE_USER", SQL: ""},
		{Cmd: "COM_QUERY", SQL: "SELECT 1", Rows: 1, ResultSets: 1},
	}},

	{"progress report does not end the response", func(s *script) {
		s.client(query("ALTER TABLE t ADD c INT"))
		prog := []byte{0xff, 0xff, 0xff, 1, 1, 2, 0x10, 0x27, 0}
		s.server(prog, prog)
		s.server(okPayload(0, 10, 0, 2, 0))
	}, []summary{{Cmd: "COM_QUERY", SQL: "ALTER TABLE t ADD c INT", Rows: 10}}},

	{"large result", func(s *script) {
		s.client(query("SELECT * FROM big"))
		s.resultSet(3, rows(5000), 2)
	}, []summary{{Cmd: "COM_QUERY", SQL: "SELECT * FROM big", Rows: 5000, ResultSets: 1}}},
}

// variants runs build under each protocol variant.
var variants = []struct {
	name                string
	deprecate, compress bool
}{
	{"eof", false, false}, {"deprecate_eof", true, false},
	{"eof_compressed", false, true}, {"deprecate_eof_compressed", true, true},
}

func buildCase(c decodeCase, deprecate, compress bool) []chunk {
	s := newScript(deprecate)
	s.compress = compress
	s.handshake()
	c.build(s)
	return s.chunks
}

func TestDecodeCases(t *testing.T) {
	for _, c := range decodeCases {
		for _, v := range variants {
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				chunks := buildCase(c, v.deprecate, v.compress)
				r, d := decodeChunks(chunks, Options{}, nil)
				got := summaries(r.exs)
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("exchanges:\n got %+v\nwant %+v", got, c.want)
				}
				checkOrder(t, r.exs)
				if info := d.Info(); info.Compressed != v.compress || info.DeprecateEOF != v.deprecate {
					t.Errorf("info: compressed=%v deprecateEOF=%v", info.Compressed, info.DeprecateEOF)
				}
			})
		}
	}
}

// TestFragmentation feeds every case whole, byte by byte and in random
// chunks: the exchanges, times and byte counts must be identical.
func TestFragmentation(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, c := range decodeCases {
		for _, v := range variants {
			chunks := buildCase(c, v.deprecate, v.compress)
			whole, _ := decodeChunks(chunks, Options{}, nil)
			bytewise, _ := decodeChunks(chunks, Options{}, func(b []byte) [][]byte { return splitEvery(b, 1) })
			random, _ := decodeChunks(chunks, Options{}, func(b []byte) [][]byte { return splitRandom(rng, b) })
			if !reflect.DeepEqual(whole.exs, bytewise.exs) {
				t.Errorf("%s/%s: byte-by-byte differs:\n%+v\n%+v", c.name, v.name, whole.exs, bytewise.exs)
			}
			if !reflect.DeepEqual(whole.exs, random.exs) {
				t.Errorf("%s/%s: random chunks differ:\n%+v\n%+v", c.name, v.name, whole.exs, random.exs)
			}
		}
	}
}

func splitEvery(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

func splitRandom(rng *rand.Rand, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := min(len(b), 1+rng.Intn(40))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// checkOrder asserts the invariants every stream must keep.
func checkOrder(t testing.TB, exs []Exchange) {
	t.Helper()
	var prev int64
	for i, ex := range exs {
		if ex.ReqFirst < prev {
			t.Fatalf("exchange %d starts at %d before the previous one (%d)", i, ex.ReqFirst, prev)
		}
		prev = ex.ReqFirst
		if ex.ReqLast < ex.ReqFirst || (ex.RespLast != 0 && (ex.RespFirst < ex.ReqFirst || ex.RespLast < ex.RespFirst)) {
			t.Fatalf("exchange %d has times out of order: %+v", i, ex)
		}
	}
}

// TestSkipParams: without the literals, every case decodes to the same
// exchanges but for the parameters, which stay nil (the types of a
// statement's first execute still serve its later ones).
func TestSkipParams(t *testing.T) {
	var sawParams bool
	for _, c := range decodeCases {
		chunks := buildCase(c, false, false)
		full, _ := decodeChunks(chunks, Options{}, nil)
		skip, _ := decodeChunks(chunks, Options{SkipParams: true}, nil)
		if len(full.exs) != len(skip.exs) {
			t.Fatalf("%s: %d exchanges with parameters, %d without", c.name, len(full.exs), len(skip.exs))
		}
		for i := range full.exs {
			want := full.exs[i]
			sawParams = sawParams || len(want.Params) > 0
			if skip.exs[i].Params != nil {
				t.Errorf("%s: exchange %d rendered its parameters", c.name, i)
			}
			want.Params = nil
			if !reflect.DeepEqual(skip.exs[i], want) {
				t.Errorf("%s: exchange %d differs:\n got %+v\nwant %+v", c.name, i, skip.exs[i], want)
			}
		}
	}
	if !sawParams {
		t.Fatal("no case has parameters: the test compares nothing")
	}
}

// TestAwaitingMatchesWhatCloseFlushes: after every delivery of every
// case, Awaiting says whether a command is still unanswered, exactly
// when closing the connection then would emit an exchange for it; and a
// client command's first bytes make it true unless it expects no answer.
func TestAwaitingMatchesWhatCloseFlushes(t *testing.T) {
	seen := map[bool]int{}
	for _, c := range decodeCases {
		for _, v := range variants {
			chunks := buildCase(c, v.deprecate, v.compress)
			for i := range chunks {
				r := &recorder{}
				d := NewConnDecoder(r, Options{})
				for _, ch := range chunks[:i+1] {
					d.Feed(ch.dir, ch.ts, ch.data)
				}
				awaiting, before := d.Awaiting(), len(r.exs)
				seen[awaiting]++
				d.Close(chunks[i].ts + 1)
				if flushed := len(r.exs) > before; awaiting != flushed {
					t.Errorf("%s/%s after chunk %d: Awaiting %v, yet Close emitted %d exchanges", c.name, v.name, i, awaiting, len(r.exs)-before)
				}
			}
		}
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("the cases never showed both states: %v", seen)
	}
	t.Logf("awaiting after %d deliveries, not after %d", seen[true], seen[false])
}

// TestBinlogStreamEmittedAtItsStart: a replica's binlog dump is emitted
// when its first event arrives, timed to it, and nothing the stream
// carries after it (events, heartbeats, the replica's acknowledgements,
// its end at the connection's close) makes another exchange or leaves a
// command awaiting its answer.
func TestBinlogStreamEmittedAtItsStart(t *testing.T) {
	s := newScript(true)
	s.handshake()
	s.client(binlogDump(0, "mariadb-bin.000001"))
	s.server(binlogEvent(4, 30), binlogEvent(15, 240))
	first := s.chunks[len(s.chunks)-1]
	for range 50 {
		s.server(binlogEvent(2, 100), binlogEvent(16, 8))
		s.add(ClientToServer, frame(0, semiSyncAck()))
	}
	r := &recorder{}
	d := NewConnDecoder(r, Options{})
	for _, c := range s.chunks {
		d.Feed(c.dir, c.ts, c.data)
		if c.ts >= first.ts && (len(r.exs) != 1 || d.Awaiting()) {
			t.Fatalf("after the chunk at %d: %d exchanges, awaiting %v", c.ts, len(r.exs), d.Awaiting())
		}
	}
	d.Close(s.ts + 1)
	if len(r.exs) != 1 {
		t.Fatalf("%d exchanges: %+v", len(r.exs), summaries(r.exs))
	}
	ex := r.exs[0]
	firstEvent := int64(len(frame(0, binlogEvent(4, 30)))) // the response is its first packet, the rest the stream's
	if !ex.Stream || ex.Incomplete || ex.RespFirst != first.ts || ex.RespLast != first.ts || ex.RespBytes != firstEvent {
		t.Errorf("stream %v incomplete %v, response %d..%d (%d bytes); want its first event at %d (%d bytes)",
			ex.Stream, ex.Incomplete, ex.RespFirst, ex.RespLast, ex.RespBytes, first.ts, firstEvent)
	}
}
