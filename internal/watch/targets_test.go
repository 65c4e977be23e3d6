package watch

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// The row an outlier's thread read returns for it is the one that started
// between its last request byte and its first answer byte; the neighbours
// (the statement before, the one after) are not taken.
func TestBestRowPicksTheOutliersOwn(t *testing.T) {
	p := &pendingTarget{target: target{connID: 5, reqFirst: 1_000, reqLast: 1_010, respFirst: 201_000, respLast: 201_050}}
	rows := []collect.ServerStatement{
		{ConnID: 5, EventID: 1, StartUS: 700, EndUS: 900},         // the statement before
		{ConnID: 5, EventID: 2, StartUS: 1_040, EndUS: 200_990},   // its own
		{ConnID: 5, EventID: 3, StartUS: 201_300, EndUS: 201_400}, // the next
		{ConnID: 6, EventID: 9, StartUS: 1_020, EndUS: 200_000},   // another connection
		{ConnID: 5, EventID: 4, StartUS: 1_050, NestingLevel: 1},  // inside a stored program
	}
	if i := bestRow(rows, p, 0, 2000, 100); i != 1 {
		t.Fatalf("bestRow = %d, want 1", i)
	}
	// The server's clock 30 ms ahead of the capture's: the offset puts
	// the rows back where they belong.
	ahead := slices.Clone(rows)
	for i := range ahead {
		ahead[i].StartUS += 30_000
		if ahead[i].EndUS != 0 {
			ahead[i].EndUS += 30_000
		}
	}
	if i := bestRow(ahead, p, 30_000, 2000, 100); i != 1 {
		t.Fatalf("bestRow with a 30 ms offset = %d, want 1", i)
	}
	// The statement before, started within the tolerance but ended before
	// the request: not taken.
	before := []collect.ServerStatement{{ConnID: 5, EventID: 1, StartUS: 900, EndUS: 950}}
	if i := bestRow(before, p, 0, 2000, 20); i != -1 {
		t.Errorf("the statement before the outlier taken for it: %d", i)
	}
	if i := bestRow(rows[:1], p, 0, 100, 100); i != -1 {
		t.Errorf("a row 300 µs before the request fits within 100 µs: %d", i)
	}
}

// A pipelined batch (Connector/J's useBatchMultiSend): 20 requests sent
// at once, answered 20 ms apart. Every statement of the batch started
// between an outlier's request and its answer, so the start alone does
// not tell the outlier's row from those before it: the end does, the
// server ending each statement as it answers it. Each outlier of the batch
// gets its own row from its thread's 10-row history, the clock's offset
// and error notwithstanding.
func TestBestRowOfAPipelinedOutlier(t *testing.T) {
	const n, exec = 20, 20_000
	var rows []collect.ServerStatement
	var outliers []*pendingTarget
	start := int64(1_000_060)
	for k := range n {
		end := start + exec
		rows = append(rows, collect.ServerStatement{ConnID: 5, ThreadID: 50, EventID: uint64(10*k + 1), StartUS: start, EndUS: end})
		outliers = append(outliers, &pendingTarget{target: target{connID: 5, reqFirst: 1_000_000 + int64(4*k), reqLast: 1_000_000 + int64(4*k),
			respFirst: end - 5, respLast: end - 5}})
		start = end + 12
	}
	// shift: the server clock's offset from the capture's; off: what the
	// join learnt of it (150 µs it did not see, either way).
	for _, c := range []struct{ shift, off int64 }{{0, 0}, {30_000, 30_000}, {-150, 0}, {150, 0}} {
		shift, off := c.shift, c.off
		for k := range n {
			history := slices.Clone(rows[max(0, k-9) : k+1]) // its thread's history when read
			if k+1 < n {
				history = append(history, rows[k+1]) // the next one, already ended
			}
			for i := range history {
				history[i].StartUS += shift
				history[i].EndUS += shift
			}
			i := bestRow(history, outliers[k], off, 2000, 100)
			if i < 0 || history[i].EventID != rows[k].EventID {
				t.Fatalf("clock %+d us (%+d known): outlier %d got row %d, want its own", shift, off, k, i)
			}
			// Read before the server recorded its end: the rows before
			// it ended before its answer began; none is taken for it
			// (it is read again).
			if k > 0 {
				early := slices.Clone(history[:slices.IndexFunc(history, func(r collect.ServerStatement) bool { return r.EventID == rows[k].EventID })])
				if i := bestRow(early, outliers[k], off, 2000, 100); i >= 0 {
					t.Fatalf("clock %+d us: outlier %d read before its row ended got row %d of the statements before it", shift, k, early[i].EventID)
				}
			}
		}
	}
}

