package capture

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
	"github.com/gopacket/gopacket/layers"
)

// fakeDec records what a flow delivers. It speaks a toy protocol so the
// tracker's statement building can be tested without mysqlproto: a client
// flight is a request (its bytes are the SQL), and a server flight ending in
// '\n' completes the response.
type fakeDec struct {
	h      mysqlproto.Handler
	opts   mysqlproto.Options
	info   mysqlproto.ConnInfo
	fed    [2]bytes.Buffer
	feeds  []string // "dir:ts:bytes" log
	gaps   []mysqlproto.Direction
	closed bool
	tlsOn  string // client bytes that switch the flow to TLS

	ex       mysqlproto.Exchange
	inReq    bool
	req      bytes.Buffer
	respSeen bool
}

func (d *fakeDec) Feed(dir mysqlproto.Direction, ts int64, data []byte) {
	d.fed[dir].Write(data)
	d.feeds = append(d.feeds, fmt.Sprintf("%d:%d:%s", dir, ts, data))
	if dir == toServer {
		if d.tlsOn != "" && string(data) == d.tlsOn {
			d.info.TLS = true
			return
		}
		if !d.inReq {
			d.inReq, d.respSeen = true, false
			d.req.Reset()
			d.ex = mysqlproto.Exchange{Cmd: comQuery, CmdName: "COM_QUERY", ReqFirst: ts}
		}
		d.req.Write(data)
		d.ex.ReqLast = ts
		d.ex.ReqBytes += int64(len(data))
		return
	}
	if !d.inReq {
		return
	}
	if !d.respSeen {
		d.respSeen, d.ex.RespFirst = true, ts
	}
	d.ex.RespLast = ts
	d.ex.RespBytes += int64(len(data))
	if data[len(data)-1] == '\n' {
		d.finish()
	}
}

func (d *fakeDec) finish() {
	d.ex.SQL = d.req.Bytes()
	d.ex.Rows = 1
	d.inReq = false
	d.h.OnExchange(&d.ex, &d.info)
}

func (d *fakeDec) Gap(dir mysqlproto.Direction, ts int64) { d.gaps = append(d.gaps, dir) }
func (d *fakeDec) Close(ts int64) {
	d.closed = true
	if d.inReq {
		d.ex.Incomplete = true
		d.finish()
	}
}
func (d *fakeDec) Info() *mysqlproto.ConnInfo { return &d.info }
func (d *fakeDec) Awaiting() bool             { return d.inReq }

// harness is a tracker with fake decoders and collected statements.
type harness struct {
	t     *Tracker
	decs  []*fakeDec
	stmts []*event.Statement
	tlsOn string
}

func newHarness(opts Options) *harness {
	h := &harness{}
	h.t = NewTracker(opts, func(s *event.Statement) { h.stmts = append(h.stmts, s) })
	h.t.newDec = func(hd mysqlproto.Handler, o mysqlproto.Options) connDecoder {
		d := &fakeDec{h: hd, opts: o, tlsOn: h.tlsOn}
		d.info.ConnID, d.info.User = 42, "app"
		h.decs = append(h.decs, d)
		return d
	}
	return h
}

func (h *harness) feed(segs ...seg) {
	for _, s := range segs {
		h.t.Packet(linkEthernet, s.tsUS, frame(linkEthernet, s))
	}
}

func (h *harness) dec(tb testing.TB) *fakeDec {
	tb.Helper()
	if len(h.decs) != 1 {
		tb.Fatalf("%d decoders, want 1", len(h.decs))
	}
	return h.decs[0]
}

