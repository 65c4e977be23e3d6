package watch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
)

// The unjoined reason is the one recorded on the statement, whatever its
// notes say; a joined statement has none, one without a response has
// nothing to join.
func TestUnjoinedReason(t *testing.T) {
	cases := []struct {
		s    event.Statement
		want event.Reason
	}{
		{event.Statement{Joined: true, TRespLast: 5}, event.ReasonNone},
		{event.Statement{Cmd: "COM_QUIT"}, event.NoResponse},
		{event.Statement{TRespLast: 5, Why: event.TLS, Notes: []string{"reworded: any text"}}, event.TLS},
		{event.Statement{TRespLast: 5, Why: event.RingLost}, event.RingLost},
		{event.Statement{Why: event.UnixSocket}, event.UnixSocket},
		{event.Statement{Cmd: "COM_BINLOG_DUMP", TRespLast: 5, Why: event.ReplicaStream}, event.ReplicaStream},
		{event.Statement{Cmd: "COM_BINLOG_DUMP", Why: event.ReplicaStream}, event.ReplicaStream}, // its server row, server-only
		{event.Statement{TRespLast: 5, Notes: []string{"tls: no sql text"}}, event.NoReason},
	}
	for _, c := range cases {
		if got := UnjoinedReason(&c.s); got != c.want {
			t.Errorf("%+v: %v, want %v", c.s, got, c.want)
		}
	}
}

// decideReason takes what watch knows of a missing row for the reasons
// whose row the join waited for, and for those only; no response and a
// server statement's reason come first.
func TestDecideReason(t *testing.T) {
	lost := func(*event.Statement) event.Reason { return event.RingLost }
	nothing := func(*event.Statement) event.Reason { return event.ReasonNone }
	for _, r := range event.Reasons() {
		s := event.Statement{TRespLast: 5, Why: r}
		want := r
		if r.Waited() {
			want = event.RingLost
		}
		if r.Kind() == event.KindUnmatchedRow { // never on a statement; decided as any other
			continue
		}
		if got := decideReason(&s, lost); got != want {
			t.Errorf("%s: decided %s, want %s", r, got, want)
		}
		if got := decideReason(&s, nothing); got != r {
			t.Errorf("%s with nothing known: decided %s", r, got)
		}
		if got := decideReason(&s, nil); got != r {
			t.Errorf("%s without watch's knowledge: decided %s", r, got)
		}
		quit := event.Statement{Cmd: "COM_QUIT", Why: r}
		if got, want := decideReason(&quit, lost), event.NoResponse; got != want && !r.ServerOnly() && r != event.ReplicaStream { // a stream keeps its own reason
			t.Errorf("no response, proposed %s: decided %s, want %s", r, got, want)
		}
	}
}

// An outlier the join gave up says why watch's read of its thread missed
// it; one whose row was found and its split withheld does not.
func TestOutlierMissNote(t *testing.T) {
	var got []*event.Statement
	out := startTestOutput(10, time.Hour, StatementFunc(func(s *event.Statement) { got = append(got, s) }))
	given := &event.Statement{Conn: "c", TRespLast: 5, Outlier: true, Why: event.Expired}
	withheld := &event.Statement{Conn: "c", TRespLast: 5, Outlier: true, Why: event.UnexplainedDelivery}
	out.k.fromJoin(given)
	out.k.fromJoin(withheld)
	out.end()
	if len(got) != 2 || !slices.Equal(given.Notes, []string{testMiss}) || len(withheld.Notes) != 0 {
		t.Errorf("notes: given up %q, withheld %q", given.Notes, withheld.Notes)
	}
}

// The watch sink hands every statement to the run's sinks, in order,
// with the reason it counted, and tallies the unjoined by reason.
func TestSinksGetStatements(t *testing.T) {
	var got []*event.Statement
	out := startTestOutput(10, time.Hour, StatementFunc(func(s *event.Statement) { got = append(got, s) }))
	k := out.k
	k.add(&event.Statement{Joined: true, TRespLast: 1})
	k.add(&event.Statement{TRespLast: 1, Why: event.NoRow})
	k.add(&event.Statement{Cmd: "COM_QUIT"})
	k.add(&event.Statement{TRespLast: 1})
	out.end()
	want := []event.Reason{event.ReasonNone, event.NoRow, event.NoResponse, event.NoReason}
	if len(got) != len(want) {
		t.Fatalf("sinks got %d statements, want %d", len(got), len(want))
	}
	for i, s := range got {
		if s.Why != want[i] {
			t.Errorf("statement %d: reason %v, want %v", i, s.Why, want[i])
		}
	}
	if u := k.cov.unjoinedByReason(); u["no_row"] != 1 || u["no_response"] != 1 || u["no_reason"] != 1 || len(u) != 3 {
		t.Errorf("unjoined by reason %v", u)
	}
	testTally(10, newOutputQueue(nil), false).add(&event.Statement{}) // no sinks: nothing queued
}

