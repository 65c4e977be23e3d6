package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
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