func TestTrackerStatementFromHandshake(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("192.168.1.10:40000", "192.168.1.20:3306")
	h.feed(c.handshake(7, 7)...)
	q := c.fromClient([]byte("SELECT * FROM t WHERE id = 42"))
	r1 := c.fromServer([]byte("rows..."))
	r2 := c.fromServer([]byte("end\n"))
	h.feed(q, r1, r2)
	if len(h.stmts) != 1 {
		t.Fatalf("%d statements, want 1", len(h.stmts))
	}
	s := h.stmts[0]
	if s.Conn != "192.168.1.10:40000>192.168.1.20:3306" || s.ConnID != 42 || s.User != "app" || s.Cmd != "COM_QUERY" {
		t.Errorf("identity: %+v", s)
	}
	if s.TReqFirst != q.tsUS || s.TReqLast != q.tsUS || s.TRespFirst != r1.tsUS || s.TRespLast != r2.tsUS {
		t.Errorf("times: %d %d %d %d", s.TReqFirst, s.TReqLast, s.TRespFirst, s.TRespLast)
	}
	if s.ClientUS != r2.tsUS-q.tsUS || s.RespBytes != 11 || s.Rows != 1 || s.Joined {
		t.Errorf("client_us %d resp_bytes %d rows %d", s.ClientUS, s.RespBytes, s.Rows)
	}
	if strings.Contains(s.SQL, "42") || s.SQL != s.DigestText || s.Digest == "" {
		t.Errorf("literals not redacted: sql %q digest %q %q", s.SQL, s.DigestText, s.Digest)
	}
	if d := h.dec(t); d.opts.MidStream || len(s.Notes) != 0 {
		t.Errorf("handshake seen, yet mid-stream %v notes %v", d.opts.MidStream, s.Notes)
	}
	st := h.t.Stats()
	if st.Flows != 1 || st.Statements != 1 || st.MidStreamFlows != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestTrackerKeepLiteralsAndOwnStatements(t *testing.T) {
	h := newHarness(Options{KeepLiterals: true})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	h.feed(c.fromClient([]byte("/* gapscope */ SELECT NOW(6)")), c.fromServer([]byte("x\n")))
	h.feed(c.fromClient([]byte("SELECT 'secret'")), c.fromServer([]byte("x\n")))
	if len(h.stmts) != 1 || h.stmts[0].SQL != "SELECT 'secret'" {
		t.Fatalf("statements %+v", h.stmts)
	}
	if st := h.t.Stats(); st.OwnStatements != 1 {
		t.Errorf("own statements %d", st.OwnStatements)
	}
}

func TestTrackerServerSide(t *testing.T) {
	greeting := greetingPacket()
	command := mysqlPacket(0, append([]byte{comQuery}, "SELECT 1"...))
	cases := []struct {
		name      string
		ports     []uint16
		build     func(c *conv) []seg
		wantFlows int64
		wantMid   bool
	}{
		{"port, mid-stream", nil, func(c *conv) []seg {
			return []seg{c.fromServer([]byte("late bytes")), c.fromClient([]byte("q"))}
		}, 1, true},
		{"SYN on an unknown port, greeting", []uint16{1}, func(c *conv) []seg {
			return append(c.handshake(-1, -1), c.fromServer(greeting))
		}, 1, false},
		{"SYN on an unknown port, not MySQL", []uint16{1}, func(c *conv) []seg {
			return append(c.handshake(-1, -1), c.fromClient([]byte("GET / HTTP/1.1\r\n")))
		}, 0, false},
		{"mid-stream unknown port, command", []uint16{1}, func(c *conv) []seg {
			return []seg{c.fromClient(command)}
		}, 1, true},
		{"mid-stream unknown port, garbage", []uint16{1}, func(c *conv) []seg {
			return []seg{c.fromServer([]byte("\x16\x03\x01 tls")), c.fromClient([]byte("x"))}
		}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(Options{Ports: tc.ports})
			c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
			h.feed(tc.build(c)...)
			st := h.t.Stats()
			if st.Flows != tc.wantFlows || (st.NonMySQLFlows == 1) != (tc.wantFlows == 0) {
				t.Fatalf("flows %d non-mysql %d", st.Flows, st.NonMySQLFlows)
			}
			if tc.wantFlows == 0 {
				return
			}
			d := h.dec(t)
			if d.opts.MidStream != tc.wantMid {
				t.Errorf("MidStream = %v", d.opts.MidStream)
			}
			// Whatever decided it, bytes from 10.0.0.2 must be the server's.
			if d.fed[toServer].Len() > 0 && bytes.Contains(d.fed[toServer].Bytes(), greeting) {
				t.Errorf("greeting delivered as client bytes")
			}
			h.t.Close(c.step(1))
			if len(h.stmts) > 0 && h.stmts[0].Conn != "10.0.0.1:40000>10.0.0.2:3306" {
				t.Errorf("conn %q", h.stmts[0].Conn)
			}
		})
	}
}

