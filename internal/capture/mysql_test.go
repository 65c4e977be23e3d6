package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gopacket/gopacket/layers"
)

// Real MySQL bytes through the real decoder: handshake, COM_QUERY with an
// OK response, COM_QUIT.

// handshakeResponse is a HandshakeResponse41 for user "app", db "shop".
func handshakeResponse() []byte {
	const caps = 0x00000001 | 0x00000008 | 0x00000200 | 0x00008000 | 0x00080000 // LONG_PASSWORD|CONNECT_WITH_DB|PROTOCOL_41|SECURE_CONNECTION|PLUGIN_AUTH
	p := binary.LittleEndian.AppendUint32(nil, caps)
	p = binary.LittleEndian.AppendUint32(p, 1<<24)
	p = append(p, 45)
	p = append(p, make([]byte, 23)...)
	p = append(p, "app\x00"...)
	p = append(p, 20)
	p = append(p, bytes.Repeat([]byte{0xaa}, 20)...)
	p = append(p, "shop\x00"...)
	p = append(p, "mysql_native_password\x00"...)
	return mysqlPacket(1, p)
}

var okPacket = []byte{0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00}

// mysqlConversation is a full connection with n UPDATEs, each acked by the
// client like a real TCP stack does.
func mysqlConversation(c *conv, n int) []seg {
	segs := c.handshake(7, 7)
	segs = append(segs, c.fromServer(greetingPacket()), c.fromClient(handshakeResponse()), c.fromServer(mysqlPacket(2, okPacket)))
	for i := range n {
		q := fmt.Sprintf("UPDATE sbtest1 SET k = k + 1 WHERE id = %d", i)
		segs = append(segs, c.fromClient(mysqlPacket(0, append([]byte{comQuery}, q...))))
		segs = append(segs, c.fromServer(mysqlPacket(1, okPacket)), c.clientAck(512))
	}
	segs = append(segs, c.fromClient(mysqlPacket(0, []byte{0x01})), c.fin(true), c.fin(false), c.clientAck(512))
	return segs
}

func TestReadFileRealDecoder(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := mysqlConversation(c, 3)
	path := writePcap(t, linkEthernet, segs)
	var got []*event.Statement
	st, err := ReadFile(context.Background(), path, Options{KeepLiterals: true}, func(s *event.Statement) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 { // 3 UPDATEs + COM_QUIT
		t.Fatalf("%d statements: %+v", len(got), got)
	}
	s := got[1]
	if s.Cmd != "COM_QUERY" || s.SQL != "UPDATE sbtest1 SET k = k + 1 WHERE id = 1" || s.User != "app" || s.DB != "shop" || s.ConnID != 42 {
		t.Errorf("statement %+v", s)
	}
	if s.Rows != 1 || s.ClientUS != s.TRespLast-s.TReqFirst || s.ClientUS <= 0 || s.Digest == "" {
		t.Errorf("rows %d client_us %d digest %q", s.Rows, s.ClientUS, s.Digest)
	}
	if got[3].Cmd != "COM_QUIT" || got[3].HasResponse() {
		t.Errorf("quit %+v", got[3])
	}
	if st.Flows != 1 || st.Statements != 4 || st.MidStreamFlows != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Packets that do not finish a statement (ACKs, data in the middle of a
// response) go through decode, flow lookup and sequence tracking without
// allocating.
func TestTrackerPacketAllocs(t *testing.T) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := mysqlConversation(c, 1)
	tr := NewTracker(Options{}, func(*event.Statement) {})
	for _, s := range segs[:len(segs)-6] { // open connection, one statement done
		tr.Packet(linkEthernet, s.tsUS, frame(linkEthernet, s))
	}
	ack := c.clientAck(512)
	ackFrame := frame(linkEthernet, ack)
	allocs := testing.AllocsPerRun(1000, func() { tr.Packet(linkEthernet, ack.tsUS, ackFrame) })
	if allocs != 0 {
		t.Fatalf("an ACK costs %.1f allocations", allocs)
	}
}

// benchFrames is a capture of `conns` connections with `queries` UPDATEs
// each, as frames in memory.
func benchFrames(conns, queries int) ([][]byte, []int64) {
	var frames [][]byte
	var ts []int64
	for i := range conns {
		c := newConv(fmt.Sprintf("10.0.%d.%d:40000", i/250, i%250+1), "10.0.0.2:3306")
		for _, s := range mysqlConversation(c, queries) {
			frames = append(frames, frame(linkEthernet, s))
			ts = append(ts, s.tsUS)
		}
	}
	return frames, ts
}

// BenchmarkTrackerPackets measures the whole per-packet path with the real
// decoder: frame decode, flow lookup, sequence tracking, MySQL decoding and
// statement building (one statement per three packets).
func BenchmarkTrackerPackets(b *testing.B) {
	frames, ts := benchFrames(100, 200)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		tr := NewTracker(Options{}, func(*event.Statement) {})
		for i, f := range frames {
			tr.Packet(linkEthernet, ts[i], f)
		}
		n += len(frames)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "packets/s")
}

// BenchmarkReadFile adds pcap file reading to the path above.
func BenchmarkReadFile(b *testing.B) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	path := writePcap(b, linkEthernet, mysqlConversation(c, 20000))
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	var packets int64
	for b.Loop() {
		st, err := ReadFile(context.Background(), path, Options{}, func(*event.Statement) {})
		if err != nil {
			b.Fatal(err)
		}
		packets += st.Packets
	}
	b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "packets/s")
}

// FuzzReadPcap feeds arbitrary bytes as a capture file through the whole
// read path with the real decoder: it must never panic, and every statement
// must be internally consistent.
func FuzzReadPcap(f *testing.F) {
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	segs := mysqlConversation(c, 2)
	for _, build := range []func(testing.TB, layers.LinkType, []seg) string{writePcap, writePcapNG} {
		for _, lt := range []layers.LinkType{linkEthernet, linkSLL2, linkNull} {
			raw, err := os.ReadFile(build(f, lt, segs))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
			f.Add(raw[:len(raw)/2])
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := NewTracker(Options{}, func(s *event.Statement) {
			if s.TRespLast != 0 && s.ClientUS != s.TRespLast-s.TReqFirst {
				t.Fatalf("client_us %d != %d - %d", s.ClientUS, s.TRespLast, s.TReqFirst)
			}
			if s.ZeroWindowUS < 0 || s.Conn == "" || strings.ContainsRune(s.Cmd, 0) {
				t.Fatalf("bad statement %+v", s)
			}
		})
		r, linkOf, err := openReader(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		if err := tr.readPackets(context.Background(), "fuzz", r, linkOf, &progress{}); err != nil {
			t.Fatal(err)
		}
		tr.Close(0)
	})
}
