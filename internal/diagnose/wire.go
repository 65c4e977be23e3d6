package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// WireRules are the statement rules that can judge the wire alone: they
// also apply where the server's side is missing (analyze on a capture,
// watch's statements that could not be joined). The other statement rules
// need the server's split and stay silent without it.
func WireRules() []Rule {
	return []Rule{
		{CodeClientBackpressure, checkClientBackpressure},
		{CodeLockWait, checkLockWait},
		{CodeIdleInTransaction, checkIdleInTransaction},
		{CodeNetwork, checkNetwork},
		{CodeErrors, errorsRule},
	}
}

// NotJudgedOnWire lists, for a report made from the wire alone, the
// statement rules that need the server's side and so were not applied.
func NotJudgedOnWire() []string {
	var out []string
	for _, r := range StatementRules() {
		if !slices.ContainsFunc(WireRules(), func(w Rule) bool { return w.Code == r.Code }) {
			out = append(out, r.Code)
		}
	}
	return out
}

// WireOnlyNote says what a report from the wire alone could not judge.
func WireOnlyNote() string {
	return "not judged without the server's side: " + strings.Join(NotJudgedOnWire(), ", ") +
		" (queue and execution time), whether send stalls inflated the server's time, and the server's settings; gapscope watch on the server's host joins both sides"
}

// unjoined returns pointers to the statements the server's side did not
// explain: their wire evidence is all there is.
func unjoined(w *Window) []*event.Statement {
	var out []*event.Statement
	for i := range w.Statements {
		if !w.Statements[i].Joined {
			out = append(out, &w.Statements[i])
		}
	}
	return out
}

// seen is how many statements the window stands for: Window.Seen when the
// caller kept only the statements the rules need, else all of them.
func (w *Window) seen() int64 { return max(w.Seen, int64(len(w.Statements))) }

// wireBackpressure: the client advertised a zero receive window for most of
// a response, or for a second or more of it. Without the server's side this
// names the slow reader but cannot tell how much of the server's time it
// cost: the window also closes after the server has written the whole
// result into its socket buffer.
func wireBackpressure(w *Window) []event.Finding {
	l := w.limits()
	isClosed := func(s *event.Statement) bool {
		return s.HasResponse() && s.ZeroWindowUS >= l.StallUS &&
			(share(s.ZeroWindowUS, s.ClientUS) >= l.Share || s.ZeroWindowUS >= longClosedWindowUS)
	}
	var closed []*event.Statement
	var sum parts
	for _, s := range unjoined(w) {
		if isClosed(s) {
			closed = append(closed, s)
			sum.add(s)
		}
	}
	if len(closed) == 0 {
		return nil
	}
	zw := func(s *event.Statement) int64 { return s.ZeroWindowUS }
	conns := connTallies(closed, isClosed, zw)
	return []event.Finding{{
		Code:     CodeClientBackpressure,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("%d statement(s) on %d connection(s) spent %s of their %s with the client's receive window closed during the response (%s sent): the client reads slowly. Without the server's side gapscope cannot tell whether the server's time was inflated (a closed window also follows a result the server had already written into its socket buffer)",
			len(closed), len(conns), dur(sum.ZeroWindowUS), dur(sum.Client), size(sum.RespBytes)),
		Evidence: map[string]any{
			"statements":     len(closed),
			"zero_window_us": sum.ZeroWindowUS,
			"client_us":      sum.Client,
			"resp_bytes":     sum.RespBytes,
			"server_side":    "not joined: server time and send stall unknown",
			"connections":    conns,
			"examples":       topExamples(closed, zw),
		},
		Fix: backpressureFix,
	}}
}

// longClosedWindowUS: a client that stops reading for this long is slow
// whatever the length of the transfer around it.
const longClosedWindowUS = 1_000_000

// wireRetransmits: statements whose segments were retransmitted. Without
// the server's split this is the wire's own evidence of loss on the path;
// it matters when it is not rare or hit a slow statement. A statement whose
// client closed its window is left to CLIENT_BACKPRESSURE: segments resent
// around a closed window are the sender's answer to it, not loss.
func wireRetransmits(w *Window) []event.Finding {
	l := w.limits()
	hit := func(s *event.Statement) bool { return s.Retransmits > 0 && s.ZeroWindowUS == 0 }
	var lossy []*event.Statement
	var sum parts
	slowHit := false
	for _, s := range unjoined(w) {
		if hit(s) {
			lossy = append(lossy, s)
			sum.add(s)
			slowHit = slowHit || s.ClientUS >= l.SlowUS
		}
	}
	if len(lossy) == 0 || (!slowHit && float64(len(lossy)) < minSlowShare*float64(w.seen())) {
		return nil
	}
	client := func(s *event.Statement) int64 { return s.ClientUS }
	sev := event.SeverityInfo
	if len(lossy) >= minRetransmitting && float64(len(lossy)) >= minSlowShare*float64(w.seen()) {
		sev = event.SeverityWarning // recurring, not one lost segment
	}
	return []event.Finding{{
		Code:     CodeNetwork,
		Severity: sev,
		Summary: fmt.Sprintf("%d of %d statement(s) had %d segment(s) retransmitted (their client time %s): segments were lost or reordered on the path; without the server's side the time this cost is not split from the server's",
			len(lossy), w.seen(), sum.Retransmits, dur(sum.Client)),
		Evidence: map[string]any{
			"statements":  len(lossy),
			"seen":        w.seen(),
			"retransmits": sum.Retransmits,
			"client_us":   sum.Client,
			"req_bytes":   sum.ReqBytes,
			"resp_bytes":  sum.RespBytes,
			"connections": connTallies(lossy, hit, client),
			"examples":    topExamples(lossy, client),
		},
		Fix: "if it recurs, check the link between client and server: interface errors and drops (ip -s link, ethtool -S), MTU mismatches, a congested or lossy hop; a segment resent after a timeout costs at least 200 ms on Linux",
	}}
}

