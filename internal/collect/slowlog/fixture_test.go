package slowlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden .golden.json files")

// fixtureDir holds the slow logs of every dialect (see testdata/README).
var fixtureDir = filepath.Join("..", "..", "..", "testdata", "slowlogs")

// goldenEvent is the parser's output for golden files: every field, with
// long statements shortened (their length and a prefix are enough to see a
// change).
type goldenEvent struct {
	Line          int64    `json:"line"`
	User          string   `json:"user,omitempty"`
	Host          string   `json:"host,omitempty"`
	IP            string   `json:"ip,omitempty"`
	ConnID        uint64   `json:"conn_id,omitempty"`
	Schema        string   `json:"schema,omitempty"`
	QueryTimeUS   int64    `json:"query_time_us"`
	LockTimeUS    int64    `json:"lock_time_us"`
	RowsSent      int64    `json:"rows_sent"`
	RowsExamined  int64    `json:"rows_examined"`
	RowsAffected  int64    `json:"rows_affected,omitempty"`
	BytesSent     int64    `json:"bytes_sent,omitempty"`
	BytesRecv     int64    `json:"bytes_received,omitempty"`
	Errno         int      `json:"errno,omitempty"`
	StartUS       int64    `json:"start_us"`
	EndUS         int64    `json:"end_us"`
	TimeUS        int64    `json:"time_us,omitempty"`
	SetTimestamp  int64    `json:"set_timestamp,omitempty"`
	TmpTables     int64    `json:"tmp_tables,omitempty"`
	TmpDiskTables int64    `json:"tmp_disk_tables,omitempty"`
	FullScan      bool     `json:"full_scan,omitempty"`
	Filesort      bool     `json:"filesort,omitempty"`
	TmpTable      bool     `json:"tmp_table,omitempty"`
	InnoDBReadOps int64    `json:"innodb_io_r_ops,omitempty"`
	InnoDBReadUS  int64    `json:"innodb_io_r_wait_us,omitempty"`
	InnoDBLockUS  int64    `json:"innodb_rec_lock_wait_us,omitempty"`
	InnoDBRBytes  int64    `json:"innodb_io_r_bytes,omitempty"`
	InnoDBQueueUS int64    `json:"innodb_queue_wait_us,omitempty"`
	InnoDBPages   int64    `json:"innodb_pages_distinct,omitempty"`
	PagesAccessed int64    `json:"pages_accessed,omitempty"`
	PagesRead     int64    `json:"pages_read,omitempty"`
	PagesPrefetch int64    `json:"pages_prefetched,omitempty"`
	PagesUpdated  int64    `json:"pages_updated,omitempty"`
	OldRowsRead   int64    `json:"old_rows_read,omitempty"`
	PagesReadUS   int64    `json:"pages_read_time_us,omitempty"`
	EngineUS      int64    `json:"engine_time_us,omitempty"`
	EngineFields  string   `json:"engine_fields,omitempty"`
	RateLimit     int64    `json:"rate_limit,omitempty"`
	ExplainLines  int      `json:"explain_lines,omitempty"`
	Admin         string   `json:"admin,omitempty"`
	QueryLen      int      `json:"query_len"`
	Query         string   `json:"query"`
	Notes         []string `json:"notes,omitempty"`
}

func toGolden(e *Event) goldenEvent {
	q := e.Query
	if len(q) > 160 {
		q = q[:160]
	}
	return goldenEvent{
		Line: e.Line, User: string(e.User), Host: string(e.Host), IP: string(e.IP), ConnID: e.ConnID,
		Schema: string(e.Schema), QueryTimeUS: e.QueryTimeUS, LockTimeUS: e.LockTimeUS,
		RowsSent: e.RowsSent, RowsExamined: e.RowsExamined, RowsAffected: e.RowsAffected,
		BytesSent: e.BytesSent, BytesRecv: e.BytesRecv, Errno: e.Errno, StartUS: e.StartUS, EndUS: e.EndUS,
		TimeUS: e.TimeUS, SetTimestamp: e.SetTimestamp, TmpTables: e.TmpTables, TmpDiskTables: e.TmpDiskTables,
		FullScan: e.FullScan, Filesort: e.Filesort, TmpTable: e.TmpTable, InnoDBReadOps: e.InnoDBIOReadOps,
		InnoDBReadUS: e.InnoDBIOReadWaitUS, InnoDBLockUS: e.InnoDBRecLockWaitUS, InnoDBRBytes: e.InnoDBIOReadBytes,
		InnoDBQueueUS: e.InnoDBQueueWaitUS, InnoDBPages: e.InnoDBPagesDistinct, PagesAccessed: e.PagesAccessed,
		PagesRead: e.PagesRead, PagesPrefetch: e.PagesPrefetched, PagesUpdated: e.PagesUpdated, OldRowsRead: e.OldRowsRead,
		PagesReadUS: e.PagesReadTimeUS, EngineUS: e.EngineTimeUS, EngineFields: engineFieldNames(e), RateLimit: e.RateLimit,
		ExplainLines: e.ExplainLines, Admin: string(e.AdminCommand), QueryLen: len(e.Query), Query: string(q),
		Notes: append([]string(nil), e.Notes...),
	}
}

