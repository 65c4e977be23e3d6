package report

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// TestRunOutputsWrites: a run with neither an events file nor a store
// writes nothing (watch then hands it no statements); either one makes it
// write.
func TestRunOutputsWrites(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		opts RunOutputOptions
		want bool
	}{
		{"none", RunOutputOptions{}, false},
		{"events", RunOutputOptions{Events: filepath.Join(dir, "e.jsonl")}, true},
		{"store", RunOutputOptions{Command: "watch", Store: filepath.Join(dir, "s.db")}, true},
	} {
		o, err := OpenRunOutputs(context.Background(), io.Discard, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := o.Writes(); got != c.want {
			t.Errorf("%s: Writes() = %v, want %v", c.name, got, c.want)
		}
		if err := o.Close(nil); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
	}
}