func TestTrackerRetransmissions(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	q := c.fromClient([]byte("SELECT 1"))
	r1 := c.fromServer([]byte("abcd"))
	r2 := c.fromServer([]byte("efgh"))
	// Overlapping retransmission: old "gh" plus new "ij\n".
	r3 := seg{src: r2.src, dst: r2.dst, seq: r2.seq + 2, ack: r2.ack, flags: tcpACK, win: 100, wscale: -1, payload: []byte("ghij\n"), tsUS: c.step(50)}
	h.feed(q, q, r1, r2, r1, r3)
	d := h.dec(t)
	if got := d.fed[toClient].String(); got != "abcdefghij\n" {
		t.Errorf("server bytes %q", got)
	}
	if got := d.fed[toServer].String(); got != "SELECT 1" {
		t.Errorf("client bytes %q", got)
	}
	if len(h.stmts) != 1 || h.stmts[0].Retransmits != 3 {
		t.Fatalf("statements %+v", h.stmts)
	}
	if st := h.t.Stats(); st.Retransmits != 3 {
		t.Errorf("stats retransmits %d", st.Retransmits)
	}
}

func TestTrackerKeepAliveIsNotRetransmission(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	ka := seg{src: c.cli, dst: c.srv, seq: c.cseq - 1, ack: c.sseq, flags: tcpACK, win: 100, wscale: -1, payload: []byte{0}, tsUS: c.step(1)}
	h.feed(ka)
	if st := h.t.Stats(); st.Retransmits != 0 || h.dec(t).fed[toServer].Len() != 0 {
		t.Errorf("keep-alive counted: %+v", st)
	}
}

func TestTrackerReordering(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("[fe80::1]:40000", "[fe80::2]:3306")
	h.feed(c.handshake(-1, -1)...)
	q := c.fromClient([]byte("SELECT 1"))
	a, b, e := c.fromServer([]byte("one,")), c.fromServer([]byte("two,")), c.fromServer([]byte("three\n"))
	e.tsUS, b.tsUS, a.tsUS = c.step(10), c.step(10), c.step(10) // arrival order
	h.feed(q, e, b, a)
	d := h.dec(t)
	if got := d.fed[toClient].String(); got != "one,two,three\n" {
		t.Errorf("server bytes %q", got)
	}
	st := h.t.Stats()
	if st.OutOfOrder != 2 || st.Gaps != 0 || len(d.gaps) != 0 {
		t.Errorf("stats %+v gaps %v", st, d.gaps)
	}
	// The response's bytes became readable when the hole filled.
	if len(h.stmts) != 1 || h.stmts[0].TRespLast != a.tsUS || h.stmts[0].Conn != "[fe80::1]:40000>[fe80::2]:3306" {
		t.Errorf("statement %+v want resp_last %d", *h.stmts[0], a.tsUS)
	}
}

