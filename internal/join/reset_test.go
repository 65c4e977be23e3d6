package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
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
	j.Flush(anonGraceUS) // an ended thread's rows wait out the capture's lag
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
	j.Flush(anonGraceUS)
	if !b.Joined || b.ConnID != 5 {
		t.Errorf("after Reset the row should join connection 5's statement: joined %v conn %d", b.Joined, b.ConnID)
	}
}

// After a restart the statements run since the server came back wait for
// their rows (the new server's history holds them); those from before the
// restart are given up, even on a connection id the new server reuses.
func TestResetSinceKeepsStatementsAfterTheRestart(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	old := wire(5, "COM_QUERY", "SELECT 1", 1_000_000, 1_000_500)
	orphanOld := wire(0, "COM_QUERY", "SELECT 2", 1_100_000, 1_100_400)
	orphanOld.Conn = "127.0.0.1:40000>127.0.0.1:3306"
	after := wire(5, "COM_QUERY", "SELECT 3", 9_000_000, 9_000_500)
	afterOrphan := wire(0, "COM_QUERY", "SELECT 4", 9_100_000, 9_100_400)
	afterOrphan.Conn = "127.0.0.1:40001>127.0.0.1:3306"
	for _, s := range []*event.Statement{old, orphanOld, after, afterOrphan} {
		j.AddWire(s, 0)
	}
	j.ResetSince(5_000_000, 10)
	if !rec.seen[old] || old.Joined || !rec.seen[orphanOld] {
		t.Fatalf("statements from before the restart must be emitted unjoined: old %v orphan %v", rec.seen[old], rec.seen[orphanOld])
	}
	if rec.seen[after] || rec.seen[afterOrphan] || j.Pending() != 2 {
		t.Fatalf("statements since the restart must wait for their rows: pending %d", j.Pending())
	}
	r := row(5, "statement/sql/select", "SELECT 3", 9_000_100, 9_000_450)
	j.AddServer([]collect.ServerStatement{r}, 20)
	j.MapConn("127.0.0.1:40001", 6)
	r2 := row(6, "statement/sql/select", "SELECT 4", 9_100_100, 9_100_350)
	j.AddServer([]collect.ServerStatement{r2}, 20)
	if !after.Joined || !afterOrphan.Joined {
		t.Errorf("kept statements should join the restarted server's rows: %v %v", after.Joined, afterOrphan.Joined)
	}
	j.FlushAll()
	if st := j.Stats(); st.Wire != 4 || st.UnjoinedWire != 2 || st.Joined != 2 {
		t.Errorf("stats %+v", st)
	}
}
