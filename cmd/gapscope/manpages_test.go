package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A page per visible command, dated by SOURCE_DATE_EPOCH, the indented and
// column-aligned lines of a command's help kept as lines.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if out, err := runCmd(t, "man-pages", dir); err != nil {
		t.Fatalf("man-pages: %v\n%s", err, out)
	}
	for _, name := range []string{"gapscope.1", "gapscope-watch.1", "gapscope-digest.1", "gapscope-lab-threadpool.1"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("no page %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gapscope-man-pages.1")); err == nil {
		t.Error("the hidden man-pages command has a page")
	}
	b, err := os.ReadFile(filepath.Join(dir, "gapscope-watch.1"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{`.TH "GAPSCOPE-WATCH" "1" "Nov 2023"`, `\fB--web-config\fP`, `\fB--defaults-file\fP`,
		".EX\n  request   the request's own transfer\n  queue "} {
		if !strings.Contains(page, want) {
			t.Errorf("gapscope-watch.1 lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("gapscope-watch.1:\n%s", tailString(page, 3000))
	}
	if out, err := runCmd(t, "man-pages"); err == nil {
		t.Errorf("man-pages without a folder: no error\n%s", out)
	}
}

func TestFenceIndented(t *testing.T) {
	in := "Intro line\n  a   one\n  b   two\nAfter."
	want := "Intro line\n\n```\n  a   one\n  b   two\n```\n\nAfter."
	if got := fenceIndented(in); got != want {
		t.Errorf("fenceIndented:\n%q\nwant\n%q", got, want)
	}
	if got := fenceIndented("plain text"); got != "plain text" {
		t.Errorf("plain text became %q", got)
	}
}
