package slowlog

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// FuzzParse: any input parses without panic, every emitted event is a
// measurement (has a Query_time), events come in line order, and every
// byte is accounted for.
func FuzzParse(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	for _, p := range paths {
		b := fixtureBytes(f, filepath.Base(p))
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add([]byte("# Time: 999999 99:99:99\n# Query_time: 1.\n#\n# administrator command:\nuse ;\nSET ,=;\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, max := range []int{0, 16} {
			checkParse(t, data, max)
		}
	})
}

func checkParse(t *testing.T, data []byte, max int) {
	p := NewParser(bytes.NewReader(data), Options{MaxLineBytes: max})
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
