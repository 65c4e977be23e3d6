package join

import (
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// answered is a wire statement with a distinct first and last response byte.
func answered(conn uint64, sql string, req, respFirst, respLast int64) *event.Statement {
	s := wire(conn, "COM_QUERY", sql, req, respLast)
	s.TRespFirst = respFirst
	return s
}

// On a busy host the server may record TIMER_END milliseconds after its
// answer left (measured: 7-10 ms under sysbench), beyond PostSendUS. The
// next statement's answer still bounds it, so the row matches.
func TestJoinLongServerTail(t *testing.T) {
	for _, rowsFirst := range []bool{false, true} {
		rec := newRecorder(t)
		j := New(Options{}, rec.emit)
		a := answered(1, "COMMIT", 0, 90, 100)
		b := answered(1, "SELECT 1", 150, 9000, 9010)
		rows := []collect.ServerStatement{
			row(1, "statement/sql/commit", "COMMIT", 10, 8000),
			row(1, "statement/sql/select", "SELECT 1", 8010, 8990),
		}
		j.AddWire(a, 0)
		if rowsFirst { // both rows polled before the capture emitted b
			j.AddServer(rows, 0)
			j.AddWire(b, 0)
		} else {
			j.AddWire(b, 0)
			j.AddServer(rows, 0)
		}
		if !a.Joined || !b.Joined || a.ServerUS != 7990 || b.QueueUS != 7860 {
			t.Fatalf("rowsFirst=%v: a joined=%v server=%d, b joined=%v queue=%d", rowsFirst, a.Joined, a.ServerUS, b.Joined, b.QueueUS)
		}
		if sumParts(a) != a.ClientUS || a.DeliveryUS != 0 {
			t.Fatalf("a: parts %d/%d/%d/%d/%d of %d", a.RequestUS, a.QueueUS, a.ExecUS, a.SendStallUS, a.DeliveryUS, a.ClientUS)
		}
	}
}

// A client closes its prepared statements and quits without waiting (no
// answers), while the server is still finishing the COMMIT before them:
// the server handles them later than the next request went out.
func TestJoinNoResponseCommandsLagging(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	commit := answered(1, "COMMIT", 0, 40, 50)
	var closes []*event.Statement
	j.AddWire(commit, 0)
	for i, at := range []int64{60, 63, 66} {
		s := &event.Statement{Conn: commit.Conn, ConnID: 1, Cmd: "COM_STMT_CLOSE", TReqFirst: at, TReqLast: at}
		closes = append(closes, s)
		j.AddWire(s, 0)
		_ = i
	}
	quit := &event.Statement{Conn: commit.Conn, ConnID: 1, Cmd: "COM_QUIT", TReqFirst: 70, TReqLast: 70}
	j.AddWire(quit, 0)
	j.AddServer([]collect.ServerStatement{
		row(1, "statement/sql/commit", "COMMIT", 5, 3000),
		row(1, "statement/com/Close stmt", "", 3005, 3006),
		row(1, "statement/com/Close stmt", "", 3010, 3011),
		row(1, "statement/com/Close stmt", "", 3015, 3016),
		row(1, "statement/com/Quit", "", 3020, 3021),
	}, 0)
	for _, s := range append([]*event.Statement{commit, quit}, closes...) {
		if !s.Joined {
			t.Fatalf("%s at %d not joined", s.Cmd, s.TReqFirst)
		}
	}
	if st := j.Stats(); st.UnmatchedServer != 0 || st.UnjoinedWire != 0 || j.Pending() != 0 {
		t.Fatalf("stats %+v pending %d", st, j.Pending())
	}
}

// When the claimed calibration looks wrong but a quiet stream gives too
// little evidence to learn the offset, matching waits at most LearnWait,
// not until MaxWait.
func TestJoinHoldIsBounded(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 5, MaxWait: time.Minute, LearnWait: time.Second}, rec.emit)
	var rows []collect.ServerStatement
	for i := range int64(10) {
		t0 := i * 1000
		j.AddWire(wire(1, "COM_QUERY", "SELECT 1", t0, t0+100), t0)
		rows = append(rows, row(1, "statement/sql/select", "SELECT 1", t0+150, t0+160)) // ≥ 50 µs late
	}
	j.AddServer(rows, 10_000)
	if !j.clk.holding {
		t.Fatal("rows that fit only a shifted clock did not make the joiner wait")
	}
	j.Flush(500_000)
	if len(rec.out) != 0 {
		t.Fatalf("emitted %d while learning", len(rec.out))
	}
	j.Flush(1_010_000)
	if len(rec.out) != 10 || j.clk.holding {
		t.Fatalf("after LearnWait: emitted %d of 10, holding=%v", len(rec.out), j.clk.holding)
	}
}

