package join

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// recorder collects what a Joiner emits and checks each statement is
// emitted once.
type recorder struct {
	t    testing.TB
	out  []*event.Statement
	seen map[*event.Statement]bool
}

func newRecorder(t testing.TB) *recorder {
	return &recorder{t: t, seen: map[*event.Statement]bool{}}
}

func (r *recorder) emit(s *event.Statement) {
	if r.seen[s] {
		r.t.Fatalf("statement emitted twice: %+v", s)
	}
	r.seen[s] = true
	r.out = append(r.out, s)
}

func wire(conn uint64, cmd, sql string, reqFirst, respLast int64) *event.Statement {
	return &event.Statement{Conn: fmt.Sprintf("10.0.0.1:%d>10.0.0.2:3306", 40000+conn), ConnID: conn,
		Cmd: cmd, SQL: sql, TReqFirst: reqFirst, TReqLast: reqFirst, TRespFirst: respLast, TRespLast: respLast}
}

func row(conn uint64, name, text string, start, end int64) collect.ServerStatement {
	return collect.ServerStatement{ConnID: conn, ThreadID: conn + 100, EventName: name, SQLText: text,
		StartUS: start, EndUS: end, TimerWait: uint64(end-start) * collect.PicosPerMicro}
}

func TestJoinWireFirst(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(7, "COM_QUERY", "SELECT SLEEP(?)", 1_000_000, 1_201_000)
	j.AddWire(s, 0)
	if len(rec.out) != 0 {
		t.Fatal("emitted before its server row arrived")
	}
	r := row(7, "statement/sql/select", "SELECT SLEEP(0.2)", 1_000_300, 1_200_500)
	r.Digest, r.DigestText, r.Schema = "abc", "SELECT SLEEP (?)", "shop"
	j.AddServer([]collect.ServerStatement{r}, 0)
	if len(rec.out) != 1 || !s.Joined {
		t.Fatalf("out = %d, joined = %v", len(rec.out), s.Joined)
	}
	if s.QueueUS != 300 || s.ExecUS != 200_200 || s.DeliveryUS != 500 || s.ServerUS != 200_200 {
		t.Errorf("queue/exec/delivery/server = %d/%d/%d/%d", s.QueueUS, s.ExecUS, s.DeliveryUS, s.ServerUS)
	}
	if s.Digest != "abc" || s.DigestText != "SELECT SLEEP (?)" || s.DB != "shop" {
		t.Errorf("server digest/db not taken: %q %q %q", s.Digest, s.DigestText, s.DB)
	}
	if st := j.Stats(); st.Joined != 1 || st.Wire != 1 || st.Server != 1 || j.Pending() != 0 {
		t.Errorf("stats %+v pending %d", st, j.Pending())
	}
}

func TestJoinServerFirst(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	j.AddServer([]collect.ServerStatement{
		row(3, "statement/com/Execute", "", 110, 150),
		row(3, "statement/com/Ping", "", 310, 320),
	}, 0)
	a := wire(3, "COM_STMT_EXECUTE", "SELECT c FROM t WHERE id=?", 100, 200)
	b := wire(3, "COM_PING", "", 300, 330)
	j.AddWire(a, 0)
	j.AddWire(b, 0)
	if !a.Joined || !b.Joined || a.ExecUS != 40 || b.ExecUS != 10 {
		t.Fatalf("a joined=%v exec=%d, b joined=%v exec=%d", a.Joined, a.ExecUS, b.Joined, b.ExecUS)
	}
}

