package capture

import (
	"bufio"
	"encoding/binary"
	"os"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// memPacket is one frame of a fixture held in memory, so that a benchmark
// measures the tracker and the decoder, not gzip and pcap parsing.
type memPacket struct {
	lt   layers.LinkType
	tsUS int64
	data []byte
}

func loadPackets(b *testing.B, path string) []memPacket {
	f, err := os.Open(path)
	if err != nil {
		b.Skipf("no fixture %s", path)
	}
	defer f.Close()
	r, linkOf, err := openReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		b.Fatal(err)
	}
	var out []memPacket
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if err != nil {
			return out
		}
		out = append(out, memPacket{lt: linkOf(ci), tsUS: ci.Timestamp.UnixMicro(), data: append([]byte(nil), data...)})
	}
}

// benchTracker feeds a fixture's packets through a fresh tracker per round:
// the live path below the ring (frame decode, flow tracking, MySQL
// decoding, digests, statements), reported per statement.
func benchTracker(b *testing.B, name string, keepLiterals bool) {
	path := "../../testdata/captures/" + name + ".pcap.gz"
	pkts := loadPackets(b, path)
	opts := Options{Ports: []uint16{fixturePort(b, path)}, KeepLiterals: keepLiterals}
	perStatement(b, opts, func(t *Tracker) {
		for i := range pkts {
			p := &pkts[i]
			t.Packet(p.lt, p.tsUS, p.data)
		}
	})
}

// perStatement runs feed on a fresh tracker per round and reports the time
// per statement decoded.
func perStatement(b *testing.B, opts Options, feed func(*Tracker)) {
	var stmts int64
	b.ReportAllocs()
	for b.Loop() {
		t := NewTracker(opts, func(*event.Statement) {})
		feed(t)
		t.Close(t.nowUS)
		stmts += t.stats.Statements
	}
	if stmts == 0 {
		b.Fatal("no statements decoded")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(stmts), "ns/statement")
	b.ReportMetric(float64(stmts)/float64(b.N), "statements/op")
}

func BenchmarkTrackerSysbenchText(b *testing.B) { benchTracker(b, "sysbench-text", false) }
func BenchmarkTrackerSysbenchPS(b *testing.B)   { benchTracker(b, "sysbench-ps", false) }
func BenchmarkTrackerLargeResults(b *testing.B) { benchTracker(b, "large-results", false) }

// BenchmarkTrackerSysbenchPSRecords: the same fixture as
// BenchmarkTrackerSysbenchPS as the header-only capture hands it over
// (watch's default on a kernel with BPF): one record per packet, answers
// longer than headBytes+tailBytes cut to their head and tail.
func BenchmarkTrackerSysbenchPSRecords(b *testing.B) {
	path := "../../testdata/captures/sysbench-ps.pcap.gz"
	port := fixturePort(b, path)
	var recs [][]byte
	var ts []int64
	for _, p := range loadPackets(b, path) {
		if rec := frameRecord(p, port); rec != nil {
			recs, ts = append(recs, rec), append(ts, p.tsUS)
		}
	}
	perStatement(b, Options{Ports: []uint16{port}}, func(t *Tracker) {
		t.heads = true
		for i, rec := range recs {
			t.Record(rec, headBytes, ts[i])
		}
	})
}

// frameRecord is the header-only program's record of a captured TCP
// frame (nil for anything else): whole unless it is an answer from port
// longer than headBytes+tailBytes.
func frameRecord(p memPacket, port uint16) []byte {
	pkt := gopacket.NewPacket(p.data, p.lt, gopacket.NoCopy)
	nl, tl := pkt.NetworkLayer(), pkt.TransportLayer()
	tcp, ok := tl.(*layers.TCP)
	if nl == nil || !ok {
		return nil
	}
	ip := append(append([]byte(nil), nl.LayerContents()...), nl.LayerPayload()...)
	n := len(tcp.LayerPayload())
	hdrs := len(ip) - n
	var rec []byte
	if uint16(tcp.SrcPort) != port || n <= headBytes+tailBytes {
		rec = make([]byte, recordHeader+len(ip))
		copy(rec[recordHeader:], ip)
		binary.NativeEndian.PutUint32(rec[12:], uint32(len(ip)))
	} else {
		rec = make([]byte, cutRecordSize(headBytes, tailBytes))
		copy(rec[recordHeader:], ip[:hdrs+headBytes])
		copy(rec[recordHeader+recordMaxHeaders+headBytes:], ip[len(ip)-tailBytes:])
		binary.NativeEndian.PutUint32(rec[12:], uint32(hdrs+headBytes))
		binary.NativeEndian.PutUint32(rec[16:], tailBytes)
	}
	binary.NativeEndian.PutUint32(rec[8:], uint32(n))
	return rec
}
