package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
)

// After a server restart thread ids start over: a thread learnt before
// Reset must not attribute a new row to the old connection.
func TestResetForgetsThreadsAndPending(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	a := wire(42, "COM_QUERY", "SELECT 1", 1_000_000, 1_000_500)
	pending := wire(42, "COM_QUERY", "SELECT 2", 1_100_000, 1_100_400)
	j.AddWire(a, 0)
	ra := row(0, "statement/sql/select", "SELECT 1", 1_000_100, 1_000_450)
	ra.ThreadID = 77
	j.AddServer([]collect.ServerStatement{ra}, 0)
	j.AddWire(pending, 0)
	if !a.Joined || j.Stats().ThreadsLearned != 1 {
		t.Fatalf("setup: a joined %v, stats %+v", a.Joined, j.Stats())
	}
	j.Reset()
	if !rec.seen[pending] || pending.Joined {
		t.Fatalf("Reset must emit the pending statement unjoined (emitted %v, joined %v)", rec.seen[pending], pending.Joined)
	}
	// Same thread id after the restart, a new connection 5 on the wire.
	b := wire(5, "COM_QUERY", "SELECT 3", 9_000_000, 9_000_500)
	j.AddWire(b, 0)
	rb := row(0, "statement/sql/select", "SELECT 3", 9_000_100, 9_000_450)
	rb.ThreadID = 77
	j.AddServer([]collect.ServerStatement{rb}, 0)
	if !b.Joined || b.ConnID != 5 {
		t.Errorf("after Reset the row should join connection 5's statement: joined %v conn %d", b.Joined, b.ConnID)
	}
}
