package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/offline"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// mayBeAbsent reads docs/events.md's table of the numbers an output may
// leave out ("Absent fields: unknown, never zero"): scope ("profile",
// "event", "server", "digest", "analyze", "watch", "check") and path -> true.
func mayBeAbsent(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Absent fields: unknown, never zero")
	if start < 0 {
		t.Fatal(`docs/events.md has no "Absent fields: unknown, never zero" section`)
	}
	section := doc[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	allowed := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| (profile|event|server|digest|analyze|watch|check) \\| (.+?) \\| .+\\|$")
	field := regexp.MustCompile("`([a-z_.\\[\\]]+)`")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		for _, f := range field.FindAllStringSubmatch(m[2], -1) {
			allowed[m[1]+":"+f[1]] = true
		}
	}
	if len(allowed) < 20 {
		t.Fatalf("read %d fields from docs/events.md's absent-fields table; its rows are | scope | `path`, ... | why |", len(allowed))
	}
	return allowed
}

// scopes name the types whose JSON is documented on its own: their paths
// start afresh.
var scopes = map[reflect.Type]string{
	reflect.TypeFor[report.ProfileResult](): "profile",
	reflect.TypeFor[event.Statement]():      "event",
	reflect.TypeFor[collect.ServerInfo]():   "server",
}

// counterLike: numbers and objects (of numbers) are held to the table;
// strings, flags, lists and maps (breakdowns by name) are not counters.
func counterLike(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
		if t.Kind() == reflect.Struct {
			return true
		}
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return t != reflect.TypeFor[event.Reason]() // written as its name
	}
	return false
}

// jsonWalk holds a decoded JSON value to its Go type: every counter the
// type declares is present on every object, unless the table allows its
// absence. It counts, per scope:path, the objects seen and the zeros
// written, so a test can tell that a known 0 was exercised.
type jsonWalk struct {
	t       *testing.T
	errorf  func(format string, args ...any) // t.Errorf unless a test of the walk
	name    string
	allowed map[string]bool
	objects map[string]int // scope:path of objects walked
	zeros   map[string]int // scope:path of counters written as 0
	absent  map[string]int // scope:path of counters left out
}

func newJSONWalk(t *testing.T, name string, allowed map[string]bool) *jsonWalk {
	return &jsonWalk{t: t, errorf: t.Errorf, name: name, allowed: allowed, objects: map[string]int{}, zeros: map[string]int{}, absent: map[string]int{}}
}

// walk checks v (decoded with UseNumber off) against typ; scope and path
// locate it for the table.
func (w *jsonWalk) walk(typ reflect.Type, v any, scope, path string) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if s, ok := scopes[typ]; ok {
		scope, path = s, ""
	}
	switch typ.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			if v != nil {
				w.errorf("%s: %s:%s is %T, want an object", w.name, scope, path, v)
			}
			return
		}
		w.objects[scope+":"+path]++
		w.fields(typ, obj, scope, path)
	case reflect.Slice, reflect.Array:
		list, _ := v.([]any)
		for _, e := range list {
			w.walk(typ.Elem(), e, scope, path+"[]")
		}
	}
}

func (w *jsonWalk) fields(typ reflect.Type, obj map[string]any, scope, path string) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" { // embedded: its fields sit inline
			et, s, p := f.Type, scope, path
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if sc, ok := scopes[et]; ok {
				s, p = sc, ""
			}
			w.fields(et, obj, s, p)
			continue
		}
		if name == "" {
			name = f.Name
		}
		key := name
		if path != "" {
			key = path + "." + name
		}
		val, ok := obj[name]
		if !ok {
			if counterLike(f.Type) {
				w.absent[scope+":"+key]++
				if !w.allowed[scope+":"+key] {
					w.errorf("%s: %s:%s is absent, and docs/events.md does not say it may be", w.name, scope, key)
				}
			}
			continue
		}
		if val == 0.0 && counterLike(f.Type) {
			w.zeros[scope+":"+key]++
		}
		w.walk(f.Type, val, scope, key)
	}
}

// walkDoc decodes out and walks it as typ.
func (w *jsonWalk) walkDoc(typ reflect.Type, out, scope string) {
	w.t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		w.t.Fatalf("%s: %v\n%.500s", w.name, err, out)
	}
	w.walk(typ, v, scope, "")
}

