package join

import (
	"fmt"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
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
	if a.Joined || b.Joined {
		t.Fatal("rows of an ended thread attributed before the capture's lag was waited out")
	}
	j.Flush(anonGraceUS)
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

// A row of an ended thread with no wire statement around is counted as
// unidentified, not reported: it may be a connection's the capture did
// carry, whose statements were given up or sampled out.
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
	if st := j.Stats(); st.Background != 1 || st.NotOnWire != 0 || st.ThreadsLearned != 0 || len(rec.out) != 0 {
		t.Errorf("stats %+v, %d emitted", st, len(rec.out))
	}
}

// A unix-socket client's row (its thread named the socket when read) is
// a statement of its own at once, with its server time and reason.
func TestJoinSocketRowReported(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	r := row(7, "statement/sql/select", "SELECT SLEEP(0.15)", 1_000, 151_000)
	r.Socket = true
	j.AddServer([]collect.ServerStatement{r}, readAfter)
	if st := j.Stats(); st.NotOnWire != 1 || len(rec.out) != 1 || j.Pending() != 0 {
		t.Fatalf("stats %+v, %d emitted, %d pending", st, len(rec.out), j.Pending())
	}
	if s := rec.out[0]; s.Why != event.UnixSocket || s.ServerUS != 150_000 || s.ConnID != 7 || s.Joined {
		t.Errorf("the socket statement %+v", s)
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
	j.Flush(anonGraceUS)
	if !s.Joined || j.Stats().ThreadsLearned != 1 || j.Stats().Background != 0 {
		t.Fatalf("joined %v, stats %+v", s.Joined, j.Stats())
	}
}

// busyConn returns n back-to-back point selects of connection conn, the
// first request at start, and the server rows of its thread (started 10 µs
// after the request, ended 5 µs before the answer). Service times and gaps
// vary as they do on a real connection, so that the connections' windows
// do not line up. anon leaves the rows without a connection id, as when
// the thread ended before the poll.
func busyConn(conn uint64, start int64, n int, anon bool) ([]*event.Statement, []collect.ServerStatement) {
	var ws []*event.Statement
	var rs []collect.ServerStatement
	t := start
	for i := range int64(n) {
		service := 40 + (i*53+int64(conn)*7)%50
		ws = append(ws, wire(conn, "COM_QUERY", "SELECT ?", t, t+service))
		r := row(conn, "statement/sql/select", "SELECT 1", t+10, t+service-5)
		if anon {
			r.ConnID = 0
		}
		rs = append(rs, r)
		t += service + 20 + (i*37+int64(conn)*11)%60
	}
	return ws, rs
}

// Four busy connections, two of which a pool closed before the poll: each
// of their rows, alone, fits two or more connections; all of a thread's
// rows fit only their own.
func TestJoinEndedBusyThreadsAttributedByAllTheirRows(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 20}, rec.emit)
	var wires []*event.Statement
	var rows []collect.ServerStatement
	for k := range uint64(4) {
		ws, rs := busyConn(k+1, 1_000_000+int64(k)*25, 200, k >= 2)
		wires, rows = append(wires, ws...), append(rows, rs...)
	}
	for _, w := range wires {
		j.AddWire(w, 0)
	}
	// One row of an ended thread does not single out its connection.
	one := []anonRow{{r: rows[2*200+7]}}
	if id := j.connOfRows(one).id; id != 0 {
		t.Fatalf("a single row was attributed to connection %d: the test's connections are not busy enough", id)
	}
	j.AddServer(rows, 0)
	j.Flush(anonGraceUS)
	j.FlushAll()
	for _, w := range wires {
		if !w.Joined {
			t.Fatalf("connection %d's statement at %d not joined; stats %+v", w.ConnID, w.TReqFirst, j.Stats())
		}
		if want := w.TRespLast - w.TReqFirst - 15; w.ServerUS != want {
			t.Fatalf("connection %d's statement at %d joined another's row: server %d µs, want %d", w.ConnID, w.TReqFirst, w.ServerUS, want)
		}
	}
	if st := j.Stats(); st.ThreadsLearned != 2 || st.Background != 0 {
		t.Errorf("stats %+v, want two threads learned, no background row", st)
	}
}

