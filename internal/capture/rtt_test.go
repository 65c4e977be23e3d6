package capture

import (
	"net/netip"
	"testing"
)

// linkConv is a conversation seen on the client's host across a link with
// the given one-way delay: the server's segments answer the client's after
// a round trip (plus server time for data).
func linkHandshake(c *conv, oneWayUS int64) []seg {
	syn := seg{src: c.cli, dst: c.srv, seq: c.cseq, flags: tcpSYN, win: 65535, wscale: 7, tsUS: c.step(10)}
	synAck := seg{src: c.srv, dst: c.cli, seq: c.sseq, ack: c.cseq + 1, flags: tcpSYN | tcpACK, win: 65535, wscale: 7, tsUS: c.step(2 * oneWayUS)}
	ack := seg{src: c.cli, dst: c.srv, seq: c.cseq + 1, ack: c.sseq + 1, flags: tcpACK, win: c.cliWin, wscale: -1, tsUS: c.step(10)}
	c.cseq++
	c.sseq++
	return []seg{syn, synAck, ack}
}

// exchange is a request and its response, the response arriving rtt +
// serverUS after the request (the ACK rides on the response).
func exchange(c *conv, rttUS, serverUS int64) []seg {
	q := c.fromClient([]byte("SELECT 1"))
	r := c.fromServer([]byte("answer\n"))
	r.tsUS = q.tsUS + rttUS + serverUS
	c.tsUS = r.tsUS
	return []seg{q, r}
}

func TestPathFromHandshakeOnClientHost(t *testing.T) {
	cli, srv := "10.0.0.2:40000", "10.0.0.1:3306"
	h := newHarness(Options{LocalAddrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}})
	c := newConv(cli, srv)
	h.feed(linkHandshake(c, 5000)...)
	h.feed(exchange(c, 10_000, 300)...)
	if len(h.stmts) != 1 {
		t.Fatalf("%d statements", len(h.stmts))
	}
	if got := h.stmts[0].TransitUS; got != 5000 {
		t.Errorf("transit %d us, want 5000 (half the SYN to SYN-ACK round trip)", got)
	}
	st := h.t.Stats().Path
	if st.Point != PointClient || st.Conns != 1 || st.RTTMinUS != 10_000 {
		t.Errorf("path stats %+v", st)
	}
}

func TestPathFromAcksMidStream(t *testing.T) {
	h := newHarness(Options{CapturePoint: PointBetween})
	c := newConv("10.0.0.2:40000", "10.0.0.1:3306")
	for _, serverUS := range []int64{900, 120, 400} {
		h.feed(exchange(c, 4000, serverUS)...)
	}
	// Each sample includes the server's time; the smallest is the estimate.
	if got := h.stmts[2].TransitUS; got != (4000+120)/2 {
		t.Errorf("transit %d, want %d", got, (4000+120)/2)
	}
	if got := h.stmts[0].TransitUS; got != (4000+900)/2 {
		t.Errorf("first statement's transit %d, want what was known then (%d)", got, (4000+900)/2)
	}
	st := h.t.Stats().Path
	if st.Point != PointBetween || st.SpreadUS != 280 {
		t.Errorf("path stats %+v, want spread 280 (median 400 - min 120)", st)
	}
}

func TestPathIgnoresRetransmittedRequests(t *testing.T) {
	h := newHarness(Options{CapturePoint: PointClient})
	c := newConv("10.0.0.2:40000", "10.0.0.1:3306")
	q := c.fromClient([]byte("SELECT 1"))
	again := q
	again.tsUS = c.step(200_000)
	r := c.fromServer([]byte("answer\n"))
	r.tsUS = again.tsUS + 3000
	h.feed(q, again, r)
	if st := h.t.Stats().Path; st.Conns != 0 {
		t.Errorf("a retransmitted request gave a sample: %+v", st)
	}
}

