package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

func runAnalyzeCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(collect.NewSecrets())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"analyze"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAnalyzeExitCodes(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pcap")
	empty := filepath.Join(dir, "empty.pcap")
	os.WriteFile(junk, []byte("definitely not a capture"), 0o644)
	os.WriteFile(empty, nil, 0o644)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, exitUsage, "requires at least 1 arg"},
		{[]string{"--format", "xml", junk}, exitUsage, "--format"},
		{[]string{"--port", "70000", junk}, exitUsage, "--port"},
		{[]string{"--top", "-1", junk}, exitUsage, "--top"},
		{[]string{"--bogus", junk}, exitUsage, "unknown flag"},
		{[]string{filepath.Join(dir, "missing.pcap")}, exitFailure, "no such file"},
		{[]string{junk}, exitFailure, "not a pcap or pcapng"},
		{[]string{empty}, exitFailure, "empty"},
		{[]string{"--events", filepath.Join(dir, "no/such/dir/ev.jsonl"), "../../testdata/captures/errors.pcap.gz"}, exitFailure, "creating events file"},
	}
	for _, c := range cases {
		_, err := runAnalyzeCmd(t, c.args...)
		if got := exitCode(err); got != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("analyze %v: exit %d (%v), want %d with %q", c.args, got, err, c.code, c.msg)
		}
	}
}

type analyzeJSON struct {
	Statements  int64            `json:"statements"`
	ByCommand   map[string]int64 `json:"by_command"`
	Connections int64            `json:"connections"`
	Digests     []struct {
		DigestText string `json:"digest_text"`
		Calls      int64  `json:"calls"`
		TotalUS    int64  `json:"total_us"`
		P99US      int64  `json:"p99_us"`
		Errors     int64  `json:"errors"`
	} `json:"digests"`
	Notes []string `json:"notes"`
}

// End to end: a sandbox, tcpdump on lo, go-sql-driver traffic, then the
// command on the file, in JSON and text, with an events file.
func TestAnalyzeSandboxCapture(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{})
	path := filepath.Join(t.TempDir(), "lo.pcap")
	stop := sandbox.Tcpdump(t, path, inst.Port)
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for i := range 10 {
		var n int
		if err := db.QueryRow(fmt.Sprintf("SELECT %d + 1", i)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT ? * 2", i).Scan(&n); err != nil { // prepared
			t.Fatal(err)
		}
	}
	db.Exec("SELECT * FROM mysql.no_such_table")
	db.Close()
	stop()

	events := filepath.Join(t.TempDir(), "ev.jsonl")
	out, err := runAnalyzeCmd(t, "--format", "json", "--port", fmt.Sprint(inst.Port), "--events", events, path)
	if err != nil {
		t.Fatal(err)
	}
	var r analyzeJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.ByCommand["COM_STMT_EXECUTE"] != 10 || r.ByCommand["COM_QUERY"] < 11 || r.Connections != 1 {
		t.Errorf("by_command %v connections %d", r.ByCommand, r.Connections)
	}
	calls := map[string]int64{}
	for _, d := range r.Digests {
		calls[strings.ToLower(d.DigestText)] += d.Calls
		if !strings.HasPrefix(d.DigestText, "(") && (d.TotalUS <= 0 || d.P99US <= 0) {
			t.Errorf("digest %q without latency", d.DigestText)
		}
	}
	// The prepared text's digest covers its PREPAREs and EXECUTEs.
	if calls["select ? + ?"] != 10 || calls["select ? * ?"] != 20 || calls["select * from mysql.no_such_table"] != 1 {
		t.Errorf("digests %v", calls)
	}
	lines := countLines(t, events)
	if int64(lines) != r.Statements {
		t.Errorf("%d event lines, %d statements", lines, r.Statements)
	}
	if ev := firstLine(t, events); !strings.Contains(ev, `"client_us"`) || strings.Contains(ev, `"sql":"SELECT 0 + 1"`) {
		t.Errorf("event line %s", ev)
	}
	// A wrong --port still finds the server by its greeting.
	out, err = runAnalyzeCmd(t, "--format", "json", "--port", "1", path)
	var r2 analyzeJSON
	if err != nil || json.Unmarshal([]byte(out), &r2) != nil || r2.Statements != r.Statements {
		t.Errorf("wrong-port run: %v, %d statements, want %d", err, r2.Statements, r.Statements)
	}
	txt, err := runAnalyzeCmd(t, "--top", "3", "--port", fmt.Sprint(inst.Port), path)
	if err != nil || !strings.Contains(strings.ToLower(txt), "select ? ") {
		t.Errorf("text: %v\n%s", err, txt)
	}
}