// The poll read an ended thread's rows before the capture delivered its
// connection's statements (a loaded host): another busy connection fits
// some of them, not all, and must not take the thread.
func TestJoinEndedThreadWaitsForItsOwnConnection(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 20}, rec.emit)
	other, _ := busyConn(1, 1_000_000, 200, false)
	late, rows := busyConn(2, 1_000_050, 100, true)
	for _, w := range other {
		j.AddWire(w, 0)
	}
	j.AddServer(rows, 0)
	j.Flush(anonGraceUS)
	if st := j.Stats(); st.ThreadsLearned != 0 {
		t.Fatalf("the thread was attributed before its connection's statements came: %+v", st)
	}
	for _, w := range late {
		j.AddWire(w, anonGraceUS)
	}
	j.Flush(2 * anonGraceUS)
	for _, w := range late {
		if want := w.TRespLast - w.TReqFirst - 15; !w.Joined || w.ServerUS != want {
			t.Fatalf("statement at %d: joined %v, server %d µs, want %d; stats %+v", w.TReqFirst, w.Joined, w.ServerUS, want, j.Stats())
		}
	}
	if st := j.Stats(); st.ThreadsLearned != 1 || st.Background != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A short-lived connection (query, quit) whose thread ended before the
// poll: the server started its COM_QUIT 2 ms after the quit reached it (a
// thread waiting for a CPU). The quit's row is no evidence against the
// connection; its query's row fits.
func TestJoinEndedThreadLateQuit(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 20}, rec.emit)
	q := wire(5, "COM_QUERY", "SELECT ?", 1_000_000, 1_000_090)
	quit := wire(5, "COM_QUIT", "", 1_000_150, 0)
	j.AddWire(q, 0)
	j.AddWire(quit, 0)
	rq := row(0, "statement/sql/select", "SELECT 'x'", 1_000_050, 1_000_120)
	rquit := row(0, "statement/com/Quit", "", 1_002_150, 1_002_155)
	rq.ThreadID, rquit.ThreadID = 15, 15
	j.AddServer([]collect.ServerStatement{rq, rquit}, 0)
	j.Flush(anonGraceUS)
	if !q.Joined || j.Stats().ThreadsLearned != 1 || j.Stats().Background != 0 {
		t.Fatalf("query joined %v; stats %+v", q.Joined, j.Stats())
	}
}

// An outlier's row read from its own thread arrives before history_long
// brings the rows of the statements its connection ran just before it:
// those statements wait for their rows instead of being given up.
func TestJoinTargetedRowLeavesEarlierStatementsWaiting(t *testing.T) {
	// A targeted read's row from history_long is out of the cursor's order
	// too: only the Targeted mark tells it from the periodic read's.
	for _, source := range []string{collect.SourceHistory, collect.SourceCurrent, collect.SourceHistoryLong, collect.SourceRunning} {
		rec := newRecorder(t)
		j := New(Options{CalibrationErrorUS: 20}, rec.emit)
		a := wire(5, "COM_QUERY", "SELECT ?", 1_000_000, 1_000_100)
		b := wire(5, "COM_QUERY", "SELECT ?", 1_000_200, 1_000_300)
		slow := wire(5, "COM_QUERY", "SELECT SLEEP(?)", 1_000_400, 1_030_400)
		for _, w := range []*event.Statement{a, b, slow} {
			j.AddWire(w, 0)
		}
		targeted := row(5, "statement/sql/select", "SELECT SLEEP(0.03)", 1_000_420, 1_030_390)
		targeted.Source, targeted.Targeted = source, true
		j.AddServer([]collect.ServerStatement{targeted}, 0)
		if !slow.Joined || a.Joined || b.Joined || rec.seen[a] || rec.seen[b] {
			t.Fatalf("%s: slow joined %v; a emitted %v, b emitted %v: the earlier statements must wait", source, slow.Joined, rec.seen[a], rec.seen[b])
		}
		j.AddServer([]collect.ServerStatement{
			row(5, "statement/sql/select", "SELECT 1", 1_000_020, 1_000_090),
			row(5, "statement/sql/select", "SELECT 2", 1_000_220, 1_000_290),
		}, 0)
		if !a.Joined || !b.Joined {
			t.Fatalf("%s: a joined %v, b joined %v; stats %+v", source, a.Joined, b.Joined, j.Stats())
		}
	}
}

