package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// toRecord is what the kernel program writes for s (ebpfprog.go): the
// packet whole from its IP header, or, for an answer longer than
// head+tail, its headers and head, and its tail at the fixed place.
func toRecord(s seg, head, tail int) []byte {
	ip := ipBytes(s)
	n := len(s.payload)
	hdrs := len(ip) - n
	whole := s.src.Port() != 3306 || n <= head+tail
	var rec []byte
	if whole {
		rec = make([]byte, recordHeader+len(ip))
		copy(rec[recordHeader:], ip)
	} else {
		rec = make([]byte, cutRecordSize(int32(head), int32(tail)))
		copy(rec[recordHeader:], ip[:hdrs+head])
		copy(rec[recordHeader+recordMaxHeaders+head:], s.payload[n-tail:])
	}
	binary.NativeEndian.PutUint64(rec[0:], 12345)
	binary.NativeEndian.PutUint32(rec[8:], uint32(n))
	if whole {
		binary.NativeEndian.PutUint32(rec[12:], uint32(len(ip)))
	} else {
		binary.NativeEndian.PutUint32(rec[12:], uint32(hdrs+head))
		binary.NativeEndian.PutUint32(rec[16:], uint32(tail))
	}
	return rec
}

func TestDecodeRecord(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789"), 30)
	for _, addrs := range [][2]string{{"10.0.0.1:40000", "10.0.0.2:3306"}, {"[fd00::1]:40000", "[fd00::2]:3306"}} {
		c := newConv(addrs[0], addrs[1])
		c.handshake(7, 7)
		for _, s := range []seg{c.fromClient(payload), c.fromServer(payload[:80]), c.fromServer(payload)} {
			var p packet
			rec := toRecord(s, 64, 16)
			if r := decodeRecord(rec, 64, 777, &p); r != resultTCP {
				t.Fatalf("%v: %v", s.src, r)
			}
			cut := len(s.payload) > 80 && s.src.Port() == 3306
			if p.tsUS != 777 || netip.AddrFrom16(p.src.ip).Unmap() != s.src.Addr() || p.src.port != s.src.Port() ||
				p.dst.port != s.dst.Port() || p.seq != s.seq || p.ack != s.ack || p.flags != s.flags || p.window != s.win ||
				p.size != len(s.payload) || p.cut() != cut {
				t.Errorf("%v > %v: decoded %+v", s.src, s.dst, p)
			}
			switch {
			case cut && (!bytes.Equal(p.payload, s.payload[:64]) || !bytes.Equal(p.tail, s.payload[len(s.payload)-16:])):
				t.Errorf("cut record: head %q tail %q", p.payload, p.tail)
			case !cut && !bytes.Equal(p.payload, s.payload):
				t.Errorf("whole record: payload %q", p.payload)
			}
		}
		// Broken records are counted, never decoded.
		cut := toRecord(c.fromServer(payload), 64, 16)
		for name, rec := range map[string][]byte{
			"short":          cut[:10],
			"headers beyond": cut[:recordHeader+30],
			"tail beyond":    cut[:len(cut)-20],
			"not cut":        func() []byte { r := slices.Clone(cut); binary.NativeEndian.PutUint32(r[8:], 80); return r }(),
		} {
			var p packet
			if r := decodeRecord(rec, 64, 0, &p); r != resultMalformed {
				t.Errorf("%s record: %v, want malformed", name, r)
			}
		}
	}
}

// resultSet is a text-protocol result of one column (classic EOFs) with
// the rows given, sequence ids from 1.
func resultSet(rows ...[]byte) []byte {
	seq := byte(1)
	pkt := func(p []byte) []byte { b := mysqlPacket(seq, p); seq++; return b }
	out := pkt([]byte{1})
	out = append(out, pkt([]byte("\x03def\x00\x00\x00\x01v\x00\x0c\x21\x00\x00\x01\x00\x00\xfd\x00\x00\x00\x00\x00"))...)
	out = append(out, pkt([]byte{0xfe, 0, 0, 2, 0})...)
	for _, r := range rows {
		out = append(out, pkt(append(lenenc(len(r)), r...))...)
	}
	return append(out, pkt([]byte{0xfe, 0, 0, 2, 0})...)
}

func lenenc(n int) []byte {
	if n < 251 {
		return []byte{byte(n)}
	}
	return []byte{0xfc, byte(n), byte(n >> 8)}
}

func rowsOf(n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%0*d", size, i))
	}
	return out
}

