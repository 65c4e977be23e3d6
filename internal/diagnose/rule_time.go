package diagnose

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// slowParts returns the joined statements at least l.SlowUS slow at the
// client and their summed parts: SERVER_EXEC and NETWORK explain only slow
// statements, so a healthy window of fast ones stays silent.
func slowParts(w *Window) ([]*event.Statement, parts) {
	l := w.limits()
	var slow []*event.Statement
	var sum parts
	for _, s := range joined(w) {
		if s.ClientUS >= l.SlowUS {
			slow = append(slow, s)
			sum.add(s)
		}
	}
	return slow, sum
}

// slowMatters: slow statements' execution is worth a finding when they are not rare
// outliers of a healthy load (a loaded sysbench host has a few COMMITs
// waiting on fsync past 100 ms, none near a second: docs/performance.md,
// "Slow statements and queue waits of a healthy load"), or when one took a
// second or more.
func slowMatters(slow []*event.Statement, all int) bool {
	var maxUS int64
	for _, s := range slow {
		maxUS = max(maxUS, s.ClientUS)
	}
	return len(slow) > 0 && (float64(len(slow)) >= minSlowShare*float64(all) || maxUS >= 1_000_000)
}

// minSlowShare is the share of statements that must be slow.
const minSlowShare = 0.01

// ownExec is the part of s's execution the server spent working: exec_us
// without the lock wait known inside it.
func ownExec(s *event.Statement) int64 {
	return s.ExecUS - min(max(s.LockWaitTime(), 0), max(s.ExecUS, 0))
}

// mostlyLockWait: at least shareLimit of s's execution was waiting for a
// lock. Such a statement is LOCK_WAIT's to explain: an index or a plan
// would not make it faster.
func mostlyLockWait(s *event.Statement, shareLimit float64) bool {
	return s.LockWaitTime() > 0 && share(s.LockWaitTime(), s.ExecUS) >= shareLimit
}

// checkServerExec fires when slow statements spent most of their time
// executing: the cause is inside the server (plan, I/O), not the network,
// the pool or the client. Known lock waits are not the server's own work:
// a slow statement that mostly waited for a lock is left to LOCK_WAIT, and
// the lock wait of the others does not count as execution.
func checkServerExec(w *Window) []event.Finding {
	l := w.limits()
	all, _ := slowParts(w)
	var slow []*event.Statement
	var sum parts
	var lockUS int64
	left := 0
	for _, s := range all {
		if mostlyLockWait(s, l.Share) {
			left++
			continue
		}
		slow = append(slow, s)
		sum.add(s)
		lockUS += s.ExecUS - ownExec(s)
	}
	work := sum.Exec - lockUS
	if !slowMatters(slow, len(joined(w))) || share(work, sum.Client) < l.Share {
		return nil
	}
	f := event.Finding{
		Code:     CodeServerExec,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("%d slow statement(s) spent %s executing, %s of their %s at the client; the server's own work dominates",
			len(slow), dur(work), pct(share(work, sum.Client)), dur(sum.Client)),
		Evidence: map[string]any{
			"slow_statements": len(slow),
			"exec_us":         sum.Exec,
			"client_us":       sum.Client,
			"exec_share":      round3(share(work, sum.Client)),
			"rows":            sum.Rows,
			"digests":         digestTallies(slow, ownExec),
			"examples":        topExamples(slow, ownExec),
		},
		Fix: "look at the plans of the digests in the evidence while they run (SHOW EXPLAIN FOR <conn_id> on MariaDB, EXPLAIN FOR CONNECTION on MySQL, or gapscope plans) and add the missing index or refresh statistics (ANALYZE TABLE); lock waits gapscope saw are not counted here (LOCK_WAIT), others show in performance_schema.events_waits_history for those threads",
	}
	if lockUS > 0 {
		f.Evidence["lock_wait_us"] = lockUS
		f.Summary += fmt.Sprintf(" (%s of lock wait left out)", dur(lockUS))
	}
	if left > 0 {
		f.Evidence["left_to_lock_wait"] = left
	}
	if sum.RowsUnknown > 0 { // rows is then the others' sum
		f.Evidence["rows_unknown"] = sum.RowsUnknown
	}
	return []event.Finding{f}
}

// checkNetwork fires when slow statements spent most of their time moving
// bytes: the request's own transfer or the delivery of a response the
// server had already written.
func checkNetwork(w *Window) []event.Finding {
	slow, sum := slowParts(w)
	wire := sum.Request + sum.Delivery
	if len(slow) == 0 || share(wire, sum.Client) < w.limits().Share {
		return wireRetransmits(w)
	}
	part, fix := "delivery", "send less: select fewer rows and columns, page large results, enable protocol compression (client --compress / MYSQL_OPT_COMPRESS) on slow links, and keep the application near the server"
	if sum.Request > sum.Delivery {
		part, fix = "request", "send smaller requests: split large multi-row INSERTs and blobs into batches, use prepared statements, enable protocol compression on slow links"
	}
	if sum.ZeroWindowUS >= sum.Delivery/2 && part == "delivery" {
		fix = "the client's receive window was closed for much of the delivery: the client reads slowly (see CLIENT_BACKPRESSURE); " + fix
	}
	if sum.Retransmits > 0 {
		fix = fmt.Sprintf("%d retransmission(s) point at packet loss on the path; check the link (MTU, errors, congestion) first; ", sum.Retransmits) + fix
	}
	wireTime := func(s *event.Statement) int64 { return s.RequestUS + s.DeliveryUS }
	return []event.Finding{{
		Code:     CodeNetwork,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("%d slow statement(s) spent %s on the network (request %s, delivery %s), %s of their %s at the client; %s dominates",
			len(slow), dur(wire), dur(sum.Request), dur(sum.Delivery), pct(share(wire, sum.Client)), dur(sum.Client), part),
		Evidence: map[string]any{
			"slow_statements": len(slow),
			"dominant":        part,
			"request_us":      sum.Request,
			"delivery_us":     sum.Delivery,
			"client_us":       sum.Client,
			"network_share":   round3(share(wire, sum.Client)),
			"req_bytes":       sum.ReqBytes,
			"resp_bytes":      sum.RespBytes,
			"retransmits":     sum.Retransmits,
			"zero_window_us":  sum.ZeroWindowUS,
			"connections":     connTallies(slow, func(*event.Statement) bool { return true }, wireTime),
			"examples":        topExamples(slow, wireTime),
		},
		Fix: fix,
	}}
}
