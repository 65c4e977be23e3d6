package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
)

// A short-lived connection: its thread ended before the poll, so the rows
// carry no connection id. The wire knows the connection from the handshake.
func TestJoinEndedThreadLearnedFromWire(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	a := wire(42, "COM_QUERY", "SELECT 1", 1_000_000, 1_000_500)
	b := wire(42, "COM_QUERY", "SELECT 2", 2_000_000, 2_000_400)
	j.AddWire(a, 0)
	j.AddWire(b, 0)
	ra := row(0, "statement/sql/select", "SELECT 1", 1_000_100, 1_000_450)
	rb := row(0, "statement/sql/select", "SELECT 2", 2_000_100, 2_000_350)
	ra.ThreadID, rb.ThreadID = 77, 77
	j.AddServer([]collect.ServerStatement{ra, rb}, 0)
	if !a.Joined || !b.Joined {
		t.Fatalf("rows of an ended thread not joined: a=%v b=%v stats=%+v", a.Joined, b.Joined, j.Stats())
	}
	if st := j.Stats(); st.ThreadsLearned != 1 || st.Background != 0 {
		t.Errorf("stats %+v, want one thread learned and no background row", st)
	}
}

// Two connections whose pending statements both fit: no guess.
func TestJoinEndedThreadAmbiguousIsNotGuessed(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	a := wire(1, "COM_QUERY", "SELECT 1", 1_000_000, 1_000_500)
	b := wire(2, "COM_QUERY", "SELECT 1", 1_000_010, 1_000_520)
	j.AddWire(a, 0)
	j.AddWire(b, 0)
	r := row(0, "statement/sql/select", "SELECT 1", 1_000_100, 1_000_450)
	r.ThreadID = 9
	j.AddServer([]collect.ServerStatement{r}, 0)
	if a.Joined || b.Joined {
		t.Fatal("an ambiguous row was attributed to a connection")
	}
	j.FlushAll()
	if a.Joined || b.Joined {
		t.Fatal("an ambiguous row was attributed to a connection at the end")
	}
	if st := j.Stats(); st.Background != 1 || st.ThreadsLearned != 0 {
		t.Errorf("stats %+v, want the row counted as unattributed (background)", st)
	}
}

// A background thread's row with no wire statement around stays background.
func TestJoinBackgroundRowWithoutWire(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	r := row(0, "statement/sql/insert", "INSERT INTO t VALUES (1)", 5_000_000, 5_000_100)
	r.ThreadID = 3
	j.AddServer([]collect.ServerStatement{r}, 0)
	if st := j.Stats(); st.Background != 0 {
		t.Errorf("counted as background before MaxWait: %+v", st)
	}
	j.Flush(Options{}.withDefaults().MaxWait.Microseconds() + 1)
	if st := j.Stats(); st.Background != 1 || st.ThreadsLearned != 0 {
		t.Errorf("stats %+v", st)
	}
}

// The poll read the ended thread's row before the capture delivered its
// wire statement: the row waits and is attributed when the wire comes.
func TestJoinEndedThreadRowBeforeWire(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	r := row(0, "statement/sql/select", "SELECT 1", 1_000_100, 1_000_450)
	r.ThreadID = 88
	j.AddServer([]collect.ServerStatement{r}, 0)
	s := wire(43, "COM_QUERY", "SELECT 1", 1_000_000, 1_000_500)
	j.AddWire(s, 10)
	if !s.Joined || j.Stats().ThreadsLearned != 1 || j.Stats().Background != 0 {
		t.Fatalf("joined %v, stats %+v", s.Joined, j.Stats())
	}
}
