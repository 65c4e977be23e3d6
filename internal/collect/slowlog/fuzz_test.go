package slowlog

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// FuzzParse: any input parses without panic, every emitted event is a
// measurement (has a Query_time), events come in line order, every byte is
// accounted for, an engine field is never set without its Engine* bit
// (absent is unknown, never a value), and a statement's lock wait comes
// from a rec lock wait the event had, within its Query_time.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	for _, p := range paths {
		b := fixtureBytes(f, filepath.Base(p))
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("# Time: 999999 99:99:99\n# Query_time: 1.\n#\n# administrator command:\nuse ;\nSET ,=;\n"))
	// The engine lines' shapes: MariaDB's log_slow_verbosity=engine (times
	// in ms, four decimals) and warnings, Percona's indented InnoDB lines
	// with a rec lock wait longer than the statement and bad values.
	f.Add([]byte("# Thread_id: 7  Schema: db  QC_hit: No\n# Query_time: 0.301385  Lock_time: 0.000350  Rows_sent: 0  Rows_examined: 1\n" +
		"# Pages_accessed: 7  Pages_read: 0  Pages_prefetched: 0  Pages_updated: 5  Old_rows_read: 0\n" +
		"# Pages_read_time: 0.0000  Engine_time: 301.3839\n#\n# Warnings\n# Warning 1292 Truncated incorrect INTEGER value: 'x'\n" +
		"SET timestamp=1796171959;\nUPDATE hot SET v = v + 1 WHERE id = 1;\n" +
		"# Query_time: 0.1\n# Pages_read_time: 99999999999999.99999  Engine_time: -1  Pages_read: 1e9\nSELECT 1;\n"))
	f.Add([]byte("# Schema: shop  Last_errno: 1205  Killed: 0\n# Query_time: 0.200000  Lock_time: 0.2  Rows_sent: 0\n" +
		"#   InnoDB_IO_r_ops: 1  InnoDB_IO_r_bytes: 16384  InnoDB_IO_r_wait: 0.000180\n" +
		"#   InnoDB_rec_lock_wait: 50.000870  InnoDB_queue_wait: 0.000000\n#   InnoDB_pages_distinct: 2\n" +
		"SET timestamp=1741082402;\nSELECT qty FROM stock WHERE sku = 'A-100' FOR UPDATE;\n" +
		"# Query_time: 0.000000\n#   InnoDB_rec_lock_wait: 0.5x  InnoDB_queue_wait:\n# No InnoDB statistics available for this query\nCOMMIT;\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []int{0, 16} {
			checkParse(t, data, max)
		}
	})
}

func checkParse(t *testing.T, data []byte, max int) {
	p := NewParser(bytes.NewReader(data), Options{MaxLineBytes: max})
	conv := NewConverter(ConvertOptions{CacheSize: 16}) // small: a fresh cache per input
	var stmt event.Statement
	var events, lastLine int64
	for {
		e, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("error on in-memory input: %v", err)
		}
		events++
		if !e.HasQueryTime || e.QueryTimeUS < 0 || e.Line <= lastLine {
			t.Fatalf("bad event: has qt %v, qt %d, line %d after %d", e.HasQueryTime, e.QueryTimeUS, e.Line, lastLine)
		}
		if max > 0 && len(e.Query) > max {
			t.Fatalf("query of %d bytes with a limit of %d", len(e.Query), max)
		}
		checkEngineFields(t, e)
		if conv.Statement(e, &stmt) && stmt.LockWait != nil &&
			(!e.Has(EngineRecLockWait) || stmt.LockWaitUS <= 0 || stmt.LockWaitUS > e.QueryTimeUS || stmt.BlockedBy != nil) {
			t.Fatalf("lock wait %+v from rec lock wait %d µs (known %v) of a %d µs statement",
				*stmt.LockWait, e.InnoDBRecLockWaitUS, e.Has(EngineRecLockWait), e.QueryTimeUS)
		}
		lastLine = e.Line
	}
	st := p.Stats()
	if st.Bytes != int64(len(data)) || st.Events != events {
		t.Fatalf("stats %+v for %d bytes, %d events", st, len(data), events)
	}
	if n := int64(bytes.Count(data, []byte("Query_time:"))); events+st.Malformed > n {
		t.Fatalf("%d events + %d malformed from %d Query_time fields", events, st.Malformed, n)
	}
}

// checkEngineFields: an engine field holds a value only when its bit says
// the event had it.
func checkEngineFields(t *testing.T, e *Event) {
	for _, f := range []struct {
		bit uint16
		v   int64
	}{{EngineIOReadOps, e.InnoDBIOReadOps}, {EngineIOReadBytes, e.InnoDBIOReadBytes}, {EngineIOReadWait, e.InnoDBIOReadWaitUS},
		{EngineRecLockWait, e.InnoDBRecLockWaitUS}, {EngineQueueWait, e.InnoDBQueueWaitUS}, {EnginePagesDistinct, e.InnoDBPagesDistinct},
		{EnginePagesAccessed, e.PagesAccessed}, {EnginePagesRead, e.PagesRead}, {EnginePagesPrefetched, e.PagesPrefetched},
		{EnginePagesUpdated, e.PagesUpdated}, {EngineOldRowsRead, e.OldRowsRead}, {EnginePagesReadTime, e.PagesReadTimeUS},
		{EngineTime, e.EngineTimeUS}} {
		if f.v < 0 || (f.v != 0 && !e.Has(f.bit)) {
			t.Fatalf("engine field %b: value %d, known %v", f.bit, f.v, e.Has(f.bit))
		}
	}
}