// headPair feeds the same segments to a tracker reading frames whole (the
// AF_PACKET ring) and one reading header-only records, both with the real
// decoder.
type headPair struct {
	whole, heads []*event.Statement
	tw, th       *Tracker
	full         []bool
}

const testHead, testTail = 64, 16

func newHeadPair() *headPair {
	hp := &headPair{}
	hp.tw = NewTracker(Options{KeepLiterals: true}, func(s *event.Statement) { hp.whole = append(hp.whole, s) })
	hp.th = NewTracker(Options{KeepLiterals: true}, func(s *event.Statement) { hp.heads = append(hp.heads, s) })
	hp.th.heads = true
	hp.th.full = func(_ flowKey, _, on bool) { hp.full = append(hp.full, on) }
	return hp
}

func (hp *headPair) feed(segs ...seg) {
	for _, s := range segs {
		hp.tw.Packet(linkEthernet, s.tsUS, frame(linkEthernet, s))
		hp.th.Record(toRecord(s, testHead, testTail), testHead, s.tsUS)
	}
}

// query sends q and answers with the segments of answer split at the
// given offsets.
func query(c *conv, q string, answer []byte, splits ...int) []seg {
	segs := []seg{c.fromClient(mysqlPacket(0, append([]byte{comQuery}, q...)))}
	at := 0
	for _, s := range append(splits, len(answer)) {
		segs = append(segs, c.fromServer(answer[at:s]))
		at = s
	}
	return append(segs, c.clientAck(512))
}