// Targets not found are read again later, then given up and counted.
func TestTargetsRetryThenGiveUp(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	now := time.Unix(1000, 0)
	tg.add(target{connID: 1}, now)
	for i := 0; i < len(retryAfter); i++ {
		wait, ok := tg.wait(now)
		if !ok {
			t.Fatalf("try %d: nothing pending", i)
		}
		now = now.Add(wait)
		due := tg.due(now)
		if len(due) != 1 {
			t.Fatalf("try %d: %d due", i, len(due))
		}
		tg.requeue(due, now)
	}
	if _, ok := tg.wait(now); ok || tg.missedCount() != 1 {
		t.Errorf("after %d tries: pending %v, missed %d", len(retryAfter), ok, tg.missedCount())
	}
}

// A row a targeted read fed is not fed again by history_long.
func TestDropFed(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.rows.fed[rowKey{7, 42}] = time.Now()
	rows := []collect.ServerStatement{{ThreadID: 7, EventID: 41}, {ThreadID: 7, EventID: 42}, {ThreadID: 8, EventID: 42}}
	kept, dups := tg.rows.dropFed(rows)
	if dups != 1 || len(kept) != 2 || slices.ContainsFunc(kept, func(r collect.ServerStatement) bool { return r.ThreadID == 7 && r.EventID == 42 }) {
		t.Errorf("kept %+v, dups %d", kept, dups)
	}
}

func TestLossLog(t *testing.T) {
	var l lossLog
	l.add(100, 200)
	l.add(150, 300) // overlaps: merged
	l.add(1000, 1100)
	if !l.covers(250) || !l.covers(1000) || l.covers(500) || len(l.spans) != 2 {
		t.Errorf("spans %+v", l.spans)
	}
}

// The loop's routing: without a server side every statement says so; a
// fast statement of a connection outside the join sample says it was
// left out; an outlier is joined whatever the sample; a statement the
// joiner gives up while the ring was losing rows says the ring lost it.
func TestTakeWireRoutesAndNotes(t *testing.T) {
	var got []*event.Statement
	out := make(chan *event.Statement, 8)
	next := func() {
		select {
		case s := <-out:
			got = append(got, s)
		case <-time.After(10 * time.Second):
			t.Fatal("no statement reached the sinks")
		}
	}
	e, end := testEngine(newJoinSample(capture.Sample{N: 1024, Key: 1}, noBudget{}, newOwnAddrs()), true, StatementFunc(func(s *event.Statement) { out <- s }))
	defer end()
	// Find a client port the 1-in-1024 sample leaves out.
	port := 40000
	for (capture.Sample{N: 1024, Key: 1}).Follows(uint16(port)) {
		port++
	}
	conn := "127.0.0.1:" + strconv.Itoa(port) + ">127.0.0.1:3306"
	fast := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", TReqFirst: 10, TReqLast: 10, TRespFirst: 20, TRespLast: 20}
	slow := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", Outlier: true, TReqFirst: 100, TReqLast: 100, TRespFirst: 300_000, TRespLast: 300_000}
	e.wire.out <- fast
	e.wire.out <- slow
	e.takeWire()
	next()
	if len(got) != 1 || got[0] != fast || fast.Why != event.SampledOut || !slices.Equal(slices.Collect(fast.AllNotes()), []string{event.SampledOut.Text()}) {
		t.Fatalf("sampled-out statement: got %d, notes %v", len(got), slices.Collect(fast.AllNotes()))
	}
	e.losses.add(0, 1_000_000)
	e.joiner.FlushAll()
	next()
	// the outlier's note, then the reason's sentence, written from the
	// reason watch decided (the joiner's run_end not among them)
	if notes := slices.Collect(slow.AllNotes()); len(got) != 2 || got[1] != slow || slow.Why != event.RingLost ||
		len(notes) != 2 || !strings.HasPrefix(notes[0], "slow statement (outlier)") || notes[1] != event.RingLost.Text() {
		t.Fatalf("outlier: got %d, notes %v", len(got), notes)
	}
	e.readsRows = false
	none := &event.Statement{Conn: conn, Cmd: "COM_QUERY", TRespLast: 30}
	e.wire.out <- none
	e.takeWire()
	next()
	if none.Why != event.NoServer || !slices.Equal(slices.Collect(none.AllNotes()), []string{event.NoServer.Text()}) {
		t.Errorf("without a server side: notes %v", slices.Collect(none.AllNotes()))
	}
	// The coverage counts the events themselves.
	c := e.coverage(e.joiner.Stats(), ServerSideStats{})
	var unjoined int64
	for _, n := range c.Unjoined {
		unjoined += n
	}
	if c.Seen != 3 || c.Joined != 0 || unjoined != 3 || c.Outliers != 1 {
		t.Errorf("coverage %+v", c)
	}
	// Per reason, the coverage says what the events say.
	byEvent := map[string]int64{}
	for _, s := range got {
		byEvent[s.Why.String()]++
	}
	if !maps.Equal(byEvent, c.Unjoined) {
		t.Errorf("coverage by reason %v, the events' reasons %v", c.Unjoined, byEvent)
	}
	if s := c.Summary(); !strings.Contains(s, "3 statements seen") || !strings.Contains(s, "1 stood out, 0 of them joined") {
		t.Errorf("summary %q", s)
	}
}