// Server rows of many connections arrive in one batch, in global time order
// and reversed; wire statements arrive per connection in order.
func TestJoinInterleavedOutOfOrder(t *testing.T) {
	for _, reverse := range []bool{false, true} {
		rec := newRecorder(t)
		j := New(Options{}, rec.emit)
		var rows []collect.ServerStatement
		want := map[*event.Statement]int64{}
		for i := range 50 {
			conn := uint64(i%5 + 1)
			t0 := int64(i) * 1000
			s := wire(conn, "COM_QUERY", "UPDATE t SET c=c+1", t0, t0+900)
			j.AddWire(s, 0)
			rows = append(rows, row(conn, "statement/sql/update", "UPDATE t SET c=c+1", t0+100, t0+100+int64(i)))
			want[s] = int64(i)
		}
		if reverse {
			for a, b := 0, len(rows)-1; a < b; a, b = a+1, b-1 {
				rows[a], rows[b] = rows[b], rows[a]
			}
		}
		j.AddServer(rows, 0)
		if len(rec.out) != 50 {
			t.Fatalf("reverse=%v: emitted %d of 50", reverse, len(rec.out))
		}
		for s, exec := range want {
			if !s.Joined || s.ExecUS != exec {
				t.Fatalf("reverse=%v: joined=%v exec=%d want %d", reverse, s.Joined, s.ExecUS, exec)
			}
		}
	}
}

func TestJoinMultiStatementAbsorbsRows(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(1, "COM_QUERY", "SET @x=1; SELECT 2; DO 3", 0, 1000)
	next := wire(1, "COM_QUERY", "SELECT 4", 2000, 2100)
	j.AddWire(s, 0)
	j.AddWire(next, 0)
	rows := []collect.ServerStatement{
		row(1, "statement/sql/set_option", "SET @x=1; SELECT 2; DO 3", 100, 200),
		row(1, "statement/sql/select", "SELECT 2; DO 3", 210, 400),
		row(1, "statement/sql/do", "DO 3", 410, 700),
		row(1, "statement/sql/select", "SELECT 4", 2010, 2050),
	}
	rows[1].RowsExamined, rows[1].LockTimePS = 7, 3*collect.PicosPerMicro
	rows[2].RowsExamined, rows[2].LockTimePS = 5, 2*collect.PicosPerMicro
	j.AddServer(rows, readAfter)
	if !s.Joined || s.QueueUS != 100 || s.ExecUS != 600 || s.DeliveryUS != 300 || s.ServerUS != 580 {
		t.Fatalf("multi: joined=%v queue=%d exec=%d delivery=%d server=%d", s.Joined, s.QueueUS, s.ExecUS, s.DeliveryUS, s.ServerUS)
	}
	if !next.Joined || next.ExecUS != 40 {
		t.Fatalf("next: joined=%v exec=%d", next.Joined, next.ExecUS)
	}
	if len(s.Statements) != 3 || s.Statements[2].ServerUS != 290 || next.Statements != nil {
		t.Errorf("the request's statements %+v (the next query's %+v)", s.Statements, next.Statements)
	}
	// The server's counters, summed over the request's rows, known; the
	// next query's are known zeros.
	if s.RowsExamined != 12 || s.LockUS != 5 || !s.Knows(event.KnowsLockUS|event.KnowsRowsExamined) {
		t.Errorf("multi: rows_examined %d lock_us %d, want 12 and 5, known", s.RowsExamined, s.LockUS)
	}
	if next.RowsExamined != 0 || !next.Knows(event.KnowsRowsExamined) {
		t.Errorf("next: rows_examined %d, want a known 0", next.RowsExamined)
	}
}

// readAfter is a read of the server's statements that began long after
// the test statements ended: every row they have is in it.
const readAfter = 10_000_000

