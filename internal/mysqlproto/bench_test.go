package mysqlproto

import (
	"testing"
)

// sysbenchLike returns the setup chunks (handshake, prepares) and one
// round of an oltp_read_write-like transaction over prepared statements:
// BEGIN, 10 point selects, a 100-row range, an update, a delete, an
// insert, COMMIT.
func sysbenchLike(deprecate, compress bool) (setup, round []chunk, packets int) {
	s := newScript(deprecate)
	s.compress = compress
	s.handshake()
	s.prepare("SELECT c FROM sbtest1 WHERE id=?", 1, 1, 1)
	s.prepare("SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", 2, 2, 1)
	s.prepare("UPDATE sbtest1 SET k=k+1 WHERE id=?", 3, 1, 0)
	s.prepare("DELETE FROM sbtest1 WHERE id=?", 4, 1, 0)
	s.prepare("INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)", 5, 4, 0)
	n := len(s.chunks)
	row := []any{"68487932199-96439406143-93774651418-41631865787-96406072701-20604855487-25459966574"}
	s.client(query("BEGIN"))
	s.server(okPayload(0, 0, 0, 3, 0))
	for i := range 10 {
		s.client(execPayload(1, 0, true, int64(i*7919)))
		s.server(s.resultPayloads(1, [][]any{row}, 3, true)...)
	}
	rng := make([][]any, 100)
	for i := range rng {
		rng[i] = row
	}
	s.client(execPayload(2, 0, true, int64(5000), int64(5099)))
	s.server(s.resultPayloads(1, rng, 3, true)...)
	s.client(execPayload(3, 0, true, int64(5001)))
	s.server(okPayload(0, 1, 0, 3, 0))
	s.client(execPayload(4, 0, true, int64(5002)))
	s.server(okPayload(0, 1, 0, 3, 0))
	s.client(execPayload(5, 0, true, int64(5002), int64(4999), row[0], "22195207048-70116052123-74140395089"))
	s.server(okPayload(0, 1, 0, 3, 0))
	s.client(query("COMMIT"))
	s.server(okPayload(0, 0, 0, 2, 0))
	packets = 2*2 + 10*(1+4) + (1 + 103) + 2*3 + 2
	if !deprecate {
		packets += 11
	}
	return s.chunks[:n], s.chunks[n:], packets
}

type countHandler struct{ n, rows int64 }

func (c *countHandler) OnExchange(ex *Exchange, _ *ConnInfo) {
	c.n++
	c.rows += ex.Rows
}

func feedAll(d *ConnDecoder, chunks []chunk) {
	for _, c := range chunks {
		d.Feed(c.dir, c.ts, c.data)
	}
}

// TestSteadyStateAllocationFree proves the decode path does not allocate
// per packet once buffers are warm: plain and compressed.
func TestSteadyStateAllocationFree(t *testing.T) {
	for _, compress := range []bool{false, true} {
		setup, round, _ := sysbenchLike(true, compress)
		h := &countHandler{}
		d := NewConnDecoder(h, Options{})
		feedAll(d, setup)
		feedAll(d, round)
		allocs := testing.AllocsPerRun(50, func() { feedAll(d, round) })
		if allocs != 0 {
			t.Errorf("compress=%v: %v allocations per round, want 0", compress, allocs)
		}
		if h.n != 5+16*52 || h.rows != 52*(10+100+3) { // setup + 1 warm-up round + AllocsPerRun's 51
			t.Errorf("compress=%v: %d exchanges, %d rows", compress, h.n, h.rows)
		}
	}
}

func benchDecode(b *testing.B, deprecate, compress bool) {
	setup, round, packets := sysbenchLike(deprecate, compress)
	var size int64
	for _, c := range round {
		size += int64(len(c.data))
	}
	d := NewConnDecoder(&countHandler{}, Options{})
	feedAll(d, setup)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		feedAll(d, round)
	}
	b.ReportMetric(float64(packets)*float64(b.N)/b.Elapsed().Seconds(), "packets/s")
	b.ReportMetric(16*float64(b.N)/b.Elapsed().Seconds(), "exchanges/s")
}

func BenchmarkDecodeSysbench(b *testing.B)           { benchDecode(b, true, false) }
func BenchmarkDecodeSysbenchClassicEOF(b *testing.B) { benchDecode(b, false, false) }
func BenchmarkDecodeSysbenchCompressed(b *testing.B) { benchDecode(b, true, true) }

// BenchmarkDecodeSysbenchTiny feeds the same stream in 7-byte pieces: the
// worst case for the partial-packet path.
func BenchmarkDecodeSysbenchTiny(b *testing.B) {
	setup, round, packets := sysbenchLike(true, false)
	var pieces []chunk
	var size int64
	for _, c := range round {
		for _, p := range splitEvery(c.data, 7) {
			pieces = append(pieces, chunk{c.dir, c.ts, p})
		}
		size += int64(len(c.data))
	}
	d := NewConnDecoder(&countHandler{}, Options{})
	feedAll(d, setup)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		feedAll(d, pieces)
	}
	b.ReportMetric(float64(packets)*float64(b.N)/b.Elapsed().Seconds(), "packets/s")
}
