package join

import (
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// Every wire statement given up unjoined says why (its reason, whose
// sentence is written from it), and every server row
// no statement took is counted by reason; the reasons add up.
func TestUnjoinedSayWhy(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{MaxWait: time.Second}, rec.emit)
	// A connection whose id is never learnt.
	orphan := &event.Statement{Conn: "10.0.0.9:5555>10.0.0.2:3306", Cmd: "COM_QUERY", SQL: "SELECT ?",
		TReqFirst: 100, TReqLast: 100, TRespFirst: 200, TRespLast: 200}
	j.AddWire(orphan, 0)
	// Connection 1: its first statement's row never comes, the second's does.
	lost := wire(1, "COM_QUERY", "SELECT ?", 1000, 1100)
	kept := wire(1, "COM_QUERY", "SELECT ?", 9000, 9100)
	j.AddWire(lost, 0)
	j.AddWire(kept, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 2", 9010, 9090)}, 0)
	// Connection 2: a statement no row comes for within MaxWait.
	late := wire(2, "COM_QUERY", "SELECT ?", 5000, 5100)
	j.AddWire(late, 0)
	// Connection 3: a row no wire statement takes.
	j.AddServer([]collect.ServerStatement{row(3, "statement/sql/select", "SELECT 3", 100, 200)}, 0)
	j.Flush(2 * time.Second.Microseconds())
	// Connection 4: pending when the run ends.
	end := wire(4, "COM_QUERY", "SELECT ?", 50_000, 50_100)
	j.AddWire(end, 3*time.Second.Microseconds())
	j.FlushAll()

	for s, want := range map[*event.Statement]event.Reason{orphan: event.NoConn, lost: event.NoRow, late: event.Expired, end: event.RunEnd} {
		if s.Joined || s.Why != want || !slices.Contains(slices.Collect(s.AllNotes()), want.Text()) {
			t.Errorf("%s %s: joined %v, reason %v, notes %v; want %v", s.Conn, s.SQL, s.Joined, s.Why, slices.Collect(s.AllNotes()), want)
		}
		if len(s.Notes) != 0 {
			t.Errorf("%s %s: the join stored notes %q: a reason's sentence is written from the reason", s.Conn, s.SQL, s.Notes)
		}
	}
	if !kept.Joined || kept.JoinSource != collect.SourceHistoryLong {
		t.Errorf("the statement with a row: joined %v, source %q", kept.Joined, kept.JoinSource)
	}
	st := j.Stats()
	var byReason int64
	for _, n := range st.UnmatchedByReason {
		byReason += n
	}
	if st.UnmatchedServer != 1 || byReason != st.UnmatchedServer || st.UnmatchedByReason[event.RowExpired.String()] != 1 {
		t.Errorf("unmatched %d, by reason %v", st.UnmatchedServer, st.UnmatchedByReason)
	}
	if st.Server != st.Joined+st.Merged+st.Nested+st.Background+st.UnmatchedServer {
		t.Errorf("server rows do not add up: %+v", st)
	}
	if st.Wire != st.Joined+st.UnjoinedWire || int64(len(rec.out)) != st.Wire {
		t.Errorf("wire statements do not add up: %+v, %d emitted", st, len(rec.out))
	}
}

// A row read from a thread's own history says so on the statement.
func TestJoinSourceFromTheRow(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(7, "COM_QUERY", "SELECT SLEEP(?)", 1_000_000, 1_201_000)
	r := row(7, "statement/sql/select", "SELECT SLEEP(0.2)", 1_000_300, 1_200_500)
	r.Source = collect.SourceHistory
	j.AddServer([]collect.ServerStatement{r}, 0)
	j.AddWire(s, 0)
	if !s.Joined || s.JoinSource != collect.SourceHistory {
		t.Fatalf("joined %v, source %q", s.Joined, s.JoinSource)
	}
	if got := j.ConnOf(s.Conn); got != 0 {
		t.Errorf("ConnOf a connection never mapped = %d", got)
	}
	j.MapConn("10.0.0.1:40007", 7)
	if got := j.ConnOf(s.Conn); got != 7 {
		t.Errorf("ConnOf after MapConn = %d, want 7", got)
	}
}