// busyTarget is an outlier of connection 5 whose request ended at 1,000
// and whose answer began at 31,000 (capture clock, µs).
func busyTarget() *pendingTarget {
	return &pendingTarget{target: target{connID: 5, reqFirst: 990, reqLast: 1_000, respFirst: 31_000, respLast: 31_050}}
}

// sleepRunning is the outlier's statement as a running scan read it: its
// start 40 µs after the request, no end yet (server clock = capture + off).
func sleepRunning(off int64) collect.ServerStatement {
	return collect.ServerStatement{ThreadID: 9, EventID: 100, ConnID: 5, SQLText: "SELECT SLEEP(0.03)",
		StartUS: 1_040 + off, Source: collect.SourceRunning}
}

// movedOn is what the thread's read returns once ten statements followed
// the outlier, the first 2.5 ms after its answer began.
func movedOn(off int64) []collect.ServerStatement {
	var rows []collect.ServerStatement
	for i := range 10 {
		start := 33_500 + int64(i)*150 + off
		rows = append(rows, collect.ServerStatement{ThreadID: 9, EventID: uint64(101 + i), ConnID: 5, StartUS: start, EndUS: start + 60,
			Source: collect.SourceHistory})
	}
	return rows
}

// An outlier whose thread's history moved past it is joined from the row
// read while it ran: its start the server's, its end when the server sent
// its answer's last byte, said in its source; and the running scans speed
// up.
func TestRolledOverOutlierFromRunningRow(t *testing.T) {
	const off = 500 // the server's clock ahead of the capture's
	tg := newTargets(true, true, newCursorRef(nil))
	tg.remember([]collect.ServerStatement{sleepRunning(off)})
	now := time.Unix(1000, 0)
	p := busyTarget()
	r, ok := tg.rowFor(p, movedOn(off), off, 2_000, 100, now)
	if !ok || r.EventID != 100 || r.StartUS != 1_040+off || r.EndUS != 31_050+off || r.Source != collect.SourceRunning {
		t.Fatalf("fed %v: %+v", ok, r)
	}
	if r.TimerWait != uint64(30_010)*collect.PicosPerMicro || p.tries != -1 {
		t.Errorf("timer wait %d ps, tries %d", r.TimerWait, p.tries)
	}
	if every, atLeast := tg.scanPace(now); every != busyRunningEvery || atLeast != busyRunningMin {
		t.Errorf("after a rolled-over outlier the scans run every %v for statements past %v", every, atLeast)
	}
	if every, _ := tg.scanPace(now.Add(busyScanFor + time.Second)); every != runningEvery {
		t.Errorf("long after: every %v, want %v", every, runningEvery)
	}
	if len(tg.running[5]) != 0 {
		t.Errorf("the running row is kept after it was fed: %+v", tg.running[5])
	}
}

