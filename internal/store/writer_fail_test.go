package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// After a failed commit a writer queues nothing more: a run that goes on
// for hours after its disk filled must not hold every later row in memory.
func TestWriterRefusesRowsAfterAFailedCommit(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := s.StartRun(ctx, "watch", "", time.Now().UnixMicro())
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWriter(run, WriterOptions{BatchRows: 10, FlushEvery: time.Hour})
	st := statement(1)
	if err := w.Add(&st); err != nil {
		t.Fatal(err)
	}
	s.db.Close() // every later commit fails, as on a full disk
	if err := w.Flush(); err == nil {
		t.Fatal("a commit on a closed database succeeded")
	}
	for range 100 {
		if err := w.Add(&st); err == nil {
			t.Fatal("a failed writer accepted a row")
		}
	}
	w.mu.Lock()
	pending := w.pending()
	w.mu.Unlock()
	if pending > 1 || w.Dropped() != 100 {
		t.Errorf("after the failure: %d rows pending, %d dropped; want at most the failed batch, 100", pending, w.Dropped())
	}
	_ = w.Close()
}