// TestHeadAnswers: answers cut to their head and tail decode to the same
// statements as whole ones: the same text, bytes, times and errors; rows
// the same where the cut left the packet boundaries known (a row that
// spans the middle), said unknown where it did not (many rows in the
// middle), in one segment or several; an answer whose end is not in a
// tail ends at the client's next request and switches the connection to
// whole answers.
func TestHeadAnswers(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	hp := newHeadPair()
	hp.feed(c.handshake(7, 7)...)
	hp.feed(c.fromServer(greetingPacket()), c.fromClient(handshakeResponse()), c.fromServer(mysqlPacket(2, okPacket)))

	many := resultSet(rowsOf(200, 40)...)
	longErr := mysqlPacket(3, append([]byte{0xff, 0x24, 0x04, '#', 'H', 'Y', '0', '0', '0'}, bytes.Repeat([]byte("e"), 100)...))
	midErr := append(resultSet(rowsOf(50, 40)...)[:0:0], resultSet(rowsOf(50, 40)...)...)
	midErr = append(midErr[:len(midErr)-9], longErr...) // the rows, then an ERR instead of the final EOF
	hp.feed(query(c, "SELECT many", many)...)
	hp.feed(query(c, "SELECT one big row", resultSet(rowsOf(1, 3000)...))...)
	hp.feed(query(c, "SELECT in three segments", resultSet(rowsOf(400, 40)...), 5000, 11000)...)
	hp.feed(query(c, "SELECT small", resultSet(rowsOf(2, 5)...))...)
	hp.feed(query(c, "SELECT error at the end", midErr)...)
	hp.feed(query(c, "SELECT after", resultSet(rowsOf(3, 5)...))...)
	hp.feed(c.fromClient(mysqlPacket(0, []byte{0x01})), c.fin(true), c.fin(false))

	if len(hp.whole) != 7 || len(hp.heads) != 7 {
		t.Fatalf("%d statements whole, %d header-only; want 7", len(hp.whole), len(hp.heads))
	}
	unknown := map[string]bool{"SELECT many": true, "SELECT in three segments": true, "SELECT error at the end": true}
	for i, w := range hp.whole {
		h := hp.heads[i]
		if h.SQL != w.SQL || h.RespBytes != w.RespBytes || h.ReqBytes != w.ReqBytes || h.TReqFirst != w.TReqFirst ||
			h.TRespFirst != w.TRespFirst || h.TRespLast != w.TRespLast || h.ConnID != w.ConnID {
			t.Errorf("%q: header-only %+v\nwhole %+v", w.SQL, h, w)
		}
		if got := h.RowsUnknown(); got != unknown[w.SQL] {
			t.Errorf("%q: rows said unknown %v, want %v (notes %v)", w.SQL, got, unknown[w.SQL], h.Notes)
		}
		if !unknown[w.SQL] && h.Rows != w.Rows {
			t.Errorf("%q: %d rows, want %d", w.SQL, h.Rows, w.Rows)
		}
		if unknown[w.SQL] && h.Rows != 0 {
			t.Errorf("%q: rows %d, want 0 (unknown)", w.SQL, h.Rows)
		}
	}
	if w, h := hp.whole[4], hp.heads[4]; w.Error == nil || h.Error != nil || !slices.Contains(h.Notes, noteIncomplete) {
		t.Errorf("the answer whose end (an ERR past the tail) was not captured: whole error %v; header-only error %v notes %v, want incomplete, no error invented", w.Error, h.Error, h.Notes)
	}
	if !slices.Equal(hp.full, []bool{true, false}) {
		t.Errorf("full map calls %v, want the connection put in after the unfollowed answer and out at its close", hp.full)
	}
	st := hp.th.Stats()
	if st.CutPackets == 0 || st.RowsUnknown != 3 || st.FullFlows != 1 || st.Gaps != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A retransmitted cut answer is a retransmission, not new bytes; a cut
// answer ahead of a hole is kept until the hole fills.
func TestHeadAnswersRetransmittedAndReordered(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	hp := newHeadPair()
	hp.feed(c.handshake(7, 7)...)
	hp.feed(c.fromServer(greetingPacket()), c.fromClient(handshakeResponse()), c.fromServer(mysqlPacket(2, okPacket)))
	segs := query(c, "SELECT many", resultSet(rowsOf(200, 40)...), 4000)
	hp.feed(segs[0], segs[1], segs[1], segs[2], segs[3])
	if len(hp.heads) != 1 || hp.heads[0].Retransmits != 1 || hp.heads[0].RespBytes != hp.whole[0].RespBytes {
		t.Fatalf("retransmitted cut answer: %+v", hp.heads)
	}
	// A cut answer ahead of a hole waits for the hole to fill, as a whole
	// one does: a slow reader's receiver drops what is past its window
	// and the sender's retransmission comes after the later segments.
	segs = query(c, "SELECT reordered", resultSet(rowsOf(200, 40)...), 4000, 6000)
	hp.feed(segs[0], segs[2], segs[3], segs[1], segs[4])
	if len(hp.heads) != 2 || len(hp.whole) != 2 {
		t.Fatalf("reordered: %d statements header-only, %d whole; want 2", len(hp.heads), len(hp.whole))
	}
	if h, w := hp.heads[1], hp.whole[1]; h.RespBytes != w.RespBytes || h.TRespLast != w.TRespLast ||
		slices.Contains(h.Notes, noteIncomplete) || w.RespBytes < 8000 {
		t.Errorf("a cut answer ahead of a hole: header-only %+v\nwhole %+v", h, w)
	}
	if st := hp.th.Stats(); st.OutOfOrder != 2 || st.Gaps != 0 {
		t.Errorf("a cut answer ahead of a hole: stats %+v, want 2 out of order and no gap", st)
	}
	// A retransmission that carries new bytes only past what was captured
	// of it: a gap, never bytes made up; the connection gets whole answers.
	answer := resultSet(rowsOf(200, 40)...)
	q := c.fromClient(mysqlPacket(0, append([]byte{comQuery}, "SELECT grown"...)))
	first := c.fromServer(answer[:2000])
	grown := first
	grown.payload, grown.tsUS = answer[:5000], c.step(100)
	c.sseq = first.seq + 5000
	for _, s := range []seg{q, first, grown, c.fromServer(answer[5000:])} {
		hp.th.Record(toRecord(s, testHead, testTail), testHead, s.tsUS)
	}
	last := hp.heads[len(hp.heads)-1]
	if st := hp.th.Stats(); st.Gaps != 1 || st.FullFlows != 1 || last.SQL != "SELECT grown" || !slices.Contains(last.Notes, noteIncomplete) {
		t.Errorf("retransmission growing past the head: stats %+v, last statement %q %v", st, last.SQL, last.Notes)
	}
}

// BenchmarkHeadAnswer: a cut answer through the tracker allocates nothing
// beyond the statement it emits.
func BenchmarkHeadAnswer(b *testing.B) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	t := NewTracker(Options{}, func(*event.Statement) {})
	t.heads = true
	feed := func(segs ...seg) {
		for _, s := range segs {
			t.Record(toRecord(s, headBytes, tailBytes), headBytes, s.tsUS)
		}
	}
	feed(c.handshake(7, 7)...)
	feed(c.fromServer(greetingPacket()), c.fromClient(handshakeResponse()), c.fromServer(mysqlPacket(2, okPacket)))
	answer := resultSet(rowsOf(100, 120)...)
	var recs [][]byte
	var ts []int64
	cli0, srv0, t0 := c.cseq, c.sseq, c.tsUS
	for range 64 {
		for _, s := range query(c, "SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100", answer) {
			recs, ts = append(recs, toRecord(s, headBytes, tailBytes)), append(ts, s.tsUS)
		}
	}
	// Each pass over the records moves their sequence numbers and times on
	// (the same bytes again would be retransmissions).
	cliD, srvD, tD := c.cseq-cli0, c.sseq-srv0, c.tsUS-t0
	forward := func() {
		for j, r := range recs {
			tcp := r[recordHeader+20:]
			seq, ack := cliD, srvD
			if binary.BigEndian.Uint16(tcp) == 3306 {
				seq, ack = srvD, cliD
			}
			binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(tcp[4:])+seq)
			binary.BigEndian.PutUint32(tcp[8:], binary.BigEndian.Uint32(tcp[8:])+ack)
			ts[j] += tD
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		j := i % len(recs)
		if j == 0 && i > 0 {
			b.StopTimer()
			forward()
			b.StartTimer()
		}
		t.Record(recs[j], headBytes, ts[j])
	}
}