// walkEvents walks an events file line by line and returns its lines,
// decoded.
func (w *jsonWalk) walkEvents(path string) []map[string]any {
	w.t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		w.t.Fatal(err)
	}
	defer fh.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			w.t.Fatalf("%s: %s: %v", w.name, path, err)
		}
		w.walk(reflect.TypeFor[event.Statement](), m, "event", "")
		lines = append(lines, m)
	}
	if err := sc.Err(); err != nil {
		w.t.Fatal(err)
	}
	return lines
}

// holdEvents asserts the source rules of docs/events.md on each line:
// present lists the counters every line must carry, absent those none may.
func holdEvents(t *testing.T, name string, lines []map[string]any, present, absent []string) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatalf("%s: no events", name)
	}
	for i, l := range lines {
		for _, k := range present {
			if _, ok := l[k].(float64); !ok {
				t.Errorf("%s: line %d (%v %.40v) lacks %s, which its source knows", name, i+1, l["cmd"], l["sql"], k)
			}
		}
		for _, k := range absent {
			if v, ok := l[k]; ok {
				t.Errorf("%s: line %d (%v %.40v) has %s=%v, which its source cannot know", name, i+1, l["cmd"], l["sql"], k, v)
			}
		}
	}
}

// TestJSONAbsentOnlyAsDocumented walks digest's and analyze's JSON and
// events on every fixture by their Go types: a number is left out only
// where docs/events.md's table says it may be, and the events hold to
// their sources (a slow log knows the server's counters, the wire the
// request's bytes).
func TestJSONAbsentOnlyAsDocumented(t *testing.T) {
	allowed := mayBeAbsent(t)
	dir := t.TempDir()
	logs, _ := filepath.Glob(filepath.Join(slowlogDir, "*.log*"))
	logs = slices.DeleteFunc(logs, func(p string) bool { return strings.HasSuffix(p, ".expect") })
	if len(logs) == 0 {
		t.Fatal("no slow-log fixtures")
	}
	w := newJSONWalk(t, "digest", allowed)
	for i, l := range logs {
		events := filepath.Join(dir, fmt.Sprintf("digest-%d.jsonl", i))
		out, err := runDigestCmd(t, nil, "--format", "json", "--events", events, l)
		if err != nil {
			t.Errorf("digest %s: %v", l, err)
			continue
		}
		w.name = "digest " + filepath.Base(l)
		w.walkDoc(reflect.TypeFor[offline.DigestResult](), out, "digest")
		holdEvents(t, w.name, w.walkEvents(events), []string{"server_us"}, []string{"transit_us"})
	}
	for _, k := range []string{"profile:digests[].rows_examined", "profile:digests[].lock_us", "event:server_us",
		"event:lock_us", "event:rows_examined"} {
		if w.zeros[k] == 0 {
			t.Errorf("digest: no fixture writes %s as 0: the fixtures do not exercise a known 0", k)
		}
	}
	if w.objects["digest:"] != len(logs) || w.objects["profile:digests[]"] == 0 {
		t.Errorf("digest: walked %d outputs of %d, %d rows", w.objects["digest:"], len(logs), w.objects["profile:digests[]"])
	}
	// percona-5.7.log: a class whose statement had InnoDB_queue_wait: 0,
	// and one with "No InnoDB statistics available for this query".
	if w.zeros["profile:digests[].plan.innodb_queue_wait_us"] == 0 || w.absent["profile:digests[].plan.innodb_io_r_ops"] == 0 {
		t.Errorf("digest: a plan's engine counters: written as 0 %d times, left out %d times; want both (percona-5.7.log)",
			w.zeros["profile:digests[].plan.innodb_queue_wait_us"], w.absent["profile:digests[].plan.innodb_io_r_ops"])
	}

	w = newJSONWalk(t, "analyze", allowed)
	captures, _ := filepath.Glob("../../testdata/captures/*.pcap*.gz")
	if len(captures) == 0 {
		t.Fatal("no fixture captures under testdata/captures")
	}
	for i, c := range captures {
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(c), ".gz"), ".pcapng"), ".pcap")
		port := fixturePort(t, filepath.Join(filepath.Dir(c), name+".expect.json"))
		events := filepath.Join(dir, fmt.Sprintf("analyze-%d.jsonl", i))
		out, err := runAnalyzeCmd(t, "--format", "json", "--port", fmt.Sprint(port), "--top", "0", "--events", events, c)
		if err != nil {
			t.Errorf("analyze %s: %v", c, err)
			continue
		}
		w.name = "analyze " + name
		w.walkDoc(reflect.TypeFor[offline.AnalyzeResult](), out, "analyze")
		// The wire alone: the request's bytes, never the server's counters.
		holdEvents(t, w.name, w.walkEvents(events), []string{"req_bytes"}, []string{"server_us", "lock_us", "rows_examined"})
	}
	if w.objects["analyze:"] != len(captures) || w.objects["profile:digests[]"] == 0 {
		t.Errorf("analyze: walked %d outputs of %d, %d rows", w.objects["analyze:"], len(captures), w.objects["profile:digests[]"])
	}
	if w.absent["profile:digests[].rows_examined"] == 0 || w.zeros["profile:digests[].errors"] == 0 {
		t.Errorf("analyze: the fixtures exercise neither an unknown rows_examined nor a known 0 (absent %v, zeros %v)", w.absent, w.zeros)
	}
}