// A multi-statement query whose later rows come in a later read (the
// first statement ended, and was read, while the second still ran) waits
// for them: joined with the first row alone, its second statement's time
// would read as delivery.
func TestJoinMultiStatementWaitsForItsRows(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT 1; SELECT SLEEP(0.1)", 0, 100_300)
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 1; SELECT SLEEP(0.1)", 100, 150)}, 5_000)
	if s.Joined {
		t.Fatalf("joined on its first row alone, read while the query ran: exec %d delivery %d", s.ExecUS, s.DeliveryUS)
	}
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT SLEEP(0.1)", 160, 100_200)}, 300_000)
	if !s.Joined || s.ExecUS != 100_100 || s.DeliveryUS != 100 || len(s.Statements) != 2 {
		t.Fatalf("joined %v exec %d delivery %d statements %+v", s.Joined, s.ExecUS, s.DeliveryUS, s.Statements)
	}
	if st := j.Stats(); st.Merged != 1 || st.UnmatchedServer != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestJoinSkipsNestedAndBackground(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(1, "COM_QUERY", "CALL p()", 0, 1000)
	j.AddWire(s, 0)
	nested := row(1, "statement/sp/stmt", "SELECT 1", 100, 200)
	nested.NestingType = "STATEMENT"
	bg := row(0, "statement/sql/select", "SELECT 1", 100, 200)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/call_procedure", "CALL p()", 50, 900), nested, bg}, 0)
	if !s.Joined || s.ExecUS != 850 {
		t.Fatalf("joined=%v exec=%d", s.Joined, s.ExecUS)
	}
	j.FlushAll() // a row without a thread waits for a wire statement until then
	if st := j.Stats(); st.Nested != 1 || st.Background != 1 || st.UnmatchedServer != 0 || st.Merged != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestJoinRejectsIncompatible(t *testing.T) {
	cases := []struct {
		name string
		w    *event.Statement
		r    collect.ServerStatement
	}{
		{"command", wire(1, "COM_PING", "", 0, 100), row(1, "statement/sql/select", "SELECT 1", 10, 20)},
		{"text", wire(1, "COM_QUERY", "UPDATE t SET a=?", 0, 100), row(1, "statement/sql/select", "SELECT 1", 10, 20)},
		{"window", wire(1, "COM_QUERY", "SELECT 1", 10_000, 10_100), row(1, "statement/sql/select", "SELECT 1", 10, 20)},
		{"connection", wire(1, "COM_QUERY", "SELECT 1", 0, 100), row(2, "statement/sql/select", "SELECT 1", 10, 20)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := newRecorder(t)
			j := New(Options{MaxWait: time.Second}, rec.emit)
			j.AddWire(c.w, 0)
			j.AddServer([]collect.ServerStatement{c.r}, 0)
			j.Flush(2_000_000)
			if len(rec.out) != 1 || c.w.Joined {
				t.Fatalf("out=%d joined=%v", len(rec.out), c.w.Joined)
			}
			if st := j.Stats(); st.UnjoinedWire != 1 || st.UnmatchedServer != 1 || j.Pending() != 0 {
				t.Fatalf("stats %+v pending %d", st, j.Pending())
			}
		})
	}
}

func TestJoinUnknownCommandMatchesByWindow(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(1, "", "", 0, 100) // TLS: no command, no text
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 1", 10, 20)}, readAfter)
	if !s.Joined {
		t.Fatal("TLS statement not joined by its window")
	}
}

func TestJoinMaxWait(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{MaxWait: 2 * time.Second}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT 1", 0, 100)
	j.AddWire(s, 1_000_000)
	j.AddServer([]collect.ServerStatement{row(9, "statement/sql/select", "SELECT 1", 10, 20)}, 1_500_000)
	j.Flush(2_999_999)
	if len(rec.out) != 0 || j.Pending() != 2 {
		t.Fatalf("expired early: out=%d pending=%d", len(rec.out), j.Pending())
	}
	j.Flush(3_000_000)
	if len(rec.out) != 1 || s.Joined || j.Pending() != 1 {
		t.Fatalf("wire not expired: out=%d pending=%d", len(rec.out), j.Pending())
	}
	j.Flush(3_500_000)
	if st := j.Stats(); st.UnmatchedServer != 1 || st.UnjoinedWire != 1 || st.Expired != 2 || j.Pending() != 0 {
		t.Fatalf("stats %+v pending %d", st, j.Pending())
	}
}

// A wire statement whose row was lost (history wrapped) is given up as soon
// as a later row of its connection shows the server moved on.
func TestJoinSupersededWire(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	lost := wire(1, "COM_QUERY", "SELECT 1", 0, 100)
	next := wire(1, "COM_QUERY", "SELECT 2", 10_000, 10_100)
	j.AddWire(lost, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 2", 10_010, 10_020)}, 0)
	if len(rec.out) != 1 || rec.out[0] != lost || lost.Joined {
		t.Fatalf("lost statement not given up: %d", len(rec.out))
	}
	j.AddWire(next, 0)
	if !next.Joined {
		t.Fatal("next statement not joined with the buffered row")
	}
	// And a row whose statement was not captured is dropped once a later
	// wire statement shows the connection moved on.
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 3", 20_000, 20_010)}, 0)
	j.AddWire(wire(1, "COM_QUERY", "SELECT 4", 30_000, 30_100), 0)
	if st := j.Stats(); st.UnmatchedServer != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// With both candidates pending, a row goes to the wire statement it fits
// best, not to an older one whose window it merely touches.
func TestJoinBestFitOverLostRow(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 5}, rec.emit)
	lost := wire(1, "COM_QUERY", "SELECT 1", 0, 100)
	next := wire(1, "COM_QUERY", "SELECT 2", 150, 400)
	j.AddWire(lost, 0)
	j.AddWire(next, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 2", 160, 390)}, 0)
	if lost.Joined || !next.Joined || next.ExecUS != 230 || len(rec.out) != 2 {
		t.Fatalf("lost joined=%v next joined=%v exec=%d", lost.Joined, next.Joined, next.ExecUS)
	}
}

// A row that starts after its wire statement's answer began is doubtful
// (it may belong to a later statement not seen yet): it waits for a better
// candidate and, when none comes, is matched at expiry with a note.
func TestJoinPoorFitWaitsThenMatches(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 5, MaxWait: time.Second}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT 1", 0, 1000)
	s.TRespFirst = 900
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 1", 1100, 1400)}, 0)
	if len(rec.out) != 0 {
		t.Fatal("doubtful match taken at once")
	}
	j.Flush(1_000_000)
	if !s.Joined || s.QueueUS != 1000 || s.ExecUS != 0 || len(s.Notes) != 2 {
		t.Fatalf("joined=%v queue=%d exec=%d notes=%q", s.Joined, s.QueueUS, s.ExecUS, s.Notes)
	}
	if st := j.Stats(); st.ClampedEnd != 1 || st.ClampedStart != 1 || j.Pending() != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The server's end after the last response byte is normal and no reason
// to doubt a match.
func TestJoinEndAfterResponseIsNormal(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 5}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT 1", 0, 1000)
	s.TRespFirst = 900
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 1", 100, 3000)}, 0)
	if !s.Joined || s.ExecUS != 900 || s.DeliveryUS != 0 || len(s.Notes) != 1 {
		t.Fatalf("joined=%v exec=%d delivery=%d notes=%q", s.Joined, s.ExecUS, s.DeliveryUS, s.Notes)
	}
}

func TestJoinNoResponseCommands(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	cl := &event.Statement{Conn: "a:1>b:2", ConnID: 1, Cmd: "COM_STMT_CLOSE", TReqFirst: 100, TReqLast: 100}
	ping := wire(1, "COM_PING", "", 200, 260)
	quit := &event.Statement{Conn: "a:1>b:2", ConnID: 1, Cmd: "COM_QUIT", TReqFirst: 300, TReqLast: 300}
	j.AddWire(cl, 0)
	j.AddWire(ping, 0)
	j.AddWire(quit, 0)
	j.AddServer([]collect.ServerStatement{
		row(1, "statement/com/Close stmt", "", 130, 134),
		row(1, "statement/com/Ping", "", 210, 228),
		row(1, "statement/com/Quit", "", 320, 321),
	}, 0)
	for _, s := range []*event.Statement{cl, ping, quit} {
		if !s.Joined || sumParts(s) != s.ClientUS {
			t.Fatalf("%s: joined=%v", s.Cmd, s.Joined)
		}
	}
	if ping.ExecUS != 18 || cl.ServerUS != 4 {
		t.Fatalf("ping exec %d, close server %d", ping.ExecUS, cl.ServerUS)
	}
}

func TestJoinMapConn(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{ThreadPoolSize: 4}, rec.emit)
	s := &event.Statement{Conn: "127.0.0.1:51000>127.0.0.1:3306", Cmd: "COM_QUERY", SQL: "SELECT 1",
		TReqFirst: 0, TReqLast: 0, TRespLast: 100}
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(42, "statement/sql/select", "SELECT 1", 10, 20)}, 0)
	if len(rec.out) != 0 {
		t.Fatal("joined without knowing the connection")
	}
	j.MapConn("localhost:51000", 42) // MariaDB's spelling of 127.0.0.1
	if !s.Joined || s.ConnID != 42 || s.PoolGroup == nil || *s.PoolGroup != 2 {
		t.Fatalf("joined=%v conn=%d group=%v", s.Joined, s.ConnID, s.PoolGroup)
	}
	// Later statements on the same address get the id directly.
	s2 := &event.Statement{Conn: "127.0.0.1:51000>127.0.0.1:3306", Cmd: "COM_PING", TReqFirst: 200, TReqLast: 200, TRespLast: 300}
	j.AddWire(s2, 0)
	j.AddServer([]collect.ServerStatement{row(42, "statement/com/Ping", "", 210, 220)}, 0)
	if !s2.Joined || s2.ConnID != 42 {
		t.Fatalf("second statement joined=%v conn=%d", s2.Joined, s2.ConnID)
	}
}

