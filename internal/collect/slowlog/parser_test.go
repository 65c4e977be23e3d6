package slowlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

func parseAll(t testing.TB, text string, opts Options) ([]goldenEvent, Stats) {
	t.Helper()
	p := NewParser(strings.NewReader(text), opts)
	var out []goldenEvent
	for {
		e, err := p.Next()
		if err == io.EOF {
			return out, p.Stats()
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toGolden(e))
	}
}

const mariaHeader = "# User@Host: app[app] @  [127.0.0.1]\n# Thread_id: 7  Schema: db  QC_hit: No\n"

func TestStartTimeSources(t *testing.T) {
	utc := Options{Location: time.UTC}
	cases := []struct {
		name, log string
		start     int64
		note      string
	}{
		{"log_slow_extra Start wins", "# Time: 2024-03-04T05:06:07.654321Z\n# User@Host: a[a] @ h []  Id: 1\n" +
			"# Query_time: 0.004015  Lock_time: 0 Rows_sent: 1  Rows_examined: 1 Start: 2024-03-04T05:06:07.650000Z End: 2024-03-04T05:06:07.654321Z\n" +
			"SET timestamp=1709528767;\nSELECT 1;\n", 1709528767650000, ""},
		{"ISO time of the event minus Query_time", "# Time: 2024-01-02T03:04:05.123456Z\n# User@Host: a[a] @ h []  Id: 1\n" +
			"# Query_time: 0.000456  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1704164645;\nSELECT 1;\n", 1704164645123000, ""},
		{"SET timestamp over a whole-second time line", "# Time: 240102  3:04:05\n" + mariaHeader +
			"# Query_time: 1.500000  Lock_time: 0  Rows_sent: 1  Rows_examined: 1\nSET timestamp=1704164640;\nSELECT 1;\n", 1704164640000000, ""},
		{"carried time line minus Query_time", "# Time: 240102  3:04:05\n" + mariaHeader +
			"# Query_time: 1.500000  Lock_time: 0  Rows_sent: 1  Rows_examined: 1\nSELECT 1;\n", 1704164643500000, NoteStartFromTime},
		{"nothing known", mariaHeader + "# Query_time: 1.5  Lock_time: 0  Rows_sent: 1  Rows_examined: 1\nSELECT 1;\n", 0, NoteStartUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, _ := parseAll(t, c.log, utc)
			if len(evs) != 1 {
				t.Fatalf("got %d events", len(evs))
			}
			if evs[0].StartUS != c.start {
				t.Errorf("start = %d, want %d", evs[0].StartUS, c.start)
			}
			if c.note != "" && (len(evs[0].Notes) != 1 || evs[0].Notes[0] != c.note) {
				t.Errorf("notes = %v, want %q", evs[0].Notes, c.note)
			}
		})
	}
}

func TestCRLFAndBlankLines(t *testing.T) {
	log := "\r\n# Time: 240102  3:04:05\r\n" + strings.ReplaceAll(mariaHeader, "\n", "\r\n") +
		"# Query_time: 0.000100  Lock_time: 0  Rows_sent: 1  Rows_examined: 1\r\nuse `shop`;\r\nSET timestamp=1;\r\nSELECT\r\n\r\n 1;\r\n\r\n"
	evs, st := parseAll(t, log, Options{})
	if len(evs) != 1 || evs[0].Query != "SELECT\n\n 1" || evs[0].Schema != "db" || st.Dropped() != 0 {
		t.Fatalf("events %+v stats %+v", evs, st)
	}
}

func TestUseLineSetsSchemaWhenNoSchemaField(t *testing.T) {
	log := "# User@Host: a[a] @ h []\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nuse `sales`;\nSET timestamp=1;\nSELECT 1;\n" +
		"# User@Host: a[a] @ h []\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nSET timestamp=2;\nUSE other;\n"
	evs, _ := parseAll(t, log, Options{})
	if len(evs) != 2 || evs[0].Schema != "sales" || evs[1].Schema != "sales" || evs[1].Query != "USE other" {
		t.Fatalf("%+v", evs)
	}
}