func countLines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func firstLine(t *testing.T, path string) string {
	b, _ := os.ReadFile(path)
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return string(line)
}

// TestAnalyzeRedactsErrorMessages: server error messages quote the values
// and SQL of the failed statement; without --keep-literals the events file
// carries them redacted like the SQL (code and SQLSTATE kept), with it
// verbatim.
func TestAnalyzeRedactsErrorMessages(t *testing.T) {
	capture := "../../testdata/captures/errors.pcap.gz"
	port := fmt.Sprint(fixturePort(t, "../../testdata/captures/errors.expect.json"))
	read := func(args ...string) string {
		t.Helper()
		events := filepath.Join(t.TempDir(), "ev.jsonl")
		if _, err := runAnalyzeCmd(t, append(args, "--port", port, "--events", events, capture)...); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(events)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	redacted := read()
	for _, leak := range []string{"'1'", "'PRIMARY'", "SELEC 1", "at line 1"} {
		if strings.Contains(redacted, leak) {
			t.Errorf("events without --keep-literals carry %q:\n%s", leak, redacted)
		}
	}
	for _, want := range []string{
		`"code":1062,"state":"23000","msg":"Duplicate entry ? for key ?"`,
		`"code":1064,"state":"42000","msg":"You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near ? at line ?"`,
	} {
		if !strings.Contains(redacted, want) {
			t.Errorf("events lack %s:\n%s", want, redacted)
		}
	}
	kept := read("--keep-literals")
	for _, want := range []string{"Duplicate entry '1' for key 'PRIMARY'", "near 'SELEC 1' at line 1"} {
		if !strings.Contains(kept, want) {
			t.Errorf("--keep-literals: events lack %q", want)
		}
	}
}

// TestAnalyzeWireFindings: a capture of a client that sleeps before
// reading an 11 MB result names CLIENT_BACKPRESSURE from the wire alone, in
// JSON (findings, like watch's, with the zero window and bytes as evidence)
// and in text, which also says what could not be judged without the
// server's side.
func TestAnalyzeWireFindings(t *testing.T) {
	capture := "../../testdata/captures/slow-client.pcap.gz"
	port := fmt.Sprint(fixturePort(t, "../../testdata/captures/slow-client.expect.json"))
	out, err := runAnalyzeCmd(t, "--format", "json", "--port", port, capture)
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Digests   []json.RawMessage `json:"digests"`
		Findings  []event.Finding   `json:"findings"`
		NotJudged []string          `json:"not_judged"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	var bp *event.Finding
	for i := range res.Findings {
		if res.Findings[i].Code == "CLIENT_BACKPRESSURE" {
			bp = &res.Findings[i]
		}
	}
	if bp == nil || len(res.Digests) == 0 {
		t.Fatalf("no CLIENT_BACKPRESSURE (or no profile) in analyze's JSON:\n%s", out)
	}
	if zw, _ := bp.Evidence["zero_window_us"].(float64); zw < 2_700_000 {
		t.Errorf("zero_window_us %v, want the capture's 2.76 s", bp.Evidence["zero_window_us"])
	}
	if rb, _ := bp.Evidence["resp_bytes"].(float64); rb < 11_000_000 {
		t.Errorf("resp_bytes %v, want the 11 MB result", bp.Evidence["resp_bytes"])
	}
	if !strings.Contains(bp.Summary, "cannot tell whether the server's time was inflated") {
		t.Errorf("summary does not say what the wire cannot tell: %q", bp.Summary)
	}
	if !slices.Contains(res.NotJudged, "SERVER_EXEC") {
		t.Errorf("not_judged %v", res.NotJudged)
	}
	text, err := runAnalyzeCmd(t, "--port", port, capture)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"findings from the wire alone:", "CLIENT_BACKPRESSURE [WARNING]", "zero_window_us: 2760510", "not judged without the server's side: POOL_QUEUE, SERVER_EXEC"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}
