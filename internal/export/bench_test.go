package export

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
)

// benchStatements are joined statements of 200 digests, as a busy
// application sends them.
func benchStatements() []*event.Statement {
	out := make([]*event.Statement, 1000)
	for i := range out {
		s := stmt(fmt.Sprintf("%016x", i%200), int64(200+i%700), true)
		s.Conn = fmt.Sprintf("127.0.0.1:%d>127.0.0.1:3306", 40000+i%32)
		s.TReqFirst = 1_700_000_000_000_000 + int64(i)*1000
		s.TRespLast = s.TReqFirst + s.ClientUS
		out[i] = s
	}
	return out
}

// discardOTLP is an OTLP/HTTP endpoint that reads and drops what it gets,
// so the benchmark pays the SDK's real encoding and sending.
func discardOTLP(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkExporters is the CPU each exporter adds per statement, beside
// watch's own per-statement cost (capture, decoding, join, profile). The
// OTLP exporters' batching and sending run on their own goroutines, so
// the CPU they add is measured with -benchtime and `time`, not only ns/op:
// scripts/bench-exporters.sh reports both.
func BenchmarkExporters(b *testing.B) {
	stmts := benchStatements()
	run := func(b *testing.B, sinks ...watch.Sink) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s := stmts[i%len(stmts)]
			for _, k := range sinks {
				k.Statement(s)
			}
		}
	}
	b.Run("none", func(b *testing.B) { run(b) })
	b.Run("prometheus", func(b *testing.B) { run(b, NewPrometheus(DefaultTopDigests)) })
	b.Run("otel-metrics", func(b *testing.B) {
		o, err := NewOTel(context.Background(), OTelOptions{Endpoint: discardOTLP(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Shutdown(context.Background())
		run(b, o)
	})
	b.Run("otel-1pct", func(b *testing.B) {
		o, err := NewOTel(context.Background(), OTelOptions{Endpoint: discardOTLP(b), TraceRatio: 0.01})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Shutdown(context.Background())
		o.Snapshot(&watch.Snapshot{Flavor: "mariadb"})
		run(b, o)
	})
	b.Run("all-1pct", func(b *testing.B) {
		o, err := NewOTel(context.Background(), OTelOptions{Endpoint: discardOTLP(b), TraceRatio: 0.01})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Shutdown(context.Background())
		run(b, NewPrometheus(DefaultTopDigests), o)
	})
	b.Run("otel-every-statement-traced", func(b *testing.B) {
		o, err := NewOTel(context.Background(), OTelOptions{Endpoint: discardOTLP(b), TraceRatio: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer o.Shutdown(context.Background())
		run(b, o)
	})
}

// BenchmarkPrometheusDistinctDigests is the exporter fed statements of a
// new digest each (an ORM naming an alias per call): every statement
// starts ranking a digest, and the ranked set stays at its bound by
// forgetting. Its cost must not grow with the digests ranked.
func BenchmarkPrometheusDistinctDigests(b *testing.B) {
	stmts := benchStatements()
	names := make([]string, 1<<16)
	for i := range names {
		names[i] = fmt.Sprintf("%016x", 1_000_000+i)
	}
	p := NewPrometheus(DefaultTopDigests)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s := *stmts[i%len(stmts)]
		s.Fingerprint = names[i%len(names)]
		p.Statement(&s)
	}
}
