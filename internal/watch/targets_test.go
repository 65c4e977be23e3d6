package watch

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
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

// Targets not found are read again later, then given up and counted.
func TestTargetsRetryThenGiveUp(t *testing.T) {
	tg := newTargets(true, true)
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
	tg := newTargets(true, true)
	tg.fed[rowKey{7, 42}] = time.Now()
	rows := []collect.ServerStatement{{ThreadID: 7, EventID: 41}, {ThreadID: 7, EventID: 42}, {ThreadID: 8, EventID: 42}}
	kept, dups := tg.dropFed(rows)
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
	e := &engine{sample: newConnSample(capture.Sample{N: 1024, Key: 1}), wire: make(chan *event.Statement, 8),
		pollStage: pollStage{targets: newTargets(true, true)}}
	e.sink = newSink(100, func(s *event.Statement) { got = append(got, s) })
	e.joiner = join.New(join.Options{}, e.joined)
	e.cursor = collect.NewJoinCursor(collect.SourceHistoryLong)
	// Find a client port the 1-in-1024 sample leaves out.
	port := 40000
	for (capture.Sample{N: 1024, Key: 1}).Follows(uint16(port)) {
		port++
	}
	conn := "127.0.0.1:" + strconv.Itoa(port) + ">127.0.0.1:3306"
	fast := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", TReqFirst: 10, TReqLast: 10, TRespFirst: 20, TRespLast: 20}
	slow := &event.Statement{Conn: conn, ConnID: 3, Cmd: "COM_QUERY", Outlier: true, TReqFirst: 100, TReqLast: 100, TRespFirst: 300_000, TRespLast: 300_000}
	e.wire <- fast
	e.wire <- slow
	e.takeWire()
	if len(got) != 1 || got[0] != fast || !slices.Contains(fast.Notes, NoteSampledOut) {
		t.Fatalf("sampled-out statement: got %d, notes %v", len(got), fast.Notes)
	}
	e.losses.add(0, 1_000_000)
	e.joiner.FlushAll()
	if len(got) != 2 || got[1] != slow || !slices.Contains(slow.Notes, NoteRingLost) ||
		!slices.ContainsFunc(slow.Notes, func(n string) bool { return strings.HasPrefix(n, "slow statement (outlier)") }) {
		t.Fatalf("outlier: got %d, notes %v", len(got), slow.Notes)
	}
	e.cursor = nil
	none := &event.Statement{Conn: conn, Cmd: "COM_QUERY"}
	e.wire <- none
	e.takeWire()
	if !slices.Contains(none.Notes, NoteNoServer) {
		t.Errorf("without a server side: notes %v", none.Notes)
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
	if s := c.Summary(); !strings.Contains(s, "3 statements seen") || !strings.Contains(s, "1 stood out, 0 of them joined") {
		t.Errorf("summary %q", s)
	}
}