// minRetransmitting is how many statements must see retransmissions for
// them to be more than one lost segment worth a note.
const minRetransmitting = 10

// errorsRule: statements answered with an error, by code, when they are
// not rare. Errors are on the wire whether or not the server's side is
// joined.
func errorsRule(w *Window) []event.Finding {
	var failed []*event.Statement
	for i := range w.Statements {
		if w.Statements[i].Error != nil {
			failed = append(failed, &w.Statements[i])
		}
	}
	seen := w.seen()
	if len(failed) < minErrors || float64(len(failed)) < minErrorShare*float64(seen) {
		return nil
	}
	return []event.Finding{{
		Code:     CodeErrors,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("%d of %d statement(s) (%s) were answered with an error: %s",
			len(failed), seen, pct(share(int64(len(failed)), seen)), describeErrors(errorTallies(failed))),
		Evidence: map[string]any{
			"errors":      len(failed),
			"seen":        seen,
			"error_share": round3(share(int64(len(failed)), seen)),
			"by_code":     errorTallies(failed),
		},
		Fix: "fix the failing statements by code (in the evidence, each with an example): 1062 duplicate key: check before inserting or use INSERT ... ON DUPLICATE KEY UPDATE; 1064 syntax: the application sends malformed SQL; 1146/1054 missing table or column: schema and application disagree; 1205/1213 lock wait timeout or deadlock: retry, and keep transactions short",
	}}
}

// minErrorShare is the share of statements that must fail: a few errors in
// a busy window are the normal life of an application.
const minErrorShare = 0.01

// minErrors is the fewest failed statements worth a finding: in a short
// window one failure is 1% of a hundred statements, an anecdote rather
// than a cause (the statement still carries its error in the events).
const minErrors = 3

// errorTally counts one error code.
type errorTally struct {
	Code    uint16 `json:"code"`
	State   string `json:"state"`
	Count   int    `json:"count"`
	Message string `json:"message"` // the first seen, redacted unless literals were kept
	SQL     string `json:"sql"`
}

// describeErrors names the most frequent codes, each with its first
// message, for the summary; the evidence lists them all.
func describeErrors(by []errorTally) string {
	parts := make([]string, 0, 3)
	for _, e := range by[:min(len(by), 3)] {
		parts = append(parts, fmt.Sprintf("%d x%d (%s)", e.Code, e.Count, e.Message))
	}
	if len(by) > 3 {
		parts = append(parts, fmt.Sprintf("and %d more code(s)", len(by)-3))
	}
	return strings.Join(parts, ", ")
}

func errorTallies(failed []*event.Statement) []errorTally {
	by := map[uint16]*errorTally{}
	for _, s := range failed {
		t := by[s.Error.Code]
		if t == nil {
			t = &errorTally{Code: s.Error.Code, State: s.Error.State, Message: s.Error.Msg, SQL: cmp.Or(s.SQL, s.DigestText)}
			by[s.Error.Code] = t
		}
		t.Count++
	}
	out := make([]errorTally, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b errorTally) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code)) })
	return out[:min(len(out), maxListed)]
}

// WireWindow gathers, statement by statement, what the wire rules need from
// a stream too long to keep whole (a capture of any size): every statement
// with an error, a closed receive window, a retransmission or a lock wait,
// every transaction held open (AddTransaction), and how many statements
// and transactions there were in all. Nothing the rules look at is
// dropped.
type WireWindow struct{ w Window }

// Add counts s and keeps a copy when a wire rule may cite it.
func (c *WireWindow) Add(s *event.Statement) {
	if !s.HasResponse() || s.Why == event.ReplicaStream {
		return // COM_QUIT and friends: nothing answered, nothing to judge; a replica's stream is no statement
	}
	c.w.Seen++
	if s.Error != nil || s.ZeroWindowUS > 0 || s.Retransmits > 0 || s.LockWaitTime() > 0 {
		kept := *s
		kept.ZeroWindows = nil // the rules use the sum
		c.w.Statements = append(c.w.Statements, kept)
	}
}

// AddTransaction counts t and keeps a copy when its application held it
// open long enough for IDLE_IN_TRANSACTION to cite it.
func (c *WireWindow) AddTransaction(t *event.Transaction) {
	c.w.TxnSeen++
	if t.MaxIdleUS >= c.w.limits().TxnIdleUS {
		c.w.Transactions = append(c.w.Transactions, *t)
	}
}

// Findings applies the wire rules to what was gathered.
func (c *WireWindow) Findings() []event.Finding { return Run(&c.w, WireRules()...) }