// TestDigestEventsKnowWhatTheLogHad: a slow-log statement's events line
// carries lock_us, rows_examined and req_bytes when its entry had
// Lock_time, Rows_examined and Bytes_received, 0 included, and leaves out
// those it lacked.
func TestDigestEventsKnowWhatTheLogHad(t *testing.T) {
	log := `# Time: 2024-01-02T03:04:05.123456Z
# User@Host: app[app] @ web1 [10.0.0.5]  Id:    12
# Query_time: 0.000000  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0 Thread_id: 12 Errno: 0 Killed: 0 Bytes_received: 0 Bytes_sent: 0
SET timestamp=1704164645;
SELECT 1 FROM dual WHERE 1 = 0;
# Time: 2024-01-02T03:04:06.123456Z
# User@Host: app[app] @ web1 [10.0.0.5]  Id:    12
# Query_time: 0.000150  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
SET timestamp=1704164646;
SELECT 2 FROM dual WHERE 1 = 0;
# Time: 2024-01-02T03:04:07.123456Z
# User@Host: app[app] @ web1 [10.0.0.5]  Id:    12
# Query_time: 0.000150
SET timestamp=1704164647;
SELECT 3 FROM dual WHERE 1 = 0;
`
	dir := t.TempDir()
	path, events := filepath.Join(dir, "known.log"), filepath.Join(dir, "known.jsonl")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runDigestCmd(t, nil, "--format", "json", "--events", events, path); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	w := newJSONWalk(t, "digest known.log", mayBeAbsent(t))
	lines := w.walkEvents(events)
	if len(lines) != 3 {
		t.Fatalf("%d events, want 3", len(lines))
	}
	want := []struct{ present, absent []string }{
		{[]string{"server_us", "lock_us", "rows_examined", "req_bytes"}, nil},
		{[]string{"server_us", "lock_us", "rows_examined"}, []string{"req_bytes"}},
		{[]string{"server_us"}, []string{"lock_us", "rows_examined", "req_bytes"}},
	}
	for i, l := range lines {
		holdEvents(t, fmt.Sprintf("entry %d", i+1), []map[string]any{l}, want[i].present, want[i].absent)
		for _, k := range want[i].present {
			if k != "server_us" && l[k] != 0.0 {
				t.Errorf("entry %d: %s = %v, want 0", i+1, k, l[k])
			}
		}
	}
}