// genReader produces a log with one statement line of n bytes without
// holding it in memory, then one ordinary event.
func hugeLineLog(n int) io.Reader {
	head := "# Time: 240102  3:04:05\n" + mariaHeader + "# Query_time: 0.5  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nSET timestamp=1;\nSELECT '"
	tail := "';\n" + mariaHeader + "# Query_time: 0.25  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nSET timestamp=2;\nSELECT 2;\n"
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatByte('x'), int64(n)), strings.NewReader(tail))
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestFiftyMegabyteLine: a 50 MB statement line parses whole with the
// default limit, is held once (not copied twice), and its buffers are
// released once the parser moves on.
func TestFiftyMegabyteLine(t *testing.T) {
	const n = 50 << 20
	before := heapAlloc()
	p := NewParser(hugeLineLog(n), Options{})
	e, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Query) != n+len("SELECT ''") || e.Truncated || e.QueryTimeUS != 500000 {
		t.Fatalf("query len %d truncated %v qt %d", len(e.Query), e.Truncated, e.QueryTimeUS)
	}
	if held := heapAlloc() - before; held > n*3/2 {
		t.Errorf("holding a %d-byte line costs %d bytes of heap; want it held once", n, held)
	}
	e, err = p.Next()
	if err != nil || string(e.Query) != "SELECT 2" {
		t.Fatalf("event after the huge line: %v %q", err, e.Query)
	}
	if c := cap(e.Query) + cap(p.lr.long); c > keepBufferBytes {
		t.Errorf("parser keeps %d bytes of buffers after the huge line", c)
	}
	if st := p.Stats(); st.Events != 2 || st.TruncatedLines != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestLineLimit: a line beyond MaxLineBytes is cut and reported, and
// reading it does not allocate in proportion to its length.
func TestLineLimit(t *testing.T) {
	const limit, n = 1 << 20, 64 << 20
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	p := NewParser(hugeLineLog(n), Options{MaxLineBytes: limit})
	e, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Query) != limit || !e.Truncated || len(e.Notes) == 0 || e.Notes[len(e.Notes)-1] != NoteTruncated {
		t.Fatalf("query len %d truncated %v notes %v", len(e.Query), e.Truncated, e.Notes)
	}
	if e, err = p.Next(); err != nil || string(e.Query) != "SELECT 2" {
		t.Fatalf("event after the cut line: %v %q", err, e.Query)
	}
	runtime.ReadMemStats(&ms1)
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 8*limit {
		t.Errorf("reading a %d-byte line with a %d limit allocated %d bytes", n, limit, alloc)
	}
	if st := p.Stats(); st.TruncatedLines != 1 || st.Events != 2 || st.Bytes < n {
		t.Errorf("stats %+v", st)
	}
}

// cycleReader repeats data forever.
type cycleReader struct {
	data []byte
	off  int
}

func (c *cycleReader) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

func fixtureBytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(fixtureDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseAllocatesNothing: once its buffers have grown, the parser
// allocates nothing per event, so memory does not grow with the file.
func TestParseAllocatesNothing(t *testing.T) {
	for _, name := range []string{"mariadb-10.11-sysbench.log", "mysql-8.0-slow-extra.log", "percona-5.7.log"} {
		p := NewParser(&cycleReader{data: fixtureBytes(t, name)}, Options{})
		for range 3000 { // warm up: grow every buffer
			if _, err := p.Next(); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(2000, func() {
			if _, err := p.Next(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %.2f allocations per event", name, allocs)
		}
	}
}

func TestConverterAllocatesNothingForKnownStatements(t *testing.T) {
	p := NewParser(&cycleReader{data: fixtureBytes(t, "mysql-5.7.log")}, Options{})
	c := NewConverter(ConvertOptions{})
	var st event.Statement
	for range 100 {
		e, _ := p.Next()
		c.Statement(e, &st)
	}
	allocs := testing.AllocsPerRun(500, func() {
		e, _ := p.Next()
		c.Statement(e, &st)
	})
	if allocs != 0 {
		t.Errorf("%.2f allocations per statement", allocs)
	}
}

func TestStatementFields(t *testing.T) {
	src, err := Open(fixtureDir + "/mysql-8.0-slow-extra.log")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got []event.Statement
	_, err = read(context.Background(), src, ReadOptions{}, func(s *event.Statement, _ *Event) { got = append(got, *s) })
	if err != nil || len(got) != 5 {
		t.Fatalf("%v, %d statements", err, len(got))
	}
	s := got[0]
	if s.Cmd != "COM_QUERY" || s.ConnID != 21 || s.User != "app" || s.DB != "shop" || s.ServerUS != 4015 ||
		s.Rows != 1 || s.RespBytes != 120 || s.ReqBytes != 52 || s.TReqFirst != 1709528767650306 || s.Error != nil ||
		s.LockUS != 3 || s.RowsExamined != 1 || got[2].RowsExamined != 500000 || got[2].LockUS != 100 {
		t.Errorf("statement 0: %+v", s)
	}
	if s.Digest == "" || s.DigestText == "" || s.SQL != s.DigestText || strings.Contains(s.SQL, "1001") {
		t.Errorf("statement 0 not redacted to its digest text: sql %q digest_text %q", s.SQL, s.DigestText)
	}
	if got[1].Error == nil || got[1].Error.Code != 1064 {
		t.Errorf("statement 1 error %+v, want code 1064", got[1].Error)
	}
}

func TestKeepLiteralsAdminAndOwn(t *testing.T) {
	log := "# User@Host: a[a] @ h []  Id: 3\n# Query_time: 0.1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1;\nSELECT 'secret';\n" +
		"# User@Host: a[a] @ h []  Id: 3\n# Query_time: 0.1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1;\n/* gapscope */ SELECT 1;\n" +
		"# User@Host: a[a] @ h []  Id: 3\n# Query_time: 0.000010  Lock_time: 0 Rows_sent: 0  Rows_examined: 0\nSET timestamp=1;\n# administrator command: Quit;\n"
	for _, keep := range []bool{false, true} {
		src := &Source{Reader: strings.NewReader(log), count: &countingReader{}}
		var got []event.Statement
		fs, err := read(context.Background(), src, ReadOptions{Convert: ConvertOptions{KeepLiterals: keep}},
			func(s *event.Statement, _ *Event) { got = append(got, *s) })
		if err != nil || len(got) != 2 || fs.Own != 1 || fs.AdminCommands != 1 {
			t.Fatalf("keep=%v: %v %d statements, stats %+v", keep, err, len(got), fs)
		}
		if hasSecret := strings.Contains(got[0].SQL, "secret"); hasSecret != keep {
			t.Errorf("keep=%v: sql %q", keep, got[0].SQL)
		}
		if got[1].Cmd != "COM_QUIT" || got[1].SQL != "administrator command: Quit" {
			t.Errorf("admin statement %+v", got[1])
		}
	}
}

type failingReader struct{ after int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(p), f.after)
	copy(p, bytes.Repeat([]byte("# Query_time: 1\n"), n/16+1)[:n])
	f.after -= n
	return n, nil
}

func TestReadErrorIsWrapped(t *testing.T) {
	p := NewParser(&failingReader{after: 100}, Options{})
	_, err := p.Next()
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "reading slow log") {
		t.Fatalf("err = %v", err)
	}
	if _, again := p.Next(); again == nil {
		t.Error("error not sticky")
	}
}

func TestReadFileStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := &Source{Reader: &cycleReader{data: fixtureBytes(t, "mysql-5.7.log")}, count: &countingReader{}}
	var n int
	fs, err := read(ctx, src, ReadOptions{}, func(*event.Statement, *Event) {
		if n++; n == 1000 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || fs.Events < 1000 {
		t.Fatalf("err %v, %d events", err, fs.Events)
	}
}

func TestOpenStdinAndGzip(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	gz := fixtureBytes(t, "mysql-5.7-gzipped.log")
	go func() { w.Write(gz); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old }()
	fs, err := ReadFile(context.Background(), "-", ReadOptions{}, func(*event.Statement, *Event) {})
	if err != nil || fs.Events != 5 {
		t.Fatalf("stdin gzip: %v, %+v", err, fs)
	}
	if _, err := Open(fixtureDir); err == nil {
		t.Error("opening a directory did not fail")
	}
	if _, err := Open(fixtureDir + "/no-such.log"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestHeaderLikeLinesInsideStatement: "# Time:" and "# User@Host:" lines
// inside a multi-line string do not split the statement, because the line
// before them does not end the statement with ";".
func TestHeaderLikeLinesInsideStatement(t *testing.T) {
	log := mariaHeader + "# Query_time: 0.1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nSET timestamp=1;\n" +
		"INSERT INTO t VALUES ('a\n# Time: 240102  3:04:05\n# User@Host: x[x] @ y []\n# Query_time: 9\nb');\n" +
		mariaHeader + "# Query_time: 0.2  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nSET timestamp=2;\nSELECT 2;\n"
	evs, st := parseAll(t, log, Options{})
	if len(evs) != 2 || st.Dropped() != 0 || !strings.Contains(evs[0].Query, "# Query_time: 9\nb')") || evs[1].Query != "SELECT 2" {
		t.Fatalf("events %+v, stats %+v", evs, st)
	}
}

func TestUserHostVariants(t *testing.T) {
	cases := []struct {
		line, user, host, ip string
		id                   uint64
		bad                  int64
	}{
		{"root[root] @ localhost []  Id:     8", "root", "localhost", "", 8, 0},
		{"root[root] @  [127.0.0.1]", "root", "", "127.0.0.1", 0, 0},
		{"[app] @ web1 [10.0.0.5]  Id: 12", "app", "web1", "10.0.0.5", 12, 0},
		{"app[app] @ web1 [10.0.0.5]  Id: x", "app", "web1", "10.0.0.5", 0, 1},
		{"", "", "", "", 0, 1},
		{"garbage", "", "", "", 0, 1},
	}
	p := NewParser(strings.NewReader(""), Options{})
	for _, c := range cases {
		for range 2 { // the second time comes from the cache
			var e Event
			before := p.stats.BadValues
			p.parseUserHost(&e, []byte(c.line))
			if string(e.User) != c.user || string(e.Host) != c.host || string(e.IP) != c.ip || e.ConnID != c.id || p.stats.BadValues-before != c.bad {
				t.Errorf("%q: user %q host %q ip %q id %d bad %d", c.line, e.User, e.Host, e.IP, e.ConnID, p.stats.BadValues-before)
			}
		}
	}
}

// TestCancelWhileInputBlocks: Ctrl-C on "tail -f slow.log | gapscope digest -"
// must return even though no more input arrives.
func TestCancelWhileInputBlocks(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write(fixtureBytes(t, "mysql-5.7.log")) // 5 events, then silence
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() {
		_, err := read(ctx, &Source{Reader: pr, count: &countingReader{}}, ReadOptions{}, func(*event.Statement, *Event) {})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("read did not return after cancel while its input was blocked")
	}
}

// MariaDB's log_slow_verbosity=engine lines (times in milliseconds, read
// to the nearest microsecond) and query_plan lines mark an event as
// carrying plan fields; QC_hit alone, which MariaDB writes on every event,
// does not.
func TestEngineAndPlanFields(t *testing.T) {
	text := mariaHeader + "# Query_time: 0.123273  Lock_time: 0.002915  Rows_sent: 0  Rows_examined: 0\n" +
		"# Rows_affected: 1000  Bytes_sent: 55\n" +
		"# Full_scan: Yes  Full_join: No  Tmp_table: Yes  Tmp_table_on_disk: No\n" +
		"# Pages_accessed: 3008  Pages_read: 2  Pages_prefetched: 4  Pages_updated: 2981  Old_rows_read: 7\n" +
		"# Pages_read_time: 1.5004  Engine_time: 32.7006\n" +
		"SET timestamp=1795307006;\nINSERT INTO t VALUES (1);\n" +
		mariaHeader + "# Query_time: 0.000010  Lock_time: 0.000000  Rows_sent: 1  Rows_examined: 0\n" +
		"SET timestamp=1795307006;\nSELECT 1;\n"
	p := NewParser(strings.NewReader(text), Options{})
	e, err := p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if !e.HasPlan || !e.FullScan || !e.TmpTable || e.PagesAccessed != 3008 || e.PagesRead != 2 || e.PagesUpdated != 2981 ||
		e.OldRowsRead != 7 || e.PagesReadTimeUS != 1500 || e.EngineTimeUS != 32_701 || e.RowsAffected != 1000 ||
		e.PagesPrefetched != 4 {
		t.Errorf("first event: %+v", e)
	}
	maria := EnginePagesAccessed | EnginePagesRead | EnginePagesPrefetched | EnginePagesUpdated | EngineOldRowsRead |
		EnginePagesReadTime | EngineTime
	if e.EngineFields != maria || !e.Has(EngineTime) || e.Has(EngineRecLockWait) {
		t.Errorf("first event: engine fields %b, want %b", e.EngineFields, maria)
	}
	e, err = p.Next()
	if err != nil {
		t.Fatal(err)
	}
	if e.HasPlan || e.QCHit || e.EngineFields != 0 {
		t.Errorf("QC_hit: No alone marked plan or engine fields: %+v", e)
	}
	if st := p.Stats(); st.BadValues != 0 {
		t.Errorf("%d bad values", st.BadValues)
	}
}

// Percona Server's InnoDB lines (indented, waits in seconds) are read with
// the fields they had marked, a written 0 included; "No InnoDB statistics
// available" leaves them unknown; a bad value is counted and its field
// not marked known.
func TestPerconaInnoDBFields(t *testing.T) {
	head := "# User@Host: app[app] @ web1 [10.0.0.5]  Id:    33\n# Schema: shop  Last_errno: 0  Killed: 0\n" +
		"# Query_time: 1.400000  Lock_time: 0.000100  Rows_sent: 0  Rows_examined: 1  Rows_affected: 1\n"
	text := head +
		"#   InnoDB_IO_r_ops: 3  InnoDB_IO_r_bytes: 49152  InnoDB_IO_r_wait: 0.004100\n" +
		"#   InnoDB_rec_lock_wait: 1.250000  InnoDB_queue_wait: 0.000000\n" +
		"#   InnoDB_pages_distinct: 9\n" +
		"SET timestamp=1714979289;\nUPDATE stock SET qty = qty - 1 WHERE sku = 'A-100';\n" +
		head + "# No InnoDB statistics available for this query\n" +
		"SET timestamp=1714979289;\nSELECT * FROM information_schema.processlist;\n" +
		head + "#   InnoDB_rec_lock_wait: 0.5x  InnoDB_queue_wait: 0.000200\n" +
		"SET timestamp=1714979289;\nSELECT 1;\n"
	p := NewParser(strings.NewReader(text), Options{})
	var got []Event
	for {
		e, err := p.Next()
		if err != nil {
			break
		}
		got = append(got, *e)
	}
	if len(got) != 3 {
		t.Fatalf("%d events, want 3", len(got))
	}
	e := got[0]
	all := EngineIOReadOps | EngineIOReadBytes | EngineIOReadWait | EngineRecLockWait | EngineQueueWait | EnginePagesDistinct
	if e.InnoDBIOReadOps != 3 || e.InnoDBIOReadBytes != 49152 || e.InnoDBIOReadWaitUS != 4100 ||
		e.InnoDBRecLockWaitUS != 1_250_000 || e.InnoDBQueueWaitUS != 0 || e.InnoDBPagesDistinct != 9 ||
		e.EngineFields != all || !e.HasPlan {
		t.Errorf("first event: %+v", e)
	}
	if got[1].EngineFields != 0 || got[1].HasPlan {
		t.Errorf("no InnoDB statistics: engine fields %b, plan %v", got[1].EngineFields, got[1].HasPlan)
	}
	if e := got[2]; e.EngineFields != EngineQueueWait || e.InnoDBQueueWaitUS != 200 || e.InnoDBRecLockWaitUS != 0 {
		t.Errorf("bad rec lock wait: engine fields %b, queue wait %d, lock wait %d", e.EngineFields, e.InnoDBQueueWaitUS, e.InnoDBRecLockWaitUS)
	}
	if st := p.Stats(); st.BadValues != 1 {
		t.Errorf("%d bad values, want 1", st.BadValues)
	}
}

// With LazyText a statement has no text until Text fills it, and then the
// same as without.
func TestConverterLazyText(t *testing.T) {
	n := 0
	for _, c := range []struct {
		log  string
		keep bool
	}{{"mysql-5.7.log", false}, {"mysql-5.7.log", true}, {"percona-5.7.log", false}, {"mariadb-10.11-sysbench.log", false}, {"mysql-8.0-slow-extra.log", true}} {
		p := NewParser(bytes.NewReader(fixtureBytes(t, c.log)), Options{})
		keep := c.keep
		eager := NewConverter(ConvertOptions{KeepLiterals: keep})
		lazy := NewConverter(ConvertOptions{KeepLiterals: keep, LazyText: true})
		for {
			e, err := p.Next()
			if err != nil {
				break
			}
			var want, got event.Statement
			if !eager.Statement(e, &want) || !lazy.Statement(e, &got) {
				continue
			}
			if got.SQL != "" || got.DigestText != "" || got.Digest != "" {
				t.Fatalf("lazy statement has a text: %+v", got)
			}
			lazy.Text(e, &got)
			if got.SQL != want.SQL || got.DigestText != want.DigestText || got.Digest != want.Digest || got.ServerUS != want.ServerUS {
				t.Errorf("keep %v: lazy %+v, eager %+v", keep, got, want)
			}
			n++
		}
	}
	if n < 50 {
		t.Fatalf("only %d statements compared", n)
	}
}
