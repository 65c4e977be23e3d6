package slowlog

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// benchLog returns an in-memory log of about n MB made by repeating the
// MariaDB sysbench fixture (named: other MariaDB fixtures must not change
// what the benchmarks measure).
func benchLog(b *testing.B, mb int) []byte {
	b.Helper()
	raw, err := os.ReadFile(filepath.Join(fixtureDir, "mariadb-10.11-sysbench.log"))
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	for buf.Len() < mb<<20 {
		buf.Write(raw)
	}
	return buf.Bytes()
}

func countEvents(b *testing.B, data []byte) int64 {
	p := NewParser(bytes.NewReader(data), Options{})
	for {
		if _, err := p.Next(); err != nil {
			break
		}
	}
	return p.Stats().Events
}

// BenchmarkParse measures the parser alone (events/s, MB/s).
func BenchmarkParse(b *testing.B) {
	data := benchLog(b, 32)
	events := countEvents(b, data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := NewParser(bytes.NewReader(data), Options{})
		for {
			if _, err := p.Next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkParseConvert adds normalization and statement filling.
func BenchmarkParseConvert(b *testing.B) {
	data := benchLog(b, 32)
	events := countEvents(b, data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := &Source{Reader: bytes.NewReader(data), count: &countingReader{}}
		if _, err := read(context.Background(), src, ReadOptions{}, func(*event.Statement, *Event) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkParseConvertEngine parses and converts logs whose every entry
// has engine lines: the MariaDB log_slow_verbosity=engine fixture and the
// Percona fixture of row-lock waits (a lock wait per few statements),
// repeated to about 8 MB.
func BenchmarkParseConvertEngine(b *testing.B) {
	var one []byte
	for _, name := range []string{"mariadb-10.11-engine.log", "percona-8.0-lockwait.log"} {
		raw, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			b.Fatal(err)
		}
		one = append(one, raw...)
	}
	var buf bytes.Buffer
	for buf.Len() < 8<<20 {
		buf.Write(one)
	}
	data := buf.Bytes()
	events := countEvents(b, data)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		src := &Source{Reader: bytes.NewReader(data), count: &countingReader{}}
		if _, err := read(context.Background(), src, ReadOptions{}, func(*event.Statement, *Event) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