// engineFields names the Engine* bits as the log writes the fields.
var engineFields = []struct {
	bit  uint16
	name string
}{
	{EngineIOReadOps, "InnoDB_IO_r_ops"}, {EngineIOReadBytes, "InnoDB_IO_r_bytes"}, {EngineIOReadWait, "InnoDB_IO_r_wait"},
	{EngineRecLockWait, "InnoDB_rec_lock_wait"}, {EngineQueueWait, "InnoDB_queue_wait"},
	{EnginePagesDistinct, "InnoDB_pages_distinct"}, {EnginePagesAccessed, "Pages_accessed"}, {EnginePagesRead, "Pages_read"},
	{EnginePagesPrefetched, "Pages_prefetched"}, {EnginePagesUpdated, "Pages_updated"}, {EngineOldRowsRead, "Old_rows_read"},
	{EnginePagesReadTime, "Pages_read_time"}, {EngineTime, "Engine_time"},
}

// engineFieldNames lists the engine fields the event had, so a golden
// file tells a 0 the log wrote from a field it lacked.
func engineFieldNames(e *Event) string {
	var names []string
	for _, f := range engineFields {
		if e.Has(f.bit) {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, " ")
}

// fixtureLocation is the zone YYMMDD time lines of the fixtures are read
// in, so golden times do not depend on the machine's zone.
var fixtureLocation = time.UTC

func fixtures(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.log"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in %s (%v)", fixtureDir, err)
	}
	return paths
}

// parseFixture parses a fixture through Open (so gzip is detected by magic).
func parseFixture(t *testing.T, path string) ([]goldenEvent, Stats) {
	t.Helper()
	src, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := NewParser(src.Reader, Options{Location: fixtureLocation})
	var out []goldenEvent
	for {
		e, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, toGolden(e))
	}
	return out, p.Stats()
}

// readExpect reads a fixture's sidecar: "name value" lines, "#" comments.
func readExpect(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path + ".expect")
	if err != nil {
		t.Fatalf("every fixture needs a .expect sidecar: %v", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil || len(fields) != 2 {
			t.Fatalf("%s.expect: bad line %q", path, sc.Text())
		}
		out[fields[0]] = v
	}
	return out
}

func statValue(st Stats, totalQT int64, name string) (int64, bool) {
	switch name {
	case "events":
		return st.Events, true
	case "query_time_us":
		return totalQT, true
	case "header_only":
		return st.HeaderOnly, true
	case "orphans":
		return st.Orphans, true
	case "malformed":
		return st.Malformed, true
	case "bad_values":
		return st.BadValues, true
	case "restarts":
		return st.Restarts, true
	case "truncated_lines":
		return st.TruncatedLines, true
	case "admin_commands":
		return st.AdminCommands, true
	}
	return 0, false
}

// TestFixtures checks every fixture's event count and total Query_time
// against its independently computed sidecar, and its events against the
// golden file.
func TestFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			events, st := parseFixture(t, path)
			var total int64
			for _, e := range events {
				total += e.QueryTimeUS
			}
			if int64(len(events)) != st.Events {
				t.Errorf("stats say %d events, got %d", st.Events, len(events))
			}
			for name, want := range readExpect(t, path) {
				got, ok := statValue(st, total, name)
				if !ok {
					t.Errorf("unknown expectation %q", name)
				} else if got != want {
					t.Errorf("%s = %d, want %d (stats %+v)", name, got, want, st)
				}
			}
			checkGolden(t, path, events)
		})
	}
}

func checkGolden(t *testing.T, path string, events []goldenEvent) {
	t.Helper()
	golden := strings.TrimSuffix(path, ".log") + ".golden.json"
	got, err := json.MarshalIndent(events, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("events differ from %s; run go test -run TestFixtures -update and review the diff", golden)
	}
}