// watchJSON runs watch on inst for d with a small load (a select that
// examines no row, one that fails, a sleep) and returns its JSON result
// and events file.
func watchJSON(t *testing.T, inst *sandbox.Instance, d time.Duration, extra ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for loadCtx.Err() == nil {
			var v int
			_ = db.QueryRowContext(loadCtx, "SELECT 1 FROM dual WHERE 1 = 0").Scan(&v)
			_ = db.QueryRowContext(loadCtx, "SELECT SLEEP(0.002)").Scan(&v)
			_, _ = db.ExecContext(loadCtx, "SELECT * FROM no_such_db.no_such_table")
			select {
			case <-loadCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	events := filepath.Join(t.TempDir(), "watch.jsonl")
	args := append([]string{"watch", "--dsn", inst.DSN(""), "--no-live", "--duration", d.String(), "--poll", "100ms",
		"--cpu-budget", "0", "--events", events, "--format", "json"}, extra...)
	out, stderr, err := runCmdSplit(ctx, args...)
	stopLoad()
	<-loadDone
	if err != nil {
		t.Fatalf("watch %v: %v\n%s", extra, err, stderr)
	}
	return out, events
}

// TestWatchJSONCounters runs watch with a capture and without one on a
// sandbox: its result's numbers are absent only where docs/events.md says
// they may be, and its events hold to their source: the wire's carry
// req_bytes and, joined, the server's server_us, lock_us and rows_examined
// (0 included), unjoined none of the three; the server-only ones carry
// server_us, lock_us and rows_examined, 0 included, and no req_bytes.
func TestWatchJSONCounters(t *testing.T) {
	allowed := mayBeAbsent(t)
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: watchServerArgs})

	t.Run("capture", func(t *testing.T) {
		out, events := watchJSON(t, inst, 4*time.Second)
		w := newJSONWalk(t, "watch", allowed)
		w.walkDoc(reflect.TypeFor[watch.Result](), out, "watch")
		var res struct {
			ServerOnly bool `json:"server_only"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.ServerOnly {
			t.Skipf("watch could not capture here (server_only %v, %v)", res.ServerOnly, err)
		}
		lines := w.walkEvents(events)
		var wire, joined []map[string]any
		for _, l := range lines {
			if l["conn"] == "" {
				continue // a client the capture did not see (a unix socket)
			}
			wire = append(wire, l)
			if l["joined"] == true {
				joined = append(joined, l)
			}
		}
		holdEvents(t, "watch wire", wire, []string{"req_bytes"}, nil)
		holdEvents(t, "watch joined", joined, []string{"server_us", "lock_us", "rows_examined"}, nil)
		for _, l := range wire {
			if l["joined"] == false && l["join_source"] == nil {
				holdEvents(t, "watch unjoined", []map[string]any{l}, nil, []string{"server_us", "lock_us", "rows_examined"})
			}
		}
		if w.absent["profile:digests[].rows_examined"] == 0 {
			t.Errorf("the wire's profile rows carry rows_examined, which the wire cannot know")
		}
		t.Logf("%d events, %d from the wire, %d joined; left out (as documented): %v", len(lines), len(wire), len(joined), w.absent)
	})

	t.Run("no capture", func(t *testing.T) {
		out, events := watchJSON(t, inst, 3*time.Second, "--no-capture")
		w := newJSONWalk(t, "watch --no-capture", allowed)
		w.walkDoc(reflect.TypeFor[watch.Result](), out, "watch")
		lines := w.walkEvents(events)
		holdEvents(t, "watch server-only", lines, []string{"server_us", "lock_us", "rows_examined"}, []string{"req_bytes"})
		for _, k := range []string{"event:rows_examined", "event:lock_us", "profile:digests[].rows_examined"} {
			if w.zeros[k] == 0 {
				t.Errorf("no %s written as 0, though SELECT 1 FROM dual WHERE 1 = 0 examines no row", k)
			}
		}
		t.Logf("%d events; left out (as documented): %v", len(lines), w.absent)
	})
}

// TestCheckJSONCounters: check's JSON leaves a number out only where
// docs/events.md says it may.
func TestCheckJSONCounters(t *testing.T) {
	allowed := mayBeAbsent(t)
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	out, err := runCheckCmd(t, "--dsn", inst.DSN(""), "--format", "json")
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	w := newJSONWalk(t, "check", allowed)
	w.walkDoc(reflect.TypeFor[checkReport](), out, "check")
	if w.objects["server:"] != 1 {
		t.Errorf("check's JSON has no server object:\n%s", out)
	}
	if w.zeros["server:extra_port"]+w.absent["server:extra_port"] != 1 {
		t.Errorf("extra_port neither written nor left out")
	}
	t.Logf("left out (as documented): %v", w.absent)
}

// TestJSONWalkCatchesAbsence: the walk fails an output that leaves out a
// counter the table does not list.
func TestJSONWalkCatchesAbsence(t *testing.T) {
	w := newJSONWalk(t, "synthetic", map[string]bool{"event:conn_id": true})
	var errs []string
	w.errorf = func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	w.walkDoc(reflect.TypeFor[event.Statement](), `{"conn":"c","cmd":"COM_QUERY","client_us":0}`, "event")
	if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "event:request_us is absent") }) ||
		slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, "conn_id") }) {
		t.Errorf("the walk's complaints about a line without request_us (conn_id may be absent): %q", errs)
	}
	if w.zeros["event:client_us"] != 1 || w.absent["event:request_us"] != 1 || w.absent["event:conn_id"] != 1 {
		t.Errorf("zeros %v absent %v", w.zeros, w.absent)
	}
}