// Short connections three at a time: each thread has ended by the time
// its rows are read, and its three point selects fit any of the three
// connections open then. The THREAD_ID − PROCESSLIST_ID offset the
// earlier threads showed picks the one whose statements fit; without a
// trusted offset, nothing is guessed.
func TestJoinEndedThreadsByIDOffset(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		rec := newRecorder(t)
		j := New(Options{CalibrationErrorUS: 50}, rec.emit)
		if trusted {
			teachOffset(j)
		}
		wires := interleavedEnded(j, 10, nil) // the offset the earlier threads showed
		j.FlushAll()
		joined := 0
		for _, w := range wires {
			if w.Joined {
				joined++
			}
		}
		if trusted && joined != len(wires) {
			t.Errorf("with a trusted offset %d of %d joined: %+v", joined, len(wires), j.Stats())
		}
		if !trusted && joined != 0 {
			t.Errorf("without an offset %d were guessed", joined)
		}
	}
}

// Under a join sample only some connections hand their statements in: an
// ended thread of a connection left out fits the one that is in, alone.
// Whole, the joiner gives it that connection (a wrong row); partial, it
// attributes a thread only where the id offset names the connection, and
// the connection's own ended thread is joined.
func TestJoinPartialEndedThreadNeedsTheOffset(t *testing.T) {
	for _, partial := range []bool{false, true} {
		rec := newRecorder(t)
		j := New(Options{CalibrationErrorUS: 50}, rec.emit)
		j.SetPartial(partial)
		teachOffset(j)
		// Connection 10 is in the sample, 11 left out: its statement never
		// reaches the joiner, and its ended thread's row fits 10's.
		in := answered(10, "SELECT ?", 100_000, 100_080, 100_080)
		j.AddWire(in, 0)
		outRow := row(0, "statement/sql/select", "SELECT 1", 100_010, 100_070) // 60 µs
		outRow.ThreadID = 111
		rows := []collect.ServerStatement{outRow}
		if partial {
			inRow := row(0, "statement/sql/select", "SELECT 1", 100_012, 100_068) // 56 µs
			inRow.ThreadID = 110
			rows = append(rows, inRow)
		}
		j.AddServer(rows, readAfter)
		j.Flush(readAfter + anonGraceUS)
		j.FlushAll()
		switch {
		case !partial && (!in.Joined || in.ServerUS != 60):
			t.Errorf("whole: the left-out connection's thread was not given the connection in (joined %v, server %d µs): the test shows nothing", in.Joined, in.ServerUS)
		case partial && (!in.Joined || in.ServerUS != 56):
			t.Errorf("partial: connection 10 joined %v with %d µs, want its own thread's 56 µs: %+v", in.Joined, in.ServerUS, j.Stats())
		}
	}
}

// interleavedEnded runs connections first, first+1 and first+2 interleaved,
// three point selects each 100 µs apart, whose threads (THREAD_ID: the
// connection's id + 100) ended before their rows were read; it hands the
// joiner both sides and flushes once the rows' grace is over. text gives
// statement k's text on connection c (nil: no text to tell them by).
func interleavedEnded(j *Joiner, first int64, text func(c, k int64) string) []*event.Statement {
	return interleavedEndedThreads(j, first, text, func(c int64) uint64 { return uint64(c) + 100 })
}

// interleavedEndedThreads is interleavedEnded with connection c served by
// thread(c).
func interleavedEndedThreads(j *Joiner, first int64, text func(c, k int64) string, thread func(c int64) uint64) []*event.Statement {
	var wires []*event.Statement
	var rows []collect.ServerStatement
	for k := range int64(3) {
		for c := first; c < first+3; c++ {
			start := 100_000 + k*300 + (c-first)*100
			sent := "SELECT 1"
			if text != nil {
				sent = text(c, k)
			}
			w := answered(uint64(c), "SELECT ?", start, start+80, start+80)
			if text != nil {
				w.TextHash = sqltext.TextHashString(sent)
			}
			wires = append(wires, w)
			j.AddWire(w, 0)
			r := row(0, "statement/sql/select", sent, start+10, start+70)
			r.ThreadID = thread(c)
			rows = append(rows, r)
		}
	}
	j.AddServer(rows, readAfter)
	j.Flush(readAfter + anonGraceUS)
	return wires
}

