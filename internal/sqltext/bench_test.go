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