func TestJoinMemoryBound(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{MaxPending: 100, MaxWait: time.Hour}, rec.emit)
	for i := range 100_000 {
		t0 := int64(i) * 10
		j.AddWire(wire(uint64(i%1000+1), "COM_QUERY", "SELECT 1", t0, t0+5), t0)
		j.AddServer([]collect.ServerStatement{row(uint64(i%777+5000), "statement/sql/select", "SELECT 1", t0, t0+1)}, t0)
		if p := j.Pending(); p > 100 {
			t.Fatalf("pending %d > MaxPending", p)
		}
	}
	if j.held.age.len() > 400 || len(j.conns)+len(j.orphans) > 100 {
		t.Fatalf("internal queues not bounded: age=%d conns=%d", j.held.age.len(), len(j.conns))
	}
	j.FlushAll()
	st := j.Stats()
	if len(rec.out) != 100_000 || st.UnjoinedWire != 100_000 || st.UnmatchedServer != 100_000 || st.Evicted < 199_000 {
		t.Fatalf("out=%d stats %+v", len(rec.out), st)
	}
}

// TestJoinRandomStreams simulates many connections with random statement
// durations, lost rows, uncaptured statements and random batch boundaries,
// and checks that every wire statement is emitted once and matched to its
// own row.
func TestJoinRandomStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 20 {
		rec := newRecorder(t)
		j := New(Options{MaxWait: time.Second, CalibrationErrorUS: 20}, rec.emit)
		type truth struct{ start, end int64 }
		want := map[*event.Statement]truth{}
		var wires []*event.Statement
		var rows []collect.ServerStatement
		for conn := uint64(1); conn <= 20; conn++ {
			t0 := rng.Int64N(1000)
			for range 50 {
				req := t0 + rng.Int64N(300)
				start := req + 5 + rng.Int64N(200)
				end := start + rng.Int64N(5000)
				resp := end + 5 + rng.Int64N(100)
				verb := []string{"SELECT", "UPDATE", "INSERT"}[rng.IntN(3)]
				r := row(conn, "statement/sql/"+verb, verb+" x", start-rng.Int64N(15), end+rng.Int64N(15))
				r.EventID = uint64(len(rows))
				switch rng.IntN(20) {
				case 0: // row lost
				case 1: // statement not captured
					rows = append(rows, r)
				default:
					s := wire(conn, "COM_QUERY", verb+" x", req, resp)
					wires = append(wires, s)
					want[s] = truth{r.StartUS, r.EndUS}
					rows = append(rows, r)
				}
				t0 = resp + 200 + rng.Int64N(1000) // client think time between statements
			}
		}
		// Deliver both sides in time order, in random-sized batches, with the
		// server side lagging by a random amount.
		sortWires(wires)
		sortRows(rows)
		wi, ri := 0, 0
		for wi < len(wires) || ri < len(rows) {
			if wi < len(wires) && (ri >= len(rows) || rng.IntN(2) == 0) {
				n := min(len(wires)-wi, 1+rng.IntN(10))
				for _, s := range wires[wi : wi+n] {
					j.AddWire(s, s.TRespLast)
				}
				wi += n
			} else {
				n := min(len(rows)-ri, 1+rng.IntN(40))
				j.AddServer(rows[ri:ri+n], rows[ri].EndUS)
				ri += n
			}
		}
		j.FlushAll()
		if len(rec.out) != len(wires) {
			t.Fatalf("round %d: emitted %d of %d", round, len(rec.out), len(wires))
		}
		joined := 0
		for _, s := range wires {
			if sumParts(s) != s.ClientUS && s.Joined {
				t.Fatalf("round %d: sum mismatch", round)
			}
			if !s.Joined {
				continue
			}
			joined++
			tr := want[s]
			if s.ServerUS != tr.end-tr.start {
				t.Fatalf("round %d: %s matched a row of %d us, its own took %d us; %+v", round, s.SQL, s.ServerUS, tr.end-tr.start, j.Stats())
			}
		}
		if joined < len(wires)*9/10 {
			t.Fatalf("round %d: joined %d of %d", round, joined, len(wires))
		}
	}
}