// A client sends its next query a few µs after the answer, within the
// calibration error: that query's first row starts "before" the answer as
// far as the error can tell. It is not a second statement of the UPDATE
// (one statement, no ';'), and when the next query is already on the wire
// it is that query's, multi-statement or not.
func TestJoinNextQueryRightAfterTheAnswer(t *testing.T) {
	for _, rowsFirst := range []bool{false, true} {
		for _, first := range []string{"UPDATE t SET v = v + ? WHERE id = ?", "SELECT ?; UPDATE t SET v = ?"} {
			rec := newRecorder(t)
			j := New(Options{CalibrationErrorUS: 100}, rec.emit)
			a := answered(1, first, 0, 100, 100)
			b := answered(1, "SET @a = ?; DO SLEEP(?)", 105, 50_000, 50_000)
			rows := []collect.ServerStatement{row(1, "statement/sql/update", "UPDATE t SET v = v + 1 WHERE id = 1", 10, 95),
				row(1, "statement/sql/set_option", "SET @a = 1; DO SLEEP(0.05)", 150, 200),
				row(1, "statement/sql/do", "DO SLEEP(0.05)", 210, 49_900)}
			if strings.HasPrefix(first, "SELECT") {
				rows[0] = row(1, "statement/sql/select", "SELECT 1; UPDATE t SET v = 2", 10, 95)
			}
			if rowsFirst {
				j.AddServer(rows, readAfter)
				j.AddWire(a, 0)
				j.AddWire(b, 0)
			} else {
				j.AddWire(a, 0)
				j.AddWire(b, 0)
				j.AddServer(rows, readAfter)
			}
			if rowsFirst && strings.HasPrefix(first, "SELECT") {
				// A multi-statement query with nothing after it on the wire
				// yet: the row may be its second statement (the error allows
				// it). What must hold is that nothing is lost or doubled.
				if st := j.Stats(); st.Joined+st.UnjoinedWire+int64(j.Pending()) < 2 {
					t.Fatalf("%q rowsFirst: stats %+v", first, st)
				}
				continue
			}
			if !a.Joined || !b.Joined || b.ServerUS != (200-150)+(49_900-210) {
				t.Fatalf("%q rowsFirst=%v: a joined=%v, b joined=%v server=%d; stats %+v", first, rowsFirst, a.Joined, b.Joined, b.ServerUS, j.Stats())
			}
		}
	}
}

// A short-lived connection's rows are read after it ended (no connection
// id) and before its wire statements arrive. Another connection, closed
// long before, still has its COM_QUIT pending (no answer bounds it): the
// quit must not claim the thread, whose rows are the later connection's.
func TestJoinOldQuitDoesNotClaimAnEndedThread(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 50}, rec.emit)
	oldQuit := wire(3, "COM_QUIT", "", 1_000, 0)
	j.AddWire(oldQuit, 0)
	anon := func(name, text string, start, end int64) collect.ServerStatement {
		r := row(0, name, text, start, end)
		r.ThreadID = 50
		return r
	}
	j.AddServer([]collect.ServerStatement{
		anon("statement/sql/select", "SELECT 'after restart'", 2_000_100, 2_000_200),
		anon("statement/com/Quit", "", 2_000_300, 2_000_310),
	}, 0)
	q := answered(5, "SELECT ?", 2_000_050, 2_000_190, 2_000_190)
	quit := wire(5, "COM_QUIT", "", 2_000_280, 0)
	j.AddWire(q, 0)
	j.AddWire(quit, 0)
	j.FlushAll()
	if !q.Joined || q.ConnID != 5 {
		t.Fatalf("the later connection's query joined=%v; stats %+v", q.Joined, j.Stats())
	}
	if oldQuit.Joined {
		t.Fatalf("the old connection's COM_QUIT took a row of a thread that started 2 s after it")
	}
}

// TestReleasedConnsKeepLittle: 768 connections of 500 rows each, released
// together (a connection per batch, short-lived), leave the free list
// holding at most maxFree connections of freeKeep items each, not every
// one's grown arrays: a thousand of them kept ~200 MB of rows.
func TestReleasedConnsKeepLittle(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{MaxWait: time.Second}, rec.emit)
	now := int64(1_000_000_000)
	for conn := uint64(1); conn <= 3*maxFree; conn++ {
		rows := make([]collect.ServerStatement, 500)
		for i := range rows {
			start := now + int64(i)*10
			rows[i] = row(conn, "statement/sql/select", "SELECT 1", start, start+5)
			rows[i].EventID = uint64(i + 1)
		}
		j.AddServer(rows, now)
	}
	j.Flush(now + 2*time.Second.Microseconds()) // no wire statement came: the rows are given up, the connections released
	j.FlushAll()
	if j.Pending() != 0 {
		t.Fatalf("%d items still pending", j.Pending())
	}
	kept := 0
	for _, c := range j.free {
		kept += cap(c.rows.items) + cap(c.wires.items)
	}
	t.Logf("%d free connections keep %d items of storage", len(j.free), kept)
	if len(j.free) > maxFree || kept > 2*maxFree*freeKeep {
		t.Errorf("%d free connections keep %d items (bound %d connections, %d items each)", len(j.free), kept, maxFree, 2*freeKeep)
	}
}