// FuzzHeaderRecords feeds arbitrary header-only records (each behind a
// 2-byte length) through the tracker with the real decoder: it must never
// panic, and every statement must be internally consistent.
func FuzzHeaderRecords(f *testing.F) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := c.handshake(7, 7)
	segs = append(segs, c.fromServer(greetingPacket()), c.fromClient(handshakeResponse()), c.fromServer(mysqlPacket(2, okPacket)))
	segs = append(segs, query(c, "SELECT many", resultSet(rowsOf(100, 40)...), 1500)...)
	segs = append(segs, query(c, "SELECT big row", resultSet(rowsOf(1, 2000)...))...)
	var seed []byte
	for _, s := range segs {
		r := toRecord(s, testHead, testTail)
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(r)))
		seed = append(seed, r...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := NewTracker(Options{}, func(s *event.Statement) {
			if s.TRespLast != 0 && s.ClientUS != s.TRespLast-s.TReqFirst {
				t.Fatalf("client_us %d != %d - %d", s.ClientUS, s.TRespLast, s.TReqFirst)
			}
			if s.Rows < 0 || s.RespBytes < 0 || s.Conn == "" {
				t.Fatalf("bad statement %+v", s)
			}
		})
		tr.heads = true
		tr.full = func(flowKey, bool, bool) {}
		ts := int64(1_700_000_000_000_000)
		for len(data) >= 2 {
			n := min(int(binary.BigEndian.Uint16(data)), len(data)-2)
			ts += 10
			tr.Record(data[2:2+n], testHead, ts)
			data = data[2+n:]
		}
		tr.Close(ts)
	})
}

// TestReaderPace: the reader looks every lightPoll, with the program's
// wake threshold, while records come slower than lightRate, and every
// ebpfPoll, with the program's own, as soon as they come faster or a
// connection opens.
func TestReaderPace(t *testing.T) {
	p := readerPace{every: ebpfPoll}
	t0 := time.Now()
	if got := p.read(10); got != ebpfPoll {
		t.Fatalf("first records: wait %v, want %v", got, ebpfPoll)
	}
	p.waited(t0, 1)
	p.read(20) // 20 records in 100 ms: 200 a second
	p.waited(t0.Add(100*time.Millisecond), 1)
	if p.every != lightPoll || p.wakeBytes() != lightWakeBytes {
		t.Errorf("200 records a second: every %v, wake at %d bytes; want %v and %d", p.every, p.wakeBytes(), lightPoll, lightWakeBytes)
	}
	if got := p.read(1); got != lightPoll {
		t.Errorf("light: wait %v, want %v", got, lightPoll)
	}
	p.read(400) // 401 records in 100 ms: above lightRate
	p.waited(t0.Add(200*time.Millisecond), 1)
	if p.every != ebpfPoll || p.wakeBytes() != 0 {
		t.Errorf("4,010 records a second: every %v, wake at %d bytes; want %v and the program's own", p.every, p.wakeBytes(), ebpfPoll)
	}
	p.waited(t0.Add(time.Hour), 1) // a wait with nothing read keeps the pace
	if p.every != ebpfPoll {
		t.Errorf("an empty wait changed the pace to %v", p.every)
	}
	p.read(2)
	p.waited(t0.Add(time.Hour+100*time.Millisecond), 1)
	if p.every != lightPoll {
		t.Fatalf("20 records a second: every %v, want %v", p.every, lightPoll)
	}
	p.read(2) // as few, but a connection opened meanwhile
	p.waited(t0.Add(time.Hour+200*time.Millisecond), 2)
	if p.every != ebpfPoll {
		t.Errorf("a new connection: every %v, want %v", p.every, ebpfPoll)
	}
}