func TestPathOnServerHostCarriesNoTransit(t *testing.T) {
	h := newHarness(Options{LocalAddrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}})
	c := newConv("10.0.0.2:40000", "10.0.0.1:3306")
	h.feed(linkHandshake(c, 5000)...)
	h.feed(exchange(c, 10_000, 300)...)
	if s := h.stmts[0]; s.TransitUS != 0 {
		t.Errorf("server-host capture: transit %d, want 0 (the path lies beyond the client)", s.TransitUS)
	}
	if st := h.t.Stats().Path; st.Point != PointServer {
		t.Errorf("point %q", st.Point)
	}
}

func TestPointOf(t *testing.T) {
	cli := endpoint{ip: netip.MustParseAddr("::ffff:10.0.0.2").As16(), port: 40000}
	srv := endpoint{ip: netip.MustParseAddr("::ffff:10.0.0.1").As16(), port: 3306}
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	cases := []struct {
		forced string
		local  []netip.Addr
		want   string
	}{
		{"", nil, PointUnknown},
		{PointAuto, a("10.0.0.1"), PointServer},
		{PointAuto, a("10.0.0.1", "10.0.0.2"), PointServer}, // client on the server's host
		{"", a("10.0.0.2"), PointClient},
		{"", a("10.0.0.9"), PointBetween},
		{PointClient, a("10.0.0.1"), PointClient},
	}
	for _, tc := range cases {
		if got := pointOf(tc.forced, tc.local, cli, srv); got != tc.want {
			t.Errorf("pointOf(%q, %v) = %q, want %q", tc.forced, tc.local, got, tc.want)
		}
	}
}

func TestPathSummaryMixedPoints(t *testing.T) {
	var b pathBook
	b.noteFlow(PointClient)
	b.noteFlow(PointServer)
	r := pathRTT{}
	r.add(100)
	r.add(300)
	b.keep(&r)
	st := b.summary([]pathRecord{{minUS: 50, spreadUS: 0}, {minUS: 70, spreadUS: 10}})
	if st.Point != "mixed" || st.Conns != 3 || st.RTTMinUS != 50 || st.RTTMedianUS != 70 || st.RTTMaxUS != 100 || st.SpreadUS != 10 {
		t.Errorf("summary %+v", st)
	}
}

func TestTimestampOption(t *testing.T) {
	linux := []byte{1, 1, 8, 10, 0, 0, 0x10, 0, 0, 0, 0x20, 0}
	var p packet
	if !timestamps(linux, &p) || p.tsVal != 0x1000 || p.tsEcr != 0x2000 {
		t.Errorf("Linux layout: %v %x %x", p.hasTS, p.tsVal, p.tsEcr)
	}
	other := []byte{2, 4, 0x05, 0xb4, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 0, 0}
	if !timestamps(other, &p) || p.tsVal != 7 || p.tsEcr != 9 {
		t.Errorf("after MSS: %x %x", p.tsVal, p.tsEcr)
	}
	for _, bad := range [][]byte{{}, {0}, {1, 1, 8}, {8, 10, 0, 0}, {3, 3, 7}, {2, 0, 8, 10}} {
		if timestamps(bad, &p) {
			t.Errorf("timestamps found in % x", bad)
		}
	}
}

// With timestamps, a segment without new data that the server echoes
// gives a sample too, and a retransmission does not stop it.
func TestPathFromTimestampEchoes(t *testing.T) {
	var r pathRTT
	r.segment(toServer, &packet{tsUS: 1000, flags: tcpACK, seq: 10, hasTS: true, tsVal: 500})
	r.segment(toServer, &packet{tsUS: 1500, flags: tcpACK, seq: 10, hasTS: true, tsVal: 501})
	r.segment(toClient, &packet{tsUS: 9000, flags: tcpACK, hasTS: true, tsEcr: 499}) // an older echo: no sample
	if r.minUS != 0 {
		t.Fatalf("sample from an older echo: %d", r.minUS)
	}
	r.segment(toClient, &packet{tsUS: 9100, flags: tcpACK, hasTS: true, tsEcr: 501})
	if r.minUS != 8100 {
		t.Errorf("min %d, want 8100 (first TSval 500 seen at 1000, echo of a later one at 9100)", r.minUS)
	}
}