// A hole in the response is declared lost once the client speaks again:
// MySQL is half duplex.
func TestTrackerLossResolvedByOtherDirection(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	q := c.fromClient([]byte("SELECT 1"))
	c.fromServer([]byte("lost")) // never captured
	r := c.fromServer([]byte("tail\n"))
	q2 := c.fromClient([]byte("SELECT 2"))
	h.feed(q, r, q2)
	d := h.dec(t)
	if len(d.gaps) != 1 || d.gaps[0] != toClient {
		t.Fatalf("gaps %v", d.gaps)
	}
	if got := d.fed[toClient].String(); got != "tail\n" {
		t.Errorf("server bytes %q", got)
	}
	if got := d.fed[toServer].String(); got != "SELECT 1SELECT 2" {
		t.Errorf("client bytes %q", got)
	}
	if st := h.t.Stats(); st.Gaps != 1 {
		t.Errorf("gaps %d", st.Gaps)
	}
}

func TestTrackerOutOfOrderBound(t *testing.T) {
	h := newHarness(Options{MaxOutOfOrder: 8})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	h.feed(c.fromClient([]byte("q")))
	c.fromServer([]byte("hole"))
	h.feed(c.fromServer([]byte("123456")), c.fromServer([]byte("789\n")))
	d := h.dec(t)
	if len(d.gaps) != 1 || d.fed[toClient].String() != "123456789\n" {
		t.Fatalf("gaps %v bytes %q", d.gaps, d.fed[toClient].String())
	}
	if f := h.t.flows; len(f) != 1 {
		t.Fatal(len(f))
	}
	for _, f := range h.t.flows {
		if f.half[toClient].oooBytes != 0 || len(f.half[toClient].ooo) != 0 {
			t.Errorf("buffer not drained: %d bytes", f.half[toClient].oooBytes)
		}
	}
}

func TestTrackerFinRstAndTombstone(t *testing.T) {
	for _, rst := range []bool{false, true} {
		h := newHarness(Options{})
		c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
		h.feed(c.handshake(-1, -1)...)
		h.feed(c.fromClient([]byte("SELECT SLEEP(10)")), c.fromServer([]byte("partial")))
		if rst {
			h.feed(seg{src: c.srv, dst: c.cli, seq: c.sseq, flags: tcpRST, wscale: -1, tsUS: c.step(5)})
		} else {
			h.feed(c.fin(true), c.fin(false))
		}
		d := h.dec(t)
		if !d.closed {
			t.Fatalf("rst=%v: decoder not closed", rst)
		}
		if len(h.stmts) != 1 || !strings.Contains(strings.Join(h.stmts[0].Notes, ","), "incomplete") {
			t.Fatalf("rst=%v: statements %+v", rst, h.stmts)
		}
		// The final ACK must not start a new mid-stream connection.
		h.feed(c.clientAck(100), c.fromClient([]byte("stray")))
		if len(h.decs) != 1 || h.t.Stats().Flows != 1 {
			t.Errorf("rst=%v: %d decoders after close", rst, len(h.decs))
		}
		// A new SYN on the same 4-tuple is a new connection.
		h.feed(c.handshake(-1, -1)...)
		if len(h.decs) != 2 {
			t.Errorf("rst=%v: port reuse not a new connection", rst)
		}
	}
}

func TestTrackerIdleEvictionAndMaxFlows(t *testing.T) {
	h := newHarness(Options{IdleTimeout: time.Minute, MaxFlows: 2})
	var convs []*conv
	for i := range 3 {
		c := newConv(fmt.Sprintf("10.0.0.1:%d", 40000+i), "10.0.0.2:3306")
		convs = append(convs, c)
		h.feed(c.handshake(-1, -1)...)
	}
	if st := h.t.Stats(); st.Flows != 2 || st.UntrackedPackets != 3 {
		t.Fatalf("max flows: %+v", st)
	}
	// Two minutes later the first two are idle: a new connection evicts them.
	c := newConv("10.0.0.1:50000", "10.0.0.2:3306")
	c.tsUS = convs[2].tsUS + 2*time.Minute.Microseconds()
	h.feed(c.handshake(-1, -1)...)
	st := h.t.Stats()
	if st.EvictedFlows != 2 || st.Flows != 3 || len(h.t.flows) > 2 {
		t.Fatalf("eviction: %+v, %d flows", st, len(h.t.flows))
	}
	for _, d := range h.decs[:2] {
		if !d.closed {
			t.Error("evicted decoder not closed")
		}
	}
}