func sortWires(w []*event.Statement) {
	for i := 1; i < len(w); i++ {
		for k := i; k > 0 && w[k].TRespLast < w[k-1].TRespLast; k-- {
			w[k], w[k-1] = w[k-1], w[k]
		}
	}
}

func sortRows(r []collect.ServerStatement) {
	for i := 1; i < len(r); i++ {
		for k := i; k > 0 && r[k].EndUS < r[k-1].EndUS; k-- {
			r[k], r[k-1] = r[k-1], r[k]
		}
	}
}

func TestJoinSteadyStateAllocations(t *testing.T) {
	j := New(Options{}, func(*event.Statement) {})
	stmts := make([]*event.Statement, 64)
	for i := range stmts {
		stmts[i] = wire(uint64(i%8+1), "COM_QUERY", "SELECT 1", 0, 0)
	}
	rows := make([]collect.ServerStatement, 1)
	var t0 int64
	step := func() {
		t0 += 100
		s := stmts[t0/100%64]
		s.TReqFirst, s.TReqLast, s.TRespLast, s.Notes = t0, t0, t0+50, s.Notes[:0]
		j.AddWire(s, t0)
		rows[0] = row(s.ConnID, "statement/sql/select", "SELECT 1", t0+10, t0+40)
		j.AddServer(rows, t0)
		j.Flush(t0)
	}
	for range 1000 {
		step() // grow the queues to their working size
	}
	if n := testing.AllocsPerRun(1000, step); n != 0 {
		t.Fatalf("steady state allocates %.1f times per statement", n)
	}
}

