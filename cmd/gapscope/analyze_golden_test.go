package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the analyze golden files of testdata/captures")

// TestAnalyzeGolden runs `analyze --format json` and the text profile on
// every fixture capture (found by glob, so none goes unused) and compares
// them with the golden outputs beside the capture. Regenerate with
// go test ./cmd/gapscope -run AnalyzeGolden -update, and read the diff.
func TestAnalyzeGolden(t *testing.T) {
	captures, _ := filepath.Glob("../../testdata/captures/*.pcap*.gz")
	if len(captures) == 0 {
		t.Fatal("no fixture captures under testdata/captures")
	}
	for _, c := range captures {
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(c), ".gz"), ".pcapng"), ".pcap")
		t.Run(name, func(t *testing.T) {
			port := fixturePort(t, filepath.Join(filepath.Dir(c), name+".expect.json"))
			for _, format := range []string{"json", "text"} {
				out, err := runAnalyzeCmd(t, "--format", format, "--port", fmt.Sprint(port), "--top", "0", c)
				if err != nil {
					t.Fatalf("analyze %s: %v", c, err)
				}
				compareGolden(t, filepath.Join(filepath.Dir(c), name+".analyze."+format), out)
			}
		})
	}
}

func fixturePort(t *testing.T, expect string) int {
	t.Helper()
	b, err := os.ReadFile(expect)
	if err != nil {
		t.Fatalf("fixture without its expect sidecar: %v", err)
	}
	var e struct {
		ServerPort int `json:"server_port"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.ServerPort == 0 {
		t.Fatalf("%s: no server_port (%v)", expect, err)
	}
	return e.ServerPort
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file missing (run with -update): %v", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("%s differs from the golden output; got:\n%s", path, got)
	}
}