// The client advertises a zero window while the server sends a response: the
// stall is recorded on that statement, clipped to [req_last, resp_last].
func TestTrackerZeroWindow(t *testing.T) {
	var stalls atomic.Int64
	h := newHarness(Options{Stalls: &stalls})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...) // no window scaling: zero windows only
	q := c.fromClient([]byte("SELECT big"))
	r1 := c.fromServer([]byte("chunk1"))
	zw := c.clientAck(0)
	probe := seg{src: c.srv, dst: c.cli, seq: c.sseq - 1, ack: c.cseq, flags: tcpACK, wscale: -1, payload: []byte("1"), tsUS: c.step(1000)}
	open := c.clientAck(300)
	r2 := c.fromServer([]byte("chunk2\n"))
	h.feed(q, r1, zw)
	if stalls.Load() != 1 {
		t.Fatalf("Stalls %d after the zero window, want 1 (counted as it begins, before the statement ends)", stalls.Load())
	}
	h.feed(probe, open, r2)
	if got := stalls.Load(); got != 3 {
		t.Fatalf("Stalls %d, want 3: the zero window, the probe, the segment that opened it", got)
	}
	if len(h.stmts) != 1 {
		t.Fatalf("%d statements", len(h.stmts))
	}
	s := h.stmts[0]
	want := open.tsUS - zw.tsUS
	if s.ZeroWindowUS != want || s.Retransmits != 0 {
		t.Errorf("zero_window_us %d retransmits %d, want %d, 0", s.ZeroWindowUS, s.Retransmits, want)
	}
	checkSpans(t, s, []event.Span{{Start: zw.tsUS, End: open.tsUS}})
	// The next statement starts clean.
	h.feed(c.fromClient([]byte("SELECT 1")), c.fromServer([]byte("x\n")))
	if s := h.stmts[1]; s.ZeroWindowUS != 0 {
		t.Errorf("stall leaked into the next statement: %d", s.ZeroWindowUS)
	}
	if got := stalls.Load(); got != 3 {
		t.Errorf("Stalls %d after an unstalled statement, want still 3", got)
	}
}

// With window scaling known from both SYNs, a server that has sent up to the
// client's right edge is stalled even though the window is not zero.
func TestTrackerWindowFull(t *testing.T) {
	h := newHarness(Options{})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	c.cliWin = 1 // 1 << 3 = 8 bytes of window
	h.feed(c.handshake(3, 7)...)
	q := c.fromClient([]byte("SELECT big"))
	r1 := c.fromServer([]byte("12345678")) // fills the 8-byte window
	ack := c.clientAck(1)                  // acks it, opens 8 more bytes
	r2 := c.fromServer([]byte("abc\n"))
	h.feed(q, r1, ack, r2)
	if len(h.stmts) != 1 {
		t.Fatalf("%d statements", len(h.stmts))
	}
	s := h.stmts[0]
	if s.ZeroWindowUS != ack.tsUS-r1.tsUS {
		t.Errorf("window-full stall %d, want %d", s.ZeroWindowUS, ack.tsUS-r1.tsUS)
	}
}

// tlsRecord is a TLS record of type typ around payload.
func tlsRecord(typ byte, payload string) []byte {
	return append([]byte{typ, 3, 3, byte(len(payload) >> 8), byte(len(payload))}, payload...)
}

