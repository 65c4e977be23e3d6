package report

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func benchStatement() *event.Statement {
	return &event.Statement{
		Conn: "127.0.0.1:51234>127.0.0.1:3306", ConnID: 42, User: "app", DB: "shop", Cmd: "COM_QUERY",
		SQL: "SELECT c FROM sbtest1 WHERE id = ?", Digest: "0123456789abcdef", DigestText: "select c from sbtest1 where id = ?",
		TReqFirst: 1795304997094600, TReqLast: 1795304997094610, TRespFirst: 1795304997094700, TRespLast: 1795304997094750,
		Parts: event.Parts{ClientUS: 150, RequestUS: 10, QueueUS: 20, ExecUS: 100, DeliveryUS: 20}, ServerUS: 100,
		Rows: 1, ReqBytes: 40, RespBytes: 61, Joined: true,
	}
}

func BenchmarkEventWriter(b *testing.B) {
	w := NewEventWriter(io.Discard)
	s := benchStatement()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(s); err != nil {
			b.Fatal(err)
		}
	}
	w.Flush()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkProfileAdd(b *testing.B) {
	stmts := synthetic(4096)
	p := NewProfile(ProfileOptions{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Add(stmts[i%len(stmts)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stmts/s")
}

// BenchmarkProfileAddNoted is Add for statements carrying the notes a
// capture started mid-connection puts on every prepared statement (the
// common case on a live server): the notes are counted by kind.
func BenchmarkProfileAddNoted(b *testing.B) {
	stmts := synthetic(4096)
	notes := []string{"capture started mid-connection", "statement text unknown: prepared before the capture started",
		"statement prepared before the capture: no text or params"}
	for _, s := range stmts {
		s.Notes = notes
	}
	p := NewProfile(ProfileOptions{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Add(stmts[i%len(stmts)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stmts/s")
}

// BenchmarkProfileDistinctDigests adds 500,000 distinct digests per
// iteration (addDistinctDigests) to a default-budget profile and reports
// its live heap after a GC and the process's RSS: the figures of
// docs/performance.md's "watch for weeks" section.
func BenchmarkProfileDistinctDigests(b *testing.B) {
	var heapMB, rssMB float64
	for b.Loop() {
		p := NewProfile(ProfileOptions{})
		addDistinctDigests(p, 500_000)
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		heapMB = float64(m.HeapAlloc) / (1 << 20)
		rssMB = float64(selfRSS()) / (1 << 20)
		runtime.KeepAlive(p)
	}
	b.ReportMetric(heapMB, "heap-MB")
	b.ReportMetric(rssMB, "rss-MB")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/500k-digests")
}

// selfRSS is this process's resident set in bytes (0 where /proc is not).
func selfRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