// The oldest row left in the thread's history started 1.4 ms after the
// outlier's answer: within the slack a history row's start gets, but the
// outlier's own running row fits its window; the later statement is not
// taken for it.
func TestRolledOverPrefersRunningRowToALaterStatement(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.remember([]collect.ServerStatement{sleepRunning(0)})
	read := movedOn(0)
	read[0].StartUS, read[0].EndUS = 32_400, 32_440
	p := busyTarget()
	r, ok := tg.rowFor(p, read, 0, 2_000, 100, time.Now())
	if !ok || r.EventID != 100 || r.Source != collect.SourceRunning {
		t.Fatalf("fed %v: %+v", ok, r)
	}
	// Without the running row the later statement is still not taken for
	// it (its start lies beyond the clock's error): the outlier is given up.
	tg = newTargets(true, true, newCursorRef(nil))
	p = busyTarget()
	if r, ok := tg.rowFor(p, read, 0, 2_000, 100, time.Now()); ok || p.tries != len(retryAfter) {
		t.Errorf("without a running row: fed %v %+v, tries %d", ok, r, p.tries)
	}
}

// On a loaded host a targeted read returns thousands of history_long
// rows for hundreds of outliers: finding an outlier's row among them
// copies none (a copy per outlier took 30 s of CPU at the end of a loaded
// budgeted sysbench run), and the read is split by connection once.
func TestRolledOverOutlierCopiesNoRows(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	long := collect.ServerStatement{ThreadID: 9, EventID: 100, ConnID: 5, SQLText: "SELECT SLEEP(0.03)",
		StartUS: 1_040, EndUS: 31_020, Source: collect.SourceHistoryLong}
	read := movedOn(0)
	for i := range 5_000 {
		read = append(read, collect.ServerStatement{ThreadID: 9, EventID: uint64(200 + i), ConnID: 5,
			StartUS: 40_000 + int64(i)*100, EndUS: 40_050 + int64(i)*100, Source: collect.SourceHistoryLong})
	}
	read = append(read, long)
	now := time.Unix(1000, 0)
	allocs := testing.AllocsPerRun(20, func() {
		p := busyTarget()
		if r, ok := tg.rowFor(p, read, 0, 2_000, 100, now); !ok || r != long {
			t.Fatalf("fed %v: %+v", ok, r)
		}
	})
	if allocs > 1 { // the target itself
		t.Errorf("%v allocations to find one outlier's row in a read of %d", allocs, len(read))
	}
	by := rowsByConn(append(read, collect.ServerStatement{ConnID: 6, Source: collect.SourceHistoryLong}))
	if len(by[5]) != len(read) || len(by[6]) != 1 {
		t.Errorf("split by connection: %d and %d rows", len(by[5]), len(by[6]))
	}
}

// An outlier its thread's history lost is joined from its thread's rows
// in history_long when they still hold it, before any running row (the
// server's own end beats one from the wire), and the running scans keep
// their pace: history_long did what faster scans would have done.
func TestRolledOverOutlierFromHistoryLong(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.remember([]collect.ServerStatement{sleepRunning(0)})
	long := collect.ServerStatement{ThreadID: 9, EventID: 100, ConnID: 5, SQLText: "SELECT SLEEP(0.03)",
		StartUS: 1_040, EndUS: 31_020, Source: collect.SourceHistoryLong}
	neighbour := movedOn(0)[0]
	neighbour.Source = collect.SourceHistoryLong
	read := append(movedOn(0), neighbour, long)
	now := time.Unix(1000, 0)
	p := busyTarget()
	r, ok := tg.rowFor(p, read, 0, 2_000, 100, now)
	if !ok || r != long || p.tries != -1 {
		t.Fatalf("fed %v: %+v, tries %d", ok, r, p.tries)
	}
	if every, _ := tg.scanPace(now); every != runningEvery {
		t.Errorf("scans every %v after history_long held the outlier, want %v", every, runningEvery)
	}
	// history_long turned over too: the running row, and faster scans.
	p = busyTarget()
	r, ok = tg.rowFor(p, append(movedOn(0), neighbour), 0, 2_000, 100, now)
	if !ok || r.Source != collect.SourceRunning {
		t.Fatalf("history_long without it: fed %v, %+v", ok, r)
	}
	if every, _ := tg.scanPace(now); every != busyRunningEvery {
		t.Errorf("scans every %v once only a running row could join it, want %v", every, busyRunningEvery)
	}
}

