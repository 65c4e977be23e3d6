package capture

import (
	"bufio"
	"os"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
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
	var stmts int64
	b.ReportAllocs()
	for b.Loop() {
		t := NewTracker(opts, func(*event.Statement) {})
		for i := range pkts {
			p := &pkts[i]
			t.Packet(p.lt, p.tsUS, p.data)
		}
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
