package eventlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRotation writes 1,000 lines of 100 bytes in 4 KB chunks (as a
// bufio.Writer hands them) to a 10 KB log keeping 2 rotated files: three
// files remain, each within its limit plus one chunk and made of whole
// lines, and together the newest lines in order.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	l, err := Create(path, Options{MaxSize: 10_000, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&all, "%-98d|\n", i)
	}
	for data := all.Bytes(); len(data) > 0; {
		n := min(4096, len(data))
		if _, err := l.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	want := []string{path, RotatedName(path, 1), RotatedName(path, 2)}
	if strings.Join(names, " ") != strings.Join([]string{want[1], want[2], want[0]}, " ") { // Glob sorts
		t.Fatalf("files %q, want %q", names, want)
	}
	var kept []byte
	for i := len(want) - 1; i >= 0; i-- {
		data, err := os.ReadFile(want[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 10_000+4096 || (len(data) > 0 && data[len(data)-1] != '\n') {
			t.Errorf("%s: %d bytes, last %q: want whole lines within 10,000 + a chunk", want[i], len(data), data[len(data)-1:])
		}
		kept = append(kept, data...)
	}
	if !bytes.HasSuffix(all.Bytes(), kept) || len(kept) < 20_000 {
		t.Errorf("the files hold %d bytes that are not the newest lines in order", len(kept))
	}
}

// TestReopen: after an outside rotator renamed the file, Reopen starts a
// new one under the name and later lines go there.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	l, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write([]byte("before\n"))
	if err := os.Rename(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("still old\n")) // the open file moved with its name
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("after\n"))
	old, _ := os.ReadFile(path + ".old")
	cur, _ := os.ReadFile(path)
	if string(old) != "before\nstill old\n" || string(cur) != "after\n" {
		t.Errorf("moved file %q, new file %q", old, cur)
	}
}

func TestRotatedName(t *testing.T) {
	for path, want := range map[string]string{"a/events.jsonl": "a/events.3.jsonl", "a/events": "a/events.3", "x.d/ev": "x.d/ev.3"} {
		if got := RotatedName(path, 3); got != want {
			t.Errorf("RotatedName(%q, 3) = %q, want %q", path, got, want)
		}
	}
}

func TestWriteAfterClose(t *testing.T) {
	l, err := Create(filepath.Join(t.TempDir(), "e.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Write([]byte("x\n")); err == nil {
		t.Error("write after close succeeded")
	}
	if _, err := Create(filepath.Join(t.TempDir(), "missing", "e.jsonl"), Options{}); err == nil || !strings.Contains(err.Error(), "creating event log") {
		t.Errorf("create in a missing directory: %v", err)
	}
}