// TestHoldsCountsRowsOfEndedThreads: a row of a thread that ended before
// it was read waits for Flush like a buffered statement (watch's loop
// sleeps when nothing is held, and would leave it there).
func TestHoldsCountsRowsOfEndedThreads(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{MaxWait: time.Second}, rec.emit)
	if j.Holds() {
		t.Fatal("a new joiner holds something")
	}
	r := row(0, "statement/sql/select", "SELECT 1", 1_000_000, 1_000_100) // no connection id: the thread ended
	j.AddServer([]collect.ServerStatement{r}, 2_000_000)
	if j.Pending() != 0 || !j.Holds() {
		t.Fatalf("an ended thread's row: pending %d, holds %v; want 0 and true", j.Pending(), j.Holds())
	}
	j.Flush(10_000_000)
	if j.Holds() {
		t.Error("the row is still held after MaxWait")
	}
}

// A statement whose answer a header-only capture cut has no wire row
// count; joined, it takes the server's ROWS_SENT (summed over a
// multi-statement request) and its note says so. A whole answer's count
// and a row without ROWS_SENT are left as they are.
func TestJoinFillsRowsTheWireCouldNotCount(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	cut := wire(1, "COM_QUERY", "SELECT 1; SELECT 2", 0, 1000)
	cut.Notes, cut.RowsBy = []string{"retransmit"}, event.RowsCut
	whole := wire(1, "COM_QUERY", "SELECT 3", 2000, 2100)
	whole.Rows = 4
	noCount := wire(1, "COM_QUERY", "SELECT 5", 3000, 3100)
	noCount.RowsBy = event.RowsCut
	for _, s := range []*event.Statement{cut, whole, noCount} {
		j.AddWire(s, 0)
	}
	rows := []collect.ServerStatement{
		row(1, "statement/sql/select", "SELECT 1; SELECT 2", 100, 200),
		row(1, "statement/sql/select", "SELECT 2", 210, 400),
		row(1, "statement/sql/select", "SELECT 3", 2010, 2050),
		row(1, "statement/sql/select", "SELECT 5", 3010, 3050),
	}
	rows[0].RowsSent, rows[1].RowsSent, rows[2].RowsSent = 300, 700, 9
	j.AddServer(rows, readAfter)
	for _, s := range []*event.Statement{cut, whole, noCount} {
		if !s.Joined {
			t.Fatalf("%q not joined: %v", s.SQL, s.Notes)
		}
	}
	if notes := slices.Collect(cut.AllNotes()); cut.Rows != 1000 || cut.RowsBy != event.RowsFromServer ||
		!slices.Equal(notes, []string{"retransmit", event.NoteRowsFromServer}) {
		t.Errorf("cut answer: rows %d notes %q, want 1000 from the server", cut.Rows, notes)
	}
	if whole.Rows != 4 || whole.RowsBy != event.RowsCounted {
		t.Errorf("whole answer: rows %d (%v), want the wire's 4", whole.Rows, whole.RowsBy)
	}
	if noCount.Rows != 0 || !noCount.RowsUnknown() || !slices.Contains(slices.Collect(noCount.AllNotes()), event.NoteRowsUnknown) {
		t.Errorf("a row without ROWS_SENT: rows %d notes %q, want unknown", noCount.Rows, slices.Collect(noCount.AllNotes()))
	}
}