// A running row that does not fit the outlier's window is not fed: the
// statement before it (seen running while the server finished it after
// its answer, started 300 µs before the outlier's request) or one that
// started after its answer. The outlier is given up at once: reading its
// thread again cannot bring its row back.
func TestRolledOverRunningRowThatDoesNotFit(t *testing.T) {
	for name, start := range map[string]int64{"the statement before": 700, "a later statement": 31_300} {
		tg := newTargets(true, true, newCursorRef(nil))
		before := sleepRunning(0)
		before.StartUS = start
		tg.remember([]collect.ServerStatement{before})
		now := time.Unix(1000, 0)
		tg.add(busyTarget().target, now)
		due := tg.due(now)
		due[0].connID = 5
		if r, ok := tg.rowFor(due[0], movedOn(0), 0, 2_000, 100, now); ok {
			t.Errorf("%s: fed %+v", name, r)
		}
		tg.requeue(due, now)
		if _, pending := tg.wait(now); pending || tg.missedCount() != 1 {
			t.Errorf("%s: still pending %v, missed %d", name, pending, tg.missedCount())
		}
	}
}

// A live thread whose history still holds the outlier joins it from
// there, not from the running row; one whose history holds only the
// statements before it (the server records a statement's end after its
// answer) is read again.
func TestAliveThreadHistoryCovers(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.remember([]collect.ServerStatement{sleepRunning(0)})
	before := collect.ServerStatement{ThreadID: 9, EventID: 99, ConnID: 5, StartUS: 500, EndUS: 600, Source: collect.SourceHistory}
	own := collect.ServerStatement{ThreadID: 9, EventID: 100, ConnID: 5, StartUS: 1_040, EndUS: 31_010, Source: collect.SourceHistory}
	now := time.Unix(1000, 0)
	p := busyTarget()
	r, ok := tg.rowFor(p, []collect.ServerStatement{before, own, movedOn(0)[0]}, 0, 2_000, 100, now)
	if !ok || r != own || p.tries != -1 {
		t.Fatalf("fed %v: %+v, tries %d", ok, r, p.tries)
	}
	if every, _ := tg.scanPace(now); every != runningEvery || len(tg.running[5]) != 1 {
		t.Errorf("scans every %v, running rows %d", every, len(tg.running[5]))
	}
	p = busyTarget()
	if r, ok := tg.rowFor(p, []collect.ServerStatement{before}, 0, 2_000, 100, now); ok || p.tries != 0 {
		t.Errorf("history not there yet: fed %v %+v, tries %d", ok, r, p.tries)
	}
}

// A thread that ended (its read returned nothing) joins its outlier from
// the running row, as one whose history moved on does.
func TestEndedThreadFromRunningRow(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.threadOf[5] = 9
	tg.remember([]collect.ServerStatement{sleepRunning(0)})
	other := collect.ServerStatement{ThreadID: 12, EventID: 7, ConnID: 6, StartUS: 1_100, EndUS: 1_200}
	r, ok := tg.rowFor(busyTarget(), []collect.ServerStatement{other}, 0, 2_000, 100, time.Now())
	if !ok || r.EventID != 100 || r.EndUS != 31_050 {
		t.Fatalf("fed %v: %+v", ok, r)
	}
	if _, known := tg.threadOf[5]; known {
		t.Error("the ended thread is still taken for the connection's")
	}
}

// A scan's rows are remembered per connection, a statement seen by several
// scans once, the newest runningKept of each.
func TestRememberRunning(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	for ev := range uint64(runningKept + 2) {
		r := collect.ServerStatement{ThreadID: 9, EventID: 100 + ev, ConnID: 5}
		tg.remember([]collect.ServerStatement{r, r})
		tg.remember([]collect.ServerStatement{r})
	}
	got := tg.running[5]
	if len(got) != runningKept || got[0].EventID != 102 || got[runningKept-1].EventID != 100+runningKept+1 {
		t.Errorf("remembered %+v", got)
	}
}