func TestTrackerTLSFlights(t *testing.T) {
	for _, tc := range []struct {
		name       string
		loginApart bool
		finished   []byte // the client's Finished and what precedes it
	}{
		{"TLS 1.2, login apart", true, append(tlsRecord(0x14, "\x01"), tlsRecord(0x16, "finished")...)},
		{"TLS 1.2, login with Finished", false, append(tlsRecord(0x14, "\x01"), tlsRecord(0x16, "finished")...)},
		{"TLS 1.3, login apart", true, append(tlsRecord(0x14, "\x01"), tlsRecord(0x17, "finished")...)},
		{"TLS 1.3, login with Finished", false, append(tlsRecord(0x14, "\x01"), tlsRecord(0x17, "finished")...)},
		{"TLS 1.3 with a client certificate", true, append(append(tlsRecord(0x14, "\x01"), tlsRecord(0x17, "certificate")...), tlsRecord(0x17, "finished")...)},
		{"TLS 1.3 without ChangeCipherSpec", true, tlsRecord(0x17, "finished")},
		{"TLS 1.3 without ChangeCipherSpec, login with Finished", false, tlsRecord(0x17, "finished")},
	} {
		loginApart := tc.loginApart
		h := newHarness(Options{})
		h.tlsOn = "SSLREQ"
		c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
		h.feed(c.handshake(-1, -1)...)
		h.feed(c.fromServer([]byte("greeting")), c.fromClient([]byte("SSLREQ")))
		// TLS handshake flights (record type 0x16) are not statements, nor is
		// the login that follows (the handshake response and its OK): in a
		// flight of its own (pymysql) or in the one that ends the handshake
		// (the mariadb CLI: Finished and the login together).
		serverHello := tlsRecord(0x16, "server hello")
		if strings.HasPrefix(tc.name, "TLS 1.3") {
			serverHello = append(serverHello, tlsRecord(0x17, "encrypted extensions")...)
		}
		h.feed(c.fromClient(tlsRecord(0x16, "hello")), c.fromServer(serverHello))
		if loginApart {
			h.feed(c.fromClient(tc.finished), c.fromServer(tlsRecord(0x17, "ticket")))
			h.feed(c.fromClient(tlsRecord(0x17, "login")), c.fromServer(tlsRecord(0x17, "ok")))
		} else {
			// The same flight, the login in a segment of its own (the
			// application's write after the TLS library's).
			h.feed(c.fromClient(tc.finished), c.fromClient(tlsRecord(0x17, "login")), c.fromServer(tlsRecord(0x17, "ok")))
		}
		q1 := c.fromClient(tlsRecord(0x17, "query1"))
		r1a, r1b := c.fromServer(tlsRecord(0x17, "resp")), c.fromServer([]byte("more"))
		q2 := c.fromClient(tlsRecord(0x17, "query2"))
		r2 := c.fromServer(tlsRecord(0x17, "resp2"))
		h.feed(q1, r1a, r1b, q2, r2)
		h.t.Close(c.step(10))
		if len(h.stmts) != 2 {
			t.Fatalf("%s: %d statements, want 2: %+v", tc.name, len(h.stmts), h.stmts)
		}
		s := h.stmts[0]
		if s.Cmd != "TLS" || s.SQL != "" || s.TReqFirst != q1.tsUS || s.TRespFirst != r1a.tsUS || s.TRespLast != r1b.tsUS || s.ClientUS != r1b.tsUS-q1.tsUS {
			t.Errorf("first flight: %+v", s)
		}
		if !strings.Contains(strings.Join(s.Notes, ","), "tls: no sql text") {
			t.Errorf("notes %v", s.Notes)
		}
		if h.stmts[1].TRespLast != r2.tsUS || h.t.Stats().TLSFlows != 1 {
			t.Errorf("second flight %+v", h.stmts[1])
		}
		if got := h.dec(t).fed[toServer].String(); got != "SSLREQ" {
			t.Errorf("encrypted bytes reached the decoder: %q", got)
		}
	}
}

