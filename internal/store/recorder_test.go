package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// A recorder without a path records nothing and fails nothing; with one,
// it starts a run, keeps findings and ends the run with its notes.
func TestRecorder(t *testing.T) {
	ctx := context.Background()
	off, err := Record(ctx, "", "probe", "db1", WriterOptions{})
	if err != nil || off.On() || off.Writer() != nil || off.AddFindings([]event.Finding{{Code: "X"}}) != nil || off.Close("") != nil {
		t.Fatalf("recorder without a path: %v", err)
	}
	path := filepath.Join(t.TempDir(), "r.db")
	r, err := Record(ctx, path, "probe", "db1", WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddFindings([]event.Finding{{Code: "POOL_QUEUE"}, {Code: "PLAN_FLIP"}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close("2 run(s) discarded"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Command != "probe" || runs[0].DSN != "db1" || runs[0].EndUS == 0 || runs[0].Notes != "2 run(s) discarded" {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	if fs, err := s.Findings(ctx, Query{RunID: runs[0].ID}); err != nil || len(fs) != 2 {
		t.Errorf("findings %+v, %v", fs, err)
	}
}