// A statement's life ends in the tally: without sinks at once, with sinks
// once each had it, so that the capture's block of statements is handed
// out again; every sink saw each statement whole before that.
func TestSinkReleasesStatements(t *testing.T) {
	for _, withSinks := range []bool{false, true} {
		slabs := event.NewSlabs()
		var seen []string
		var sinks []Sink
		if withSinks {
			sinks = append(sinks, StatementFunc(func(s *event.Statement) { seen = append(seen, s.SQL) }))
		}
		out := startTestOutput(100, time.Hour, sinks...)
		k := out.k
		var first *event.Statement
		for i := range event.SlabLen { // one block
			s := slabs.New()
			if i == 0 {
				first = s
			}
			s.SQL, s.TRespLast, s.ClientUS = fmt.Sprintf("SELECT %d", i), int64(i+1), 10
			k.add(s)
		}
		out.end()
		if again := slabs.New(); again != first || again.SQL != "" {
			t.Errorf("sinks %v: the block was not handed out again, cleared (%p %q, first %p)", withSinks, again, again.SQL, first)
		}
		if withSinks && (len(seen) != event.SlabLen || seen[event.SlabLen-1] != fmt.Sprintf("SELECT %d", event.SlabLen-1)) {
			t.Errorf("the sink saw %v", seen)
		}
	}
}

// A sink that blocks holds up no one who finishes statements: add returns
// while the sink is stuck, statements beyond the queue are counted as
// dropped, and once the sink moves again every queued one reaches it.
func TestOutputOffTheJoinersPath(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var got int
	out := startTestOutput(10, time.Hour, StatementFunc(func(*event.Statement) {
		if got == 0 {
			close(entered)
			<-release
		}
		got++
	}))
	k := out.k
	k.add(&event.Statement{Joined: true, TRespLast: 1})
	<-entered // the sink is stuck on the first statement
	done := make(chan struct{})
	n := maxOutputQueued + 101
	go func() {
		for range n - 1 {
			k.add(&event.Statement{Joined: true, TRespLast: 1})
		}
		close(done)
	}()
	<-done // would hang if add waited for the blocked sink
	close(release)
	out.end()
	if dropped := k.out.drops(); dropped == 0 || int64(got)+dropped != int64(n) {
		t.Errorf("sink got %d, dropped %d, of %d put", got, dropped, n)
	}
	if k.total != int64(n) {
		t.Errorf("the sink's own accounting has %d of %d: a statement the output dropped must still be counted", k.total, n)
	}
}

// The snapshot the web page and the exporters read says which share of
// the connections is joined from the join sample the poller sets (the
// terminal's source), not from the capture's, which watch never samples.
func TestSnapshotFollowingIsTheJoinSample(t *testing.T) {
	src := testSource(testTally(10, newOutputQueue(nil), false))
	src.sample = newJoinSample(capture.Sample{N: 1}, noBudget{}, newOwnAddrs())
	if f := src.live().Health.Following; f != "" {
		t.Errorf("every connection joined, following %q", f)
	}
	src.sample.set(capture.Sample{N: 8, Key: 3})
	if f := src.live().Health.Following; !strings.Contains(f, "1 in 8 connections") {
		t.Errorf("a 1-in-8 join sample, following %q", f)
	}
}

// TestSnapshotsOnlyForSinksThatTakeThem: with only statement sinks (the
// events file, the store) no snapshot is built, so the statement rules do
// not run every 5 s for nobody, however often the tick would come; a sink
// that takes snapshots gets them, from the stage's start, and the
// statement sink still none.
func TestSnapshotsOnlyForSinksThatTakeThem(t *testing.T) {
	stmts := &recordingSink{takes: TakesStatements}
	out := startTestOutput(10, time.Millisecond, stmts)
	out.k.add(&event.Statement{Joined: true, TRespLast: 1})
	time.Sleep(20 * time.Millisecond) // ticks, were there any
	out.end()
	if !out.src.findingsAt.IsZero() || len(stmts.snaps) != 0 {
		t.Errorf("the statement rules ran (%v) for snapshots no sink takes; the statement sink got %d", !out.src.findingsAt.IsZero(), len(stmts.snaps))
	}
	stmts = &recordingSink{takes: TakesStatements}
	rec := &recordingSink{takes: TakesSnapshots}
	out = startTestOutput(10, time.Millisecond, stmts, rec)
	out.k.add(&event.Statement{Joined: true, TRespLast: 1})
	time.Sleep(20 * time.Millisecond)
	out.end()
	if len(rec.snaps) < 2 || out.src.findingsAt.IsZero() || len(stmts.snaps) != 0 {
		t.Errorf("a sink that takes snapshots got %d (rules run: %v); the statement sink %d", len(rec.snaps), !out.src.findingsAt.IsZero(), len(stmts.snaps))
	}
}