func TestTrackerNonTCPAndFragmentsCounted(t *testing.T) {
	h := newHarness(Options{})
	s := testSeg(false)
	f := frame(linkRaw, s)
	f[6] = 0x20 // MF
	h.t.Packet(linkRaw, 1, f)
	h.t.Packet(linkRaw, 2, f[:10])
	h.t.Packet(layers.LinkType(147), 3, f)
	st := h.t.Stats()
	if st.Packets != 3 || st.Fragments != 1 || st.Malformed != 1 || len(st.Notes) != 2 {
		t.Errorf("stats %+v", st)
	}
}

// greetingPacket is a Handshake v10 as MariaDB 10.11 sends it (connection
// id 42, mysql_native_password).
func greetingPacket() []byte {
	p := []byte{10}
	p = append(p, "5.5.5-10.11.6-MariaDB-0+deb12u1\x00"...)
	p = append(p, 42, 0, 0, 0)       // connection id
	p = append(p, "abcdefgh\x00"...) // auth data part 1 + filler
	p = append(p, 0xfe, 0xf7, 8, 0x02, 0, 0xff, 0x81, 21)
	p = append(p, make([]byte, 6)...)    // reserved
	p = append(p, 0x1d, 0, 0, 0)         // MariaDB capabilities
	p = append(p, "ijklmnopqrst\x00"...) // auth data part 2
	p = append(p, "mysql_native_password\x00"...)
	return mysqlPacket(0, p)
}

func checkSpans(t *testing.T, s *event.Statement, want []event.Span) {
	t.Helper()
	got := statementSpans(s)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("spans %v, want %v", got, want)
	}
}

// TestTrackerFlowCacheSharedSlot: connections whose ports put them in the
// same place of the tracker's flow cache (same ports, other client
// addresses), their packets interleaved, each reach their own decoder;
// a connection closed and reopened on its 4-tuple, and one evicted then
// seen again, are new connections, never the cached old flow.
func TestTrackerFlowCacheSharedSlot(t *testing.T) {
	h := newHarness(Options{IdleTimeout: time.Minute})
	a := newConv("10.0.0.1:40000", "10.0.0.9:3306")
	b := newConv("10.0.0.2:40000", "10.0.0.9:3306")
	key := func(c *conv) flowKey {
		return flowKey{endpoint{c.cli.Addr().As16(), c.cli.Port()}, endpoint{c.srv.Addr().As16(), c.srv.Port()}}
	}
	if ka, kb := key(a), key(b); ka == kb || flowSlot(&ka) != flowSlot(&kb) {
		t.Fatal("the two connections do not share a place in the flow cache: the test proves nothing")
	}
	h.feed(a.handshake(-1, -1)...)
	h.feed(b.handshake(-1, -1)...)
	for i := range 3 {
		h.feed(a.fromClient([]byte(fmt.Sprintf("SELECT %d", i))), b.fromClient([]byte(fmt.Sprintf("SELECT %d", 10+i))))
		h.feed(b.fromServer([]byte("b\n")), a.fromServer([]byte("a\n")))
	}
	if len(h.decs) != 2 {
		t.Fatalf("%d decoders for two connections", len(h.decs))
	}
	if got, want := h.decs[0].fed[toServer].String(), "SELECT 0SELECT 1SELECT 2"; got != want {
		t.Errorf("first connection's requests %q, want %q", got, want)
	}
	if got, want := h.decs[1].fed[toServer].String(), "SELECT 10SELECT 11SELECT 12"; got != want {
		t.Errorf("second connection's requests %q, want %q", got, want)
	}
	if len(h.stmts) != 6 {
		t.Errorf("%d statements, want 6", len(h.stmts))
	}
	// a closes and its 4-tuple opens again: a third decoder.
	h.feed(a.fin(true), a.fin(false))
	h.feed(a.handshake(-1, -1)...)
	h.feed(a.fromClient([]byte("SELECT 'again'")))
	if len(h.decs) != 3 || h.decs[2].fed[toServer].String() != "SELECT 'again'" {
		t.Fatalf("reopened connection: %d decoders", len(h.decs))
	}
	// b idles past the timeout and is evicted; its next packet is a new,
	// mid-stream connection.
	c := newConv("10.0.0.3:41000", "10.0.0.9:3306")
	c.tsUS = b.tsUS + 2*time.Minute.Microseconds()
	h.feed(c.handshake(-1, -1)...)
	if !h.decs[1].closed {
		t.Fatal("idle connection not evicted")
	}
	b.tsUS = c.tsUS
	h.feed(b.fromClient([]byte("SELECT 'late'")))
	if len(h.decs) != 5 || !h.decs[4].opts.MidStream || h.decs[4].fed[toServer].String() != "SELECT 'late'" {
		t.Fatalf("evicted connection seen again: %d decoders", len(h.decs))
	}
}