// teachOffset shows j idOffsetAgree live threads whose THREAD_ID is their
// connection's id + 100: the offset it then trusts.
func teachOffset(j *Joiner) {
	var seen []collect.ServerStatement
	for id := uint64(1); id <= idOffsetAgree; id++ {
		r := row(id, "statement/sql/select", "SELECT 0", int64(id)*1000, int64(id)*1000+50)
		r.ThreadID = id + 100
		seen = append(seen, r)
	}
	j.AddServer(seen, 0)
}

// The id offset is kept per range of threads: the server starting a
// thread of its own moves it by one for the threads after, and a busy
// capture attributes ended threads a second later, when the newest
// threads carry the new offset. Each thread is judged by its own range;
// between two ranges the hint names both candidates; past the newest, the
// newest offset once it was seen idOffsetAgree times.
func TestIDOffsetByRangeOfThreads(t *testing.T) {
	var o idOffset
	for _, p := range [][2]uint64{{110, 103}, {120, 112}, {111, 104}, {121, 113}, {112, 105}, {122, 114}, {400, 392}} {
		o.observe(p[0], p[1])
	}
	for _, c := range []struct {
		thread uint64
		want   idHint
	}{
		{111, idHint{id: 104, trusted: true}}, // inside the old range
		{115, idHint{id: 108, alt: 107}},      // between the ranges: either
		{300, idHint{id: 292, trusted: true}}, // inside the new range
		{405, idHint{id: 397, trusted: true}}, // past the newest: 4 observations
		{100, idHint{}},                       // before any observation
	} {
		if got := o.hint(c.thread); got != c.want {
			t.Errorf("thread %d: hint %+v, want %+v", c.thread, got, c.want)
		}
	}
	var p idOffset // long-lived connections read again and again
	for _, pr := range [][2]uint64{{78, 71}, {131, 124}, {17, 10}, {76, 69}} {
		p.observe(pr[0], pr[1])
	}
	if h := p.hint(140); !h.trusted || h.id != 133 {
		t.Fatalf("older threads that agree: hint %+v, want 133 trusted", h)
	}
	var q idOffset // two connections opened at once took their THREAD_IDs in the other order
	for _, pr := range [][2]uint64{{10, 3}, {20, 13}, {16, 10}, {30, 23}} {
		q.observe(pr[0], pr[1])
	}
	if h := q.hint(40); !h.trusted || h.id != 33 {
		t.Fatalf("a swapped pair inside a range: hint %+v, want 33 trusted", h)
	}
	var r idOffset
	for i := range uint64(3 * maxOffsetSegs) {
		r.observe(1000+2*i, 1000+i) // every observation a new offset
	}
	if len(r.segs) > maxOffsetSegs {
		t.Fatalf("%d ranges kept, bound %d", len(r.segs), maxOffsetSegs)
	}
}

// Connections 5, 6 and 7 ran interleaved, and their threads ended before
// their rows were read; by the time they are attributed the server has
// started a thread of its own and the newest threads show an offset one
// higher. The offset of their own range names each thread's connection;
// the newest offset would give each thread its neighbour's.
func TestJoinEndedThreadsJudgedByTheirRange(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 50}, rec.emit)
	var seen []collect.ServerStatement
	observe := func(conn, thread uint64) {
		r := row(conn, "statement/sql/select", "SELECT 0", int64(conn)*1000, int64(conn)*1000+50)
		r.ThreadID = thread
		seen = append(seen, r)
	}
	for c := uint64(1); c <= 4; c++ {
		observe(c, c+100)
	}
	observe(8, 108)
	for c := uint64(9); c <= 12; c++ {
		observe(c, c+101) // the server took THREAD_ID 109
	}
	j.AddServer(seen, 0)
	wires := interleavedEnded(j, 5, nil)
	j.FlushAll()
	for _, w := range wires {
		if !w.Joined {
			t.Errorf("connection %s: not joined (%s): %+v", w.Conn, w.Why, j.Stats())
		}
	}
}

