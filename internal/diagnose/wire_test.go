package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// unjoin strips what only the server's side gives: the wire alone knows
// client time, bytes, windows and retransmissions.
func unjoin(stmts []event.Statement) []event.Statement {
	out := slices.Clone(stmts)
	for i := range out {
		s := &out[i]
		s.Joined, s.QueueUS, s.ExecUS, s.SendStallUS, s.ServerUS = false, 0, 0, 0, 0
		s.DeliveryUS = s.ClientUS - s.RequestUS
	}
	return out
}

// The slow reader on the wire alone: the large result's window was closed
// for most of its response, the tiny result's was too (its client slept as
// long). Both are named, with the caveat that server time is unknown.
func TestWireBackpressureWithoutServerSide(t *testing.T) {
	w := &Window{Statements: unjoin(slowClientWindow().Statements)}
	f := only(t, Run(w, WireRules()...), CodeClientBackpressure, 1)[0]
	checkFinding(t, f)
	ev := f.Evidence
	if ev["statements"] != 2 || ev["zero_window_us"] != int64(3_000_500+2_999_000) || ev["resp_bytes"] != int64(8_800_000+9_000) {
		t.Errorf("evidence %v", ev)
	}
	if !strings.Contains(f.Summary, "cannot tell whether the server's time was inflated") || f.Severity != event.SeverityWarning {
		t.Errorf("summary must say what the wire cannot tell: %s %q", f.Severity, f.Summary)
	}
	if f.Fix != backpressureFix {
		t.Errorf("fix %q", f.Fix)
	}
	// A closed window that is a small part of a long response is no finding,
	// unless it lasted a second or more.
	w.Statements[0].ZeroWindowUS, w.Statements[1].ZeroWindowUS = 20_000, 9_000
	only(t, Run(w, WireRules()...), CodeClientBackpressure, 0)
	w.Statements[0].ClientUS, w.Statements[0].ZeroWindowUS = 30_000_000, 1_200_000
	if f := only(t, Run(w, WireRules()...), CodeClientBackpressure, 1)[0]; f.Evidence["statements"] != 1 {
		t.Errorf("a 1.2 s closed window in a 30 s response: %s", dump([]event.Finding{f}))
	}
}

// Where the join explains the stall, the joined finding is given, once.
func TestWireBackpressureDefersToJoined(t *testing.T) {
	w := slowClientWindow()
	w.Statements = append(w.Statements, unjoin(w.Statements)...)
	f := only(t, Run(w, WatchRules()...), CodeClientBackpressure, 1)[0]
	if f.Evidence["send_stall_us"] == nil {
		t.Errorf("want the joined finding: %s", dump([]event.Finding{f}))
	}
}

func TestWireRetransmits(t *testing.T) {
	var stmts []event.Statement
	for i := range 200 {
		stmts = append(stmts, stmt("c1", 1, "SELECT ?", int64(i)*1000, 10, 0, 100, 0, 50))
	}
	stmts = unjoin(stmts)
	w := &Window{Statements: stmts}
	stmts[7].Retransmits = 1
	only(t, Run(w, WireRules()...), CodeNetwork, 0) // one in 200, fast: rare
	stmts[7].ClientUS = 400_000
	f := only(t, Run(w, WireRules()...), CodeNetwork, 1)[0]
	checkFinding(t, f)
	if f.Evidence["retransmits"] != int64(1) || f.Evidence["seen"] != int64(200) || !strings.Contains(f.Summary, "1 of 200") || f.Severity != event.SeverityInfo {
		t.Errorf("evidence %s", dump([]event.Finding{f}))
	}
	stmts[7].ClientUS = 160
	for i := 0; i < 4; i++ {
		stmts[i].Retransmits = 2
	}
	only(t, Run(w, WireRules()...), CodeNetwork, 1) // 5 in 200: not rare
	for i := 0; i < 20; i++ {
		stmts[i].Retransmits = 1
	}
	if f := only(t, Run(w, WireRules()...), CodeNetwork, 1)[0]; f.Severity != event.SeverityWarning {
		t.Errorf("20 of 200 statements retransmitting: %s, want a warning", f.Severity)
	}
	for i := 0; i < 20; i++ {
		stmts[i].ZeroWindowUS = 1_000
	}
	only(t, Run(w, WireRules()...), CodeNetwork, 0) // resent around a closed window
	// Kept statements stand for more: Seen sets the share.
	w.Seen = 1_000_000
	only(t, Run(w, WireRules()...), CodeNetwork, 0)
}

func TestErrorsByCode(t *testing.T) {
	var stmts []event.Statement
	for i := range 50 {
		s := stmt("c1", 1, "INSERT INTO t VALUES (?)", int64(i)*1000, 10, 0, 100, 0, 50)
		switch {
		case i%10 == 0:
			s.Error = &event.Error{Code: 1062, State: "23000", Msg: "Duplicate entry ? for key ?"}
		case i == 3:
			s.Error = &event.Error{Code: 1064, State: "42000", Msg: "You have an error in your SQL syntax"}
		}
		stmts = append(stmts, s)
	}
	w := &Window{Statements: stmts}
	f := only(t, Run(w, StatementRules()...), CodeErrors, 1)[0]
	checkFinding(t, f)
	by := f.Evidence["by_code"].([]errorTally)
	if f.Evidence["errors"] != 6 || f.Evidence["seen"] != int64(50) || len(by) != 2 || by[0].Code != 1062 || by[0].Count != 5 || by[0].Message != "Duplicate entry ? for key ?" {
		t.Errorf("evidence %s", dump([]event.Finding{f}))
	}
	if !strings.Contains(f.Summary, "6 of 50") || !strings.Contains(f.Summary, "1062 x5 (Duplicate entry ? for key ?), 1064 x1") {
		t.Errorf("summary %q", f.Summary)
	}
	w.Seen = 10_000 // six errors among ten thousand statements: normal life
	only(t, Run(w, StatementRules()...), CodeErrors, 0)
	w.Seen = 0
	w.Statements = stmts[:10] // one error in ten statements: an anecdote
	only(t, Run(w, StatementRules()...), CodeErrors, 0)
}

func TestNotJudgedOnWire(t *testing.T) {
	if got := NotJudgedOnWire(); !slices.Equal(got, []string{CodePoolQueue, CodeServerExec}) {
		t.Errorf("NotJudgedOnWire = %v", got)
	}
	if !strings.Contains(WireOnlyNote(), "POOL_QUEUE") {
		t.Errorf("note %q", WireOnlyNote())
	}
}
