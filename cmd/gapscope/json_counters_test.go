package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Counters every digest row carries, 0 included, in digest's and
// analyze's JSON (docs/events.md, "Absent fields").
var rowCounters = []string{"calls", "total_us", "min_us", "avg_us", "stddev_us", "p50_us", "p95_us", "p99_us", "max_us",
	"rows", "resp_bytes", "errors", "zero_window_us", "rows_sent", "rows_affected", "bytes_sent", "joined"}

// serverCounters are known only from the server's side: present (0
// included) in a slow log's rows, absent from a capture's, which cannot
// know them.
var serverCounters = []string{"lock_us", "rows_examined"}

// profileCounters are the profile's own, on every output.
var profileCounters = []string{"statements", "connections", "total_us", "joined", "classes"}

// checkCounters decodes a profile's JSON and checks its counters'
// presence: each of want on every row, none of absent on any; it returns
// the rows.
func checkCounters(t *testing.T, name, out string, want, absent []string) []map[string]any {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, k := range profileCounters {
		if _, ok := p[k].(float64); !ok {
			t.Errorf("%s: the profile lacks %s", name, k)
		}
	}
	list, _ := p["digests"].([]any)
	if len(list) == 0 {
		t.Fatalf("%s: no digest rows", name)
	}
	var rows []map[string]any
	for i, r := range list {
		row := r.(map[string]any)
		rows = append(rows, row)
		for _, k := range want {
			if _, ok := row[k].(float64); !ok {
				t.Errorf("%s: row %d (%.40v) lacks %s", name, i, row["digest_text"], k)
			}
		}
		for _, k := range absent {
			if v, ok := row[k]; ok {
				t.Errorf("%s: row %d has %s=%v, which it cannot know", name, i, k, v)
			}
		}
		if a, ok := row["attributes"].(map[string]any); ok {
			for _, k := range []string{"rows_sent", "bytes_sent", "rows_affected"} {
				if _, ok := a[k]; !ok {
					t.Errorf("%s: row %d's attributes lack %s", name, i, k)
				}
			}
		}
	}
	return rows
}

// TestDigestJSONCounters: every slow-log fixture's classes carry every
// counter, the server's too, 0 included; a class that examined no row
// says rows_examined 0 (it used to leave the key out).
func TestDigestJSONCounters(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join(slowlogDir, "*.log*"))
	logs = slices.DeleteFunc(logs, func(p string) bool { return strings.HasSuffix(p, ".expect") })
	if len(logs) == 0 {
		t.Fatal("no slow-log fixtures")
	}
	for _, l := range logs {
		out, err := runDigestCmd(t, nil, "--format", "json", l)
		if err != nil {
			t.Errorf("digest %s: %v", l, err)
			continue
		}
		checkCounters(t, filepath.Base(l), out, append(slices.Clone(rowCounters), serverCounters...), nil)
	}
	log := `# Time: 2024-01-02T03:04:05.123456Z
# User@Host: app[app] @ web1 [10.0.0.5]  Id:    12
# Query_time: 0.000150  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
SET timestamp=1704164645;
SELECT 1 FROM dual WHERE 1 = 0;
`
	path := filepath.Join(t.TempDir(), "zero.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runDigestCmd(t, nil, "--format", "json", path)
	if err != nil {
		t.Fatal(err)
	}
	rows := checkCounters(t, "stdin", out, append(slices.Clone(rowCounters), serverCounters...), nil)
	if got := fmt.Sprint(rows[0]["rows_examined"], rows[0]["lock_us"], rows[0]["rows"], rows[0]["errors"]); got != "0 0 0 0" {
		t.Errorf("a class that examined no row: rows_examined, lock_us, rows, errors = %s, want 0 0 0 0", got)
	}
}

// TestAnalyzeJSONCounters: every capture's rows carry the wire's
// counters, 0 included, and leave out the server's, which the wire
// cannot know.
func TestAnalyzeJSONCounters(t *testing.T) {
	captures, _ := filepath.Glob("../../testdata/captures/*.pcap*.gz")
	if len(captures) == 0 {
		t.Fatal("no fixture captures under testdata/captures")
	}
	zeros := 0
	for _, c := range captures {
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(c), ".gz"), ".pcapng"), ".pcap")
		port := fixturePort(t, filepath.Join(filepath.Dir(c), name+".expect.json"))
		out, err := runAnalyzeCmd(t, "--format", "json", "--port", fmt.Sprint(port), "--top", "0", c)
		if err != nil {
			t.Errorf("analyze %s: %v", c, err)
			continue
		}
		for _, r := range checkCounters(t, name, out, rowCounters, serverCounters) {
			if r["errors"] == 0.0 && r["zero_window_us"] == 0.0 {
				zeros++
			}
		}
	}
	if zeros == 0 {
		t.Errorf("no row with zero errors and zero window: the fixtures do not exercise a known 0")
	}
}