// A client that stops reading a large result keeps the statement running
// on the server until its last byte is sent: a running row's end is that
// byte's (less the transit from a capture off the server's host), not the
// first answer byte, or the send stall would be counted as delivery.
func TestRunningRowEndsAtTheLastAnswerByte(t *testing.T) {
	tg := newTargets(true, true, newCursorRef(nil))
	tg.threadOf[5] = 9
	tg.remember([]collect.ServerStatement{sleepRunning(0)})
	p := busyTarget()
	p.respLast, p.transitUS = 3_031_000, 400 // 3 s of streaming after the first byte, capture 400 µs away
	r, ok := tg.rowFor(p, nil, 0, 2_000, 100, time.Now())
	if !ok || r.EndUS != 3_030_600 {
		t.Fatalf("fed %v: end %d, want the last byte less the transit (3030600)", ok, r.EndUS)
	}
}

// A statement handed to the joiner before the budget cut its connection
// out of the join sample waits for a row the poller now drops: given up,
// its reason is the sample, not the run's end; an outlier of the same
// connection keeps the joiner's reason (slow rows are read on every
// connection).
func TestGivenUpAfterACutIsSampledOut(t *testing.T) {
	var got []*event.Statement
	e, end := testEngine(newJoinSample(capture.All, noBudget{}, newOwnAddrs()), true, StatementFunc(func(s *event.Statement) { got = append(got, s) }))
	cut := capture.Sample{N: 1024, Key: 1}
	port := 40000
	for cut.Follows(uint16(port)) {
		port++
	}
	conn := "127.0.0.1:" + strconv.Itoa(port) + ">127.0.0.1:3306"
	fast := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", TReqFirst: 10, TReqLast: 10, TRespFirst: 20, TRespLast: 20}
	slow := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", Outlier: true, TReqFirst: 100, TReqLast: 100, TRespFirst: 300_000, TRespLast: 300_000}
	e.joiner.AddWire(fast, 0)
	e.joiner.AddWire(slow, 0)
	e.sample.set(cut) // the governor cuts
	e.joiner.FlushAll()
	end()
	if fast.Joined || fast.Why != event.SampledOut {
		t.Errorf("the fast statement given up after the cut: reason %s, want %s", fast.Why, event.SampledOut)
	}
	if slow.Why == event.SampledOut {
		t.Errorf("the outlier given up after the cut says %s: slow rows are read on every connection", slow.Why)
	}
	if len(got) != 2 {
		t.Errorf("%d statements reached the sinks, want 2", len(got))
	}
}

// A statement whose row a read left out while its connection was out of
// the sample, and whose connection a later cut (another pivot) holds
// again, lost that row to the sample all the same: given up at the run's
// end, its reason is the sample. A statement that began after the last
// read that left the connection out keeps the joiner's reason.
func TestGivenUpAfterTheSampleCameBackIsSampledOut(t *testing.T) {
	e, end := testEngine(newJoinSample(capture.All, noBudget{}, newOwnAddrs()), true, StatementFunc(func(*event.Statement) {}))
	out := capture.Sample{N: 2, Key: 1}
	port := 40000
	for out.Follows(uint16(port)) {
		port++
	}
	host := "127.0.0.1:" + strconv.Itoa(port)
	conn := host + ">127.0.0.1:3306"
	begun := time.Now().Add(-time.Second).UnixMicro()
	lost := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", TReqFirst: begun, TReqLast: begun, TRespFirst: begun + 10, TRespLast: begun + 10}
	e.joiner.AddWire(lost, 0)
	e.sample.set(out)
	e.sample.replace(map[uint64]string{3: host})
	if skipped := e.sample.skipped(); !slices.Equal(skipped, []uint64{3}) { // the read that leaves its row out
		t.Fatalf("skipped %v, want [3]", skipped)
	}
	later := time.Now().Add(time.Second).UnixMicro()
	after := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", TReqFirst: later, TReqLast: later, TRespFirst: later + 10, TRespLast: later + 10}
	e.joiner.AddWire(after, 0)
	back := capture.Sample{N: 2, Key: 0} // another pivot: the connection is held again
	for !back.Follows(uint16(port)) {
		back.Key++
	}
	e.sample.set(back)
	e.joiner.FlushAll()
	end()
	if lost.Joined || lost.Why != event.SampledOut {
		t.Errorf("the statement whose row a read left out: reason %s, want %s", lost.Why, event.SampledOut)
	}
	if after.Why == event.SampledOut {
		t.Errorf("a statement begun after its connection was last left out says %s", after.Why)
	}
}
