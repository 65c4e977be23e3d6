package sqltext

import (
	"fmt"
	"testing"
)

// benchQueries are typical sysbench oltp_read_write statements plus a longer
// reporting query.
var benchQueries = []string{
	"SELECT c FROM sbtest1 WHERE id=5023",
	"SELECT c FROM sbtest3 WHERE id BETWEEN 4890 AND 4989 ORDER BY c",
	"UPDATE sbtest2 SET k=k+1 WHERE id=5012",
	"INSERT INTO sbtest4 (id, k, c, pad) VALUES (5003, 4991, '68487932199-96439406143-93774651418-41631865787-96406072701', '22195207048-70116052123-74140395089-76317954521-98694025897')",
	"SELECT o.id, o.created_at, SUM(l.qty * l.price) AS total FROM orders o JOIN lines l ON l.order_id = o.id WHERE o.customer_id IN (1, 2, 3, 4, 5) AND o.created_at >= '2024-01-01' /* report */ GROUP BY o.id ORDER BY total DESC LIMIT 50",
}

func BenchmarkNormalizeCached(b *testing.B) {
	n := NewNormalizer(0)
	raws := make([][]byte, len(benchQueries))
	for i, q := range benchQueries {
		raws[i] = []byte(q)
		n.Normalize(raws[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n.Normalize(raws[i%len(raws)])
	}
}

// BenchmarkNormalizeUncached normalizes raw texts the cache has never seen
// (fresh literals), the cost of a cache miss.
func BenchmarkNormalizeUncached(b *testing.B) {
	const distinct = 1 << 14
	raws := make([][]byte, distinct)
	var size int64
	for i := range raws {
		q := benchQueries[i%len(benchQueries)]
		raws[i] = fmt.Appendf(nil, "%s /* %d */", q, i)
		size += int64(len(raws[i]))
	}
	b.SetBytes(size / distinct)
	b.ReportAllocs()
	n := NewNormalizer(distinct / 4) // raws cycle, so every call misses
	for i := 0; b.Loop(); i++ {
		n.Normalize(raws[i%distinct])
	}
}

// BenchmarkNormalizeNewShape measures the full miss: a digest text never
// seen, so strings are allocated.
func BenchmarkNormalizeNewShape(b *testing.B) {
	const distinct = 1 << 14
	raws := make([][]byte, distinct)
	for i := range raws {
		raws[i] = fmt.Appendf(nil, "SELECT c%d FROM sbtest1 WHERE id = 5 AND k IN (1, 2, 3)", i)
	}
	b.ReportAllocs()
	n := NewNormalizer(16)
	for i := 0; b.Loop(); i++ {
		n.Normalize(raws[i%distinct])
	}
}

// sysbench's statements, as a slow log holds them (new literals each time).
var fingerprintInputs = []string{
	"SELECT c FROM sbtest1 WHERE id=5021",
	"SELECT c FROM sbtest1 WHERE id BETWEEN 4992 AND 5091",
	"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 10 AND 109 ORDER BY c",
	"UPDATE sbtest1 SET c='83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330' WHERE id=5010",
	"INSERT INTO sbtest1 (id, k, c, pad) VALUES (5002, 4989, '03868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330', '22195207048-70116052123-74140395089-76317954521-98694025897')",
	"COMMIT",
}

func BenchmarkFingerprint(b *testing.B) {
	var n int64
	for i := 0; b.Loop(); i++ {
		n += int64(len(Fingerprint(fingerprintInputs[i%len(fingerprintInputs)])))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stmts/s")
	_ = n
}

// BenchmarkNormalizeNewLiterals normalizes statements sent as text with
// fresh literals at every call (sysbench with --db-ps-mode=disable, most
// ORMs' text protocol): the raw text is new, its shape is known.
func BenchmarkNormalizeNewLiterals(b *testing.B) {
	raws := newLiteralStatements()
	b.ReportAllocs()
	n := NewNormalizer(0)
	for i := 0; b.Loop(); i++ {
		n.Normalize(raws[i%len(raws)])
	}
}

// BenchmarkFingerprinterClassNewLiterals classes the same statements as
// pt-query-digest would: the raw text is new, its shape is known.
func BenchmarkFingerprinterClassNewLiterals(b *testing.B) {
	raws := newLiteralStatements()
	b.ReportAllocs()
	var f Fingerprinter
	for i := 0; b.Loop(); i++ {
		f.Class(raws[i%len(raws)])
	}
}

// newLiteralStatements are sysbench's statements with fresh literals.
func newLiteralStatements() [][]byte {
	const distinct = 1 << 14
	raws := make([][]byte, distinct)
	for i := range raws {
		switch i % 4 {
		case 0:
			raws[i] = fmt.Appendf(nil, "SELECT c FROM sbtest%d WHERE id=%d", i%8+1, i*7919%100000)
		case 1:
			raws[i] = fmt.Appendf(nil, "SELECT c FROM sbtest%d WHERE id BETWEEN %d AND %d ORDER BY c", i%8+1, i, i+99)
		case 2:
			raws[i] = fmt.Appendf(nil, "UPDATE sbtest%d SET k=k+1 WHERE id=%d", i%8+1, i*31%100000)
		default:
			raws[i] = fmt.Appendf(nil, "INSERT INTO sbtest%d (id, k, c, pad) VALUES (%d, %d, '%011d-%011d', '%011d')", i%8+1, i, i*3, i*5, i*7, i*11)
		}
	}
	return raws
}

// BenchmarkTextHash: the capture hashes every COM_QUERY's text.
func BenchmarkTextHash(b *testing.B) {
	q := []byte("SELECT c FROM sbtest1 WHERE id=50123")
	for b.Loop() {
		TextHash(q)
	}
}