// A read that found the server's ring had overwritten rows holds every row
// the ring kept: the wire statements that ended before the oldest of them
// (by more than the settle margin) and that its rows do not join are given
// up at once, on connections whose later rows never come (the whole
// connection lost between two reads); an outlier waits on for a read of
// its thread, and a statement near the oldest row waits for later reads.
func TestJoinLostReadGivesUpAtOnce(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	gone := wire(1, "COM_QUERY", "SELECT 1", 1_000, 1_100) // its connection's every row lost
	slow := wire(2, "COM_QUERY", "SELECT 2", 2_000, 2_100) // an outlier: a thread read may bring it
	slow.Outlier = true
	near := wire(3, "COM_QUERY", "SELECT 3", 500_000, 500_100) // ended after the cutoff
	kept := wire(4, "COM_QUERY", "SELECT 4", 600_000, 600_100) // its row is in the read
	for _, s := range []*event.Statement{gone, slow, near, kept} {
		j.AddWire(s, 0)
	}
	j.AddServerLost([]collect.ServerStatement{row(4, "statement/sql/select", "SELECT 4", 600_010, 600_050)}, 700_000)
	if !kept.Joined {
		t.Error("the statement whose row the read held was not joined")
	}
	if !rec.seen[gone] || gone.Joined || gone.Why != event.NoRow {
		t.Errorf("the statement whose row the ring lost: emitted %v, reason %s; want given up now, %s", rec.seen[gone], gone.Why, event.NoRow)
	}
	if rec.seen[slow] || rec.seen[near] {
		t.Errorf("given up too early: the outlier %v, the statement near the oldest row %v", rec.seen[slow], rec.seen[near])
	}
	if j.Pending() != 2 {
		t.Errorf("pending %d, want the outlier and the recent statement", j.Pending())
	}
	// The same read without a loss gives nothing up.
	rec2 := newRecorder(t)
	j2 := New(Options{}, rec2.emit)
	j2.AddWire(wire(1, "COM_QUERY", "SELECT 1", 1_000, 1_100), 0)
	j2.AddServer([]collect.ServerStatement{row(4, "statement/sql/select", "SELECT 4", 600_010, 600_050)}, 700_000)
	if len(rec2.out) != 0 {
		t.Errorf("a read without a loss gave up %d statements", len(rec2.out))
	}
}