// Three connections opened at once took their THREAD_IDs in another
// order than their ids, and all ended before their rows were read: the
// first thread's one row fits all three connections, the others' two rows
// fit one each. Once those took their connections, the first thread fits
// the one left, and every statement joins.
func TestJoinEndedThreadGetsTheConnectionLeft(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 50}, rec.emit)
	var wires []*event.Statement
	wire := func(conn uint64, at int64) {
		w := answered(conn, "SELECT ?", at, at+100, at+100)
		wires = append(wires, w)
		j.AddWire(w, 0)
	}
	wire(8, 100_000)
	wire(10, 100_000)
	wire(10, 102_000)
	wire(11, 100_000)
	wire(11, 103_000)
	var rows []collect.ServerStatement
	add := func(thread uint64, at int64) {
		r := row(0, "statement/sql/select", "SELECT 1", at+10, at+90)
		r.ThreadID = thread
		rows = append(rows, r)
	}
	add(119, 100_000) // fits 8, 10 and 11
	add(120, 100_000)
	add(120, 102_000) // 10 only
	add(121, 100_000)
	add(121, 103_000) // 11 only
	j.AddServer(rows, readAfter)
	j.Flush(readAfter + anonGraceUS)
	for _, w := range wires {
		if !w.Joined {
			t.Errorf("connection %s at %d: not joined (%s): %+v", w.Conn, w.TReqFirst, w.Why, j.Stats())
		}
	}
}

// Connections 10, 11 and 12 run the same point select interleaved, and
// their threads end before their rows are read, with no id offset to go
// by: by time each thread's rows fit all three connections, but each
// connection sent its own literals, and the rows' texts hold them.
func TestJoinEndedThreadsByTheirText(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 50}, rec.emit)
	wires := interleavedEnded(j, 10, func(c, k int64) string { return fmt.Sprintf("SELECT v FROM t WHERE id = %d", c*10+k) })
	for _, w := range wires {
		if !w.Joined {
			t.Errorf("connection %s at %d: not joined (%s): %+v", w.Conn, w.TReqFirst, w.Why, j.Stats())
		}
	}
}

// Under a join sample the trusted id offset names an ended thread's
// connection. Connections opened at once can take their THREAD_IDs in
// another order than their ids (seen in the field lab's churn: threads 36
// and 37 served connections 27 and 26). When the threads' rows, by their
// literals, fit exactly the connections the offset names for them, one
// each in another order, every statement joins; a thread whose rows fit
// one connection the offset gives to no thread here is still not guessed.
func TestJoinPartialSwappedThreadsByTheirText(t *testing.T) {
	text := func(c, k int64) string { return fmt.Sprintf("SELECT v FROM t WHERE id = %d", c*10+k) }
	for _, tc := range []struct {
		name   string
		thread map[int64]uint64 // connection -> its thread (the offset says connection + 100)
		joined int
	}{
		{"in order", map[int64]uint64{10: 110, 11: 111, 12: 112}, 9},
		{"two swapped", map[int64]uint64{10: 111, 11: 110, 12: 112}, 9},
		{"three in a ring", map[int64]uint64{10: 111, 11: 112, 12: 110}, 9},
		// 12's thread is 113 (no offset names 12 for it): 10 and 11 swap,
		// 12's rows stay unattributed.
		{"one outside", map[int64]uint64{10: 111, 11: 110, 12: 113}, 6},
	} {
		rec := newRecorder(t)
		j := New(Options{CalibrationErrorUS: 50}, rec.emit)
		j.SetPartial(true)
		teachOffset(j)
		wires := interleavedEndedThreads(j, 10, text, func(c int64) uint64 { return tc.thread[c] })
		j.FlushAll()
		joined := 0
		for _, w := range wires {
			if w.Joined { // the rows' literals are the connection's own: a joined row is its thread's
				joined++
			}
		}
		if joined != tc.joined {
			t.Errorf("%s: %d of %d joined, want %d: %+v", tc.name, joined, len(wires), tc.joined, j.Stats())
		}
	}
}
