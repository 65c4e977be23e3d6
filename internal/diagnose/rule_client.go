package diagnose

import (
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// checkClientBackpressure finds statements whose server time was mostly
// spent blocked on a client that did not read (the slow-client case of
// docs/field-reports.md). It relies on send_stall_us, the part of the
// server's time the join attributed to a closed receive window — not on
// zero windows alone, which also appear when the server had long finished.
// Statements the join could not explain get the wire's weaker finding.
func checkClientBackpressure(w *Window) []event.Finding {
	l := w.limits()
	stmts := joined(w)
	isStalled := func(s *event.Statement) bool {
		return s.SendStallUS >= l.StallUS && share(s.SendStallUS, s.ExecUS+s.SendStallUS) >= l.Share
	}
	var stalled []*event.Statement
	var sum parts
	for _, s := range stmts {
		if isStalled(s) {
			stalled = append(stalled, s)
			sum.add(s)
		}
	}
	if len(stalled) == 0 {
		return wireBackpressure(w)
	}
	conns := connTallies(stmts, isStalled, func(s *event.Statement) int64 { return s.SendStallUS })
	server := sum.Exec + sum.Stall
	f := event.Finding{
		Code:     CodeClientBackpressure,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("%d statement(s) on %d connection(s) waited %s for their client to read (%s sent); the slow log and TIMER_WAIT overstate the server's work on them by %s (%s of %s)",
			len(stalled), len(conns), dur(sum.Stall), size(sum.RespBytes), dur(sum.Stall), pct(share(sum.Stall, server)), dur(server)),
		Evidence: map[string]any{
			"stalled_statements": len(stalled),
			"send_stall_us":      sum.Stall,
			"exec_us":            sum.Exec,
			"server_us":          server,
			"overstated_us":      sum.Stall,
			"overstated_share":   round3(share(sum.Stall, server)),
			"resp_bytes":         sum.RespBytes,
			"zero_window_us":     sum.ZeroWindowUS,
			"connections":        conns,
			"examples":           topExamples(stalled, func(s *event.Statement) int64 { return s.SendStallUS }),
		},
		Fix: backpressureFix,
	}
	if kernel, ok := kernelRwndLimited(w, conns); ok {
		f.Evidence["kernel_rwnd_limited_us"] = kernel
		f.Summary += fmt.Sprintf("; the server's kernel agrees: its sockets to these clients were receive-window limited for %s (TCP_INFO)", dur(kernel))
	}
	if v, ok := w.Vars["net_write_timeout"]; ok {
		f.Evidence["net_write_timeout"] = v
	}
	if sum.Stall >= 1_000_000 {
		f.Severity = event.SeverityCritical
	}
	return []event.Finding{f}
}

// backpressureFix is what a slow reader does about it, whether the server's
// side confirmed the cost or not.
const backpressureFix = "read results promptly: fetch rows as they arrive instead of working or sleeping between fetches of an unbuffered (streaming) result, or buffer the whole result client-side; for large results fetch smaller pages (keyset pagination with LIMIT) or fewer columns. While blocked the server holds a thread and the statement's locks"

// kernelRwndLimited sums the kernel's receive-window-limited time of the
// stalled connections' server sockets: independent evidence, from the
// server's own TCP stack, of what the wire showed.
func kernelRwndLimited(w *Window, conns []connTally) (int64, bool) {
	if w.RwndLimitedUS == nil {
		return 0, false
	}
	var sum int64
	found := false
	for _, c := range conns {
		client, _, _ := strings.Cut(c.Conn, ">")
		if v, ok := w.RwndLimitedUS[client]; ok {
			sum, found = sum+v, true
		}
	}
	return sum, found
}