// A row of a thread that ended before it was read waits to be attributed
// to its connection: a lossy read does not give up the statements it may
// still join.
func TestJoinLostReadKeepsWhatEndedThreadsMayJoin(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	waits := wire(1, "COM_QUERY", "SELECT 1", 1_000, 1_100)
	j.AddWire(waits, 0)
	ended := row(0, "statement/sql/select", "SELECT 1", 1_010, 1_050) // its thread gone: no connection id
	ended.ThreadID = 555
	j.AddServer([]collect.ServerStatement{ended}, 690_000) // an earlier read
	j.AddServerLost([]collect.ServerStatement{row(4, "statement/sql/select", "SELECT 4", 600_010, 600_050)}, 700_000)
	if rec.seen[waits] && !waits.Joined {
		t.Errorf("given up (%s) while a row of an ended thread that fits it waits to be attributed", waits.Why)
	}
}

// TestJoinRefusesAnotherStatementsText: a query whose own row the reads
// missed must not take the next statement's row, which a clock off by
// 200 µs puts inside its window: the texts, held whole on both sides, differ. The next
// statement gets its row. A row whose text the server cut says nothing.
func TestJoinRefusesAnotherStatementsText(t *testing.T) {
	for _, cut := range []bool{false, true} {
		rec := newRecorder(t)
		j := New(Options{}, rec.emit)
		planted := withText(wire(7, "COM_QUERY", "SELECT SLEEP(?) AS planted_slow", 1_000_000, 1_050_100), "SELECT SLEEP(0.05) AS planted_slow")
		next := withText(wire(7, "COM_QUERY", "SELECT ? AS a0", 1_050_200, 1_050_300), "SELECT 0 AS a0")
		j.AddWire(planted, 0)
		j.AddWire(next, 0)
		text := "SELECT 0 AS a0"
		r := row(7, "statement/sql/select", text, 1_050_020, 1_050_080)
		if cut { // the read took the text's start only, and could not read it again
			r.SQLText, r.TextCut = "SELECT 0", collect.TextCutByRead
		}
		r.Digest, r.DigestText = "a0", "SELECT ? AS `a0`"
		j.AddServer([]collect.ServerStatement{r}, 0)
		j.FlushAll() // what waits for a better fit is settled as at its expiry
		if cut {
			if !planted.Joined || planted.Digest != "a0" {
				t.Errorf("cut text: the row fits the first query in time and its text says nothing: joined %v, digest %q", planted.Joined, planted.Digest)
			}
			continue
		}
		if planted.Joined || planted.Digest == "a0" {
			t.Errorf("the planted query took the next statement's row: digest %q, text %q", planted.Digest, planted.DigestText)
		}
		if !next.Joined || next.Digest != "a0" {
			t.Errorf("the next statement did not get its own row: joined %v, digest %q", next.Joined, next.Digest)
		}
	}
}

// withText sets s's TextHash from the text the client sent.
func withText(s *event.Statement, sent string) *event.Statement {
	s.TextHash = sqltext.TextHashString(sent)
	return s
}