// TestTrackerStatementsFromSlabsStayApart: statements come from slabs of
// event.Slabs; each one handed out is its own, never written again by the
// tracker once emitted, across several slabs.
func TestTrackerStatementsFromSlabsStayApart(t *testing.T) {
	h := newHarness(Options{KeepLiterals: true})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	h.feed(c.handshake(-1, -1)...)
	n := 3*event.SlabLen + 2 // across several of event.Slabs' blocks
	for i := range n {
		h.feed(c.fromClient([]byte(fmt.Sprintf("SELECT %d", i))), c.fromServer([]byte("ok\n")))
	}
	if len(h.stmts) != n {
		t.Fatalf("%d statements, want %d", len(h.stmts), n)
	}
	seen := map[*event.Statement]bool{}
	for i, s := range h.stmts {
		if seen[s] {
			t.Fatalf("statement %d handed out twice", i)
		}
		seen[s] = true
		if want := fmt.Sprintf("SELECT %d", i); s.SQL != want || s.Rows != 1 || s.Conn == "" {
			t.Errorf("statement %d: %q rows %d conn %q, want %q", i, s.SQL, s.Rows, s.Conn, want)
		}
	}
}

// TestTrackerInFlight: Options.InFlight counts the connections whose
// command is not answered in full, and a connection leaves the count
// when it ends or is evicted mid-command (else a watch would read the
// server's running statements for ever).
func TestTrackerInFlight(t *testing.T) {
	var n atomic.Int64
	h := newHarness(Options{InFlight: &n, IdleTimeout: time.Minute})
	a := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	b := newConv("10.0.0.1:40001", "10.0.0.2:3306")
	h.feed(a.handshake(-1, -1)...)
	h.feed(b.handshake(-1, -1)...)
	want := func(step string, w int64) {
		t.Helper()
		if got := n.Load(); got != w {
			t.Errorf("%s: in flight %d, want %d", step, got, w)
		}
	}
	want("connected", 0)
	h.feed(a.fromClient([]byte("SELECT SLEEP(1)")))
	want("a asked", 1)
	h.feed(b.fromClient([]byte("SELECT 1")))
	want("b asked", 2)
	h.feed(a.fromServer([]byte("first rows")))
	want("a answering", 2)
	h.feed(a.fromServer([]byte("end\n")))
	want("a answered", 1)
	h.feed(b.fin(true), b.fin(false))
	want("b closed mid-command", 0)
	h.feed(a.fromClient([]byte("SELECT SLEEP(100)")))
	want("a asked again", 1)
	c := newConv("10.0.0.1:50000", "10.0.0.2:3306")
	c.tsUS = a.tsUS + 2*time.Minute.Microseconds()
	h.feed(c.handshake(-1, -1)...)
	want("a evicted idle", 0)
	// gapscope's own connection: once it sent one of gapscope's own
	// statements, its commands are not the application's.
	h.feed(c.fromClient([]byte("/* gapscope */ SELECT 1")))
	want("own connection's first command", 1)
	h.feed(c.fromServer([]byte("end\n")))
	h.feed(c.fromClient([]byte("/* gapscope */ SELECT 2")))
	want("own connection's next command", 0)
}
