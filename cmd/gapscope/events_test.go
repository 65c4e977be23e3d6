package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/watch"
)

// runCmdSplit runs gapscope with args and returns stdout and stderr apart.
func runCmdSplit(ctx context.Context, args ...string) (string, string, error) {
	root := newRootCmd(collect.NewSecrets())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// writeEventsFile writes n statements as an events file and returns its path
// and content.
func writeEventsFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	var b bytes.Buffer
	ew := report.NewEventWriter(&b)
	for i := range n {
		s := reportStatement(reportStart, i)
		if err := ew.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ew.Flush(); err != nil {
		t.Fatal(err)
	}
	return path, b.Bytes()
}

// TestReportReadsTornEventsFile: the events file of a watch killed
// mid-write ends inside a line; report charts every whole line before it
// and says on stderr that the tail was torn.
func TestReportReadsTornEventsFile(t *testing.T) {
	path, content := writeEventsFile(t, 300)
	if err := os.WriteFile(path, content[:len(content)-25], 0o644); err != nil {
		t.Fatal(err)
	}
	page, stderr, err := runCmdSplit(context.Background(), "report", "--events", path, "-o", "-")
	if err != nil {
		t.Fatalf("report refused a torn events file: %v", err)
	}
	if !strings.Contains(page, "299 statements, 299 joined") {
		t.Errorf("report does not hold the 299 whole lines")
	}
	if !strings.Contains(stderr, "events.jsonl: the last line is torn") || !strings.Contains(stderr, "299 whole lines") {
		t.Errorf("stderr does not say the tail was torn: %q", stderr)
	}
	if !strings.Contains(page, "note: "+path+": the last line is torn") {
		t.Errorf("the page does not say the tail was torn")
	}
}

// TestEventsFilesCarrySchemaVersion: every line analyze and digest write
// with --events starts with the events schema version, and report reads
// those files back. watch writes through the same eventsFile (sink.go).
func TestEventsFilesCarrySchemaVersion(t *testing.T) {
	dir := t.TempDir()
	capture := "../../testdata/captures/errors.pcap.gz"
	port := fmt.Sprint(fixturePort(t, "../../testdata/captures/errors.expect.json"))
	analyzed, digested := filepath.Join(dir, "analyze.jsonl"), filepath.Join(dir, "digest.jsonl")
	if _, err := runAnalyzeCmd(t, "--port", port, "--events", analyzed, capture); err != nil {
		t.Fatal(err)
	}
	if _, err := runDigestCmd(t, nil, "--events", digested, "--tz", "UTC", slowlogDir+"/percona-5.7.log"); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf(`{"v":%d,"conn":`, event.SchemaVersion)
	for _, path := range []string{analyzed, digested} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, head) {
				t.Errorf("%s line %d does not start with %s: %.80s", filepath.Base(path), i+1, head, l)
			}
		}
		if _, stderr, err := runCmdSplit(context.Background(), "report", "--events", path, "-o", filepath.Join(dir, "r.html")); err != nil {
			t.Errorf("report --events %s: %v %s", filepath.Base(path), err, stderr)
		}
		if len(lines) < 3 {
			t.Errorf("%s: %d lines, the fixture has more statements", filepath.Base(path), len(lines))
		}
	}
}

// The run's outputs and the --txns file are watch sinks: without a file
// they take nothing (no statement is queued for them); with one, what
// they take is in the file once watch closed them.
func TestOutputSinks(t *testing.T) {
	none, err := report.OpenRunOutputs(context.Background(), io.Discard, report.RunOutputOptions{Command: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	if k := (&outputsSink{RunOutputs: none}); k.Takes() != 0 || k.Close(&watch.Snapshot{Final: true}) != nil || k.closeErr != nil {
		t.Errorf("no outputs: takes %b, close error %v", k.Takes(), k.closeErr)
	}
	if k := (txnsSink{}); k.Takes() != 0 || k.Close(&watch.Snapshot{Final: true}) != nil {
		t.Errorf("no --txns file: takes %b", k.Takes())
	}
	dir := t.TempDir()
	events, txnsPath := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "txns.jsonl")
	outs, err := report.OpenRunOutputs(context.Background(), io.Discard, report.RunOutputOptions{Command: "watch", Events: events})
	if err != nil {
		t.Fatal(err)
	}
	f, err := openTxnFile(txnsPath)
	if err != nil {
		t.Fatal(err)
	}
	o, x := &outputsSink{RunOutputs: outs}, txnsSink{f}
	if o.Takes() != watch.TakesStatements|watch.TakesTransactions || x.Takes() != watch.TakesTransactions {
		t.Errorf("takes: outputs %b, --txns %b", o.Takes(), x.Takes())
	}
	o.Statement(&event.Statement{SQL: "SELECT 1", TRespLast: 1})
	x.Transaction(&event.Transaction{Conn: "c", LeadSQL: "UPDATE t"})
	for _, k := range []watch.Sink{o, x} {
		if err := k.Close(&watch.Snapshot{Final: true}); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]string{events: "SELECT 1", txnsPath: "UPDATE t"} {
		if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s after Close: %q, %v", filepath.Base(path), b, err)
		}
	}
}
