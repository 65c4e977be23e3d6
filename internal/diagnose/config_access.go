package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// The rules below judge what the server offers gapscope itself: which
// performance_schema consumers, instruments and timers it fills, whether the
// thread pool's tables can be read, and gapscope's own grants. They need
// Window.Server (what collect.GatherCapabilities read) and stay silent
// without it.

// checkPerformanceSchemaOff: without performance_schema nothing server-side
// can be joined; the variable is static, so the fix is a restart.
func checkPerformanceSchemaOff(w *Window) []event.Finding {
	v, known := w.Vars["performance_schema"]
	off := known && !isOn(v)
	if w.Server != nil {
		off = !w.Server.PerformanceSchema
	}
	if !off {
		return nil
	}
	return []event.Finding{{
		Code: CodePerformanceSchemaOff, Severity: event.SeverityCritical,
		Summary:  "performance_schema is OFF: no server-side statement times, so gapscope sees only the wire and cannot split queue, execution and send-stall time",
		Evidence: map[string]any{"performance_schema": "OFF"},
		// global_instrumentation, thread_instrumentation and statements_digest
		// are on by default; the statement consumers are not.
		Fix: "add under [mysqld]: performance_schema=ON, " + consumerOptions([]string{"events_statements_current", "events_statements_history_long"}) +
			"; restart (performance_schema cannot be turned on at runtime); until then run watch with --iface for the wire alone",
	}}
}

// consumerOptions spells consumers as the my.cnf options that enable them.
func consumerOptions(names []string) string {
	opts := make([]string, len(names))
	for i, n := range names {
		opts[i] = "performance-schema-consumer-" + strings.ReplaceAll(n, "_", "-") + "=ON"
	}
	return strings.Join(opts, ", ")
}

// consumersOff returns the consumers of names that w shows off, in order.
func consumersOff(w *Window, names []string) []string {
	var off []string
	for _, n := range names {
		if !w.Consumers[n] {
			off = append(off, n)
		}
	}
	return off
}

// enableConsumersFix is the runtime SQL and the my.cnf options for exactly
// the consumers named.
func enableConsumersFix(off []string) string {
	return fmt.Sprintf("UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN ('%s'); to keep it after a restart add under [mysqld]: %s",
		strings.Join(off, "','"), consumerOptions(off))
}

// consumerRule reports the consumers of one area that are off.
func consumerRule(code string, sev event.Severity, why string, names []string) func(*Window) []event.Finding {
	return func(w *Window) []event.Finding {
		if w.Server == nil || !w.Server.PerformanceSchema || len(w.Consumers) == 0 {
			return nil
		}
		off := consumersOff(w, names)
		if len(off) == 0 {
			return nil
		}
		return []event.Finding{{
			Code: code, Severity: sev,
			Summary:  fmt.Sprintf("consumers off: %s; %s", strings.Join(off, ", "), why),
			Evidence: map[string]any{"consumers_off": off},
			Fix:      enableConsumersFix(off),
		}}
	}
}

var (
	checkStageConsumers = consumerRule(CodeStageHistoryOff, event.SeverityWarning,
		"stages (e.g. 'Sending data') show where a statement spent its server time, including blocked sends",
		[]string{"events_stages_current", "events_stages_history_long"})
	checkWaitConsumers = consumerRule(CodeWaitHistoryOff, event.SeverityWarning,
		"socket waits show the server blocked on a client that does not read",
		[]string{"events_waits_current", "events_waits_history_long"})
)

// usedInstrumentClasses are the instrument classes gapscope reads besides
// statements (MISSING_CONSUMERS covers those).
var usedInstrumentClasses = []string{"stage", "wait/io/socket"}

func checkInstrumentsOff(w *Window) []event.Finding {
	if w.Server == nil || !w.Server.PerformanceSchema {
		return nil
	}
	var out []event.Finding
	for _, class := range usedInstrumentClasses {
		n, ok := w.Instruments[class]
		if !ok || (n.Enabled == n.Total && n.Timed == n.Total) {
			continue
		}
		p := class + "/%"
		out = append(out, event.Finding{
			Code: CodeInstrumentsOff, Severity: event.SeverityWarning,
			Summary:  fmt.Sprintf("%d of %d %s instruments enabled, %d timed", n.Enabled, n.Total, p, n.Timed),
			Evidence: map[string]any{"pattern": p, "total": n.Total, "enabled": n.Enabled, "timed": n.Timed},
			Fix: fmt.Sprintf("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME LIKE '%s'; across restarts: performance-schema-instrument='%s=ON' under [mysqld]",
				p, p),
		})
	}
	return out
}

func checkWaitTimer(w *Window) []event.Finding {
	if w.Server == nil || !w.Server.PerformanceSchema || w.Server.Timers["wait"] != "CYCLE" {
		return nil
	}
	return []event.Finding{{
		Code: CodeWaitTimerCycle, Severity: event.SeverityWarning,
		Summary:  "waits are timed with the CYCLE timer: its own origin and a ~0.1% rate error, so waits do not line up with statements",
		Evidence: map[string]any{"timers": w.Server.Timers},
		Fix:      "UPDATE performance_schema.setup_timers SET TIMER_NAME = 'NANOSECOND' WHERE NAME = 'wait' (gapscope does this itself when it may UPDATE setup_timers)",
	}}
}

func checkThreadPoolOff(w *Window) []event.Finding {
	s := w.Server
	if s == nil || s.ThreadPool || !s.MariaDB() {
		return nil
	}
	return []event.Finding{{Code: CodeThreadPoolOff, Severity: event.SeverityInfo,
		Summary:  "one thread per connection: no thread-pool queueing to measure",
		Evidence: map[string]any{"thread_handling": s.ThreadHandling},
		Fix:      "nothing to fix; with thread_handling=pool-of-threads, gapscope measures the queue wait the server cannot see"}}
}

func checkThreadPoolTablesMissing(w *Window) []event.Finding {
	s := w.Server
	if s == nil || !s.ThreadPool || !s.MariaDB() || s.ThreadPoolTables {
		return nil
	}
	return []event.Finding{{Code: CodeThreadPoolTablesMissing, Severity: event.SeverityWarning,
		Summary:  "thread pool on, but information_schema.THREAD_POOL_* tables are absent (MariaDB < 10.5?)",
		Evidence: map[string]any{"version": s.Version},
		Fix:      "upgrade to MariaDB 10.5+; gapscope still measures the queue wait on the wire"}}
}

func checkThreadPoolTablesUnreadable(w *Window) []event.Finding {
	if w.Server == nil || !w.Server.ThreadPool {
		return nil
	}
	var unreadable []string
	for _, t := range collect.PoolTables {
		if e, ok := w.PoolTables[t]; ok && e != "" {
			unreadable = append(unreadable, t+": "+e)
		}
	}
	if len(unreadable) == 0 {
		return nil
	}
	return []event.Finding{{Code: CodeThreadPoolTablesUnreadable, Severity: event.SeverityWarning,
		Summary:  "thread-pool tables cannot be read",
		Evidence: map[string]any{"errors": unreadable},
		Fix:      "GRANT PROCESS ON *.* TO " + w.account()}}
}

func checkThreadPoolNoExtraPort(w *Window) []event.Finding {
	s := w.Server
	if s == nil || !s.ThreadPool || s.ExtraPort != 0 {
		return nil
	}
	return []event.Finding{{Code: CodeThreadPoolNoExtraPort, Severity: event.SeverityInfo,
		Summary:  "thread pool on without extra_port: gapscope's own reads queue in the same pool they measure",
		Evidence: map[string]any{"thread_handling": s.ThreadHandling, "thread_pool_size": s.ThreadPoolSize},
		Fix:      "add under [mysqld]: extra_port=3307 (and extra_max_connections=10); point gapscope's --dsn at that port"}}
}

// account is gapscope's account quoted for a GRANT, or a placeholder.
func (w *Window) account() string {
	if w.Server == nil {
		return "<gapscope user>"
	}
	u, h, ok := strings.Cut(w.Server.CurrentUser, "@")
	if !ok {
		return "<gapscope user>"
	}
	return "'" + u + "'@'" + h + "'"
}

func checkGrantProcessMissing(w *Window) []event.Finding {
	if w.Server == nil || hasGrant(grantSet(w.Grants), "PROCESS", "*.*") {
		return nil
	}
	return []event.Finding{{Code: CodeGrantProcessMissing, Severity: event.SeverityWarning,
		Summary:  "no PROCESS privilege: processlist shows only gapscope's own connections and thread-pool tables may be unreadable",
		Evidence: map[string]any{"grants": redactGrants(w.Grants)}, Fix: "GRANT PROCESS ON *.* TO " + w.account()}}
}

func checkGrantPSSelectMissing(w *Window) []event.Finding {
	if w.Server == nil || hasGrant(grantSet(w.Grants), "SELECT", "*.*", "performance_schema.*") {
		return nil
	}
	return []event.Finding{{Code: CodeGrantPSSelectMissing, Severity: event.SeverityCritical,
		Summary:  "no SELECT on performance_schema: no server-side statements",
		Evidence: map[string]any{"grants": redactGrants(w.Grants)}, Fix: "GRANT SELECT ON performance_schema.* TO " + w.account()}}
}

// grantSet parses SHOW GRANTS into privilege -> objects.
func grantSet(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		m := grantRE.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		obj := strings.ReplaceAll(m[2], "`", "")
		for _, p := range strings.Split(m[1], ",") {
			p = strings.ToUpper(strings.TrimSpace(p))
			if i := strings.IndexByte(p, '('); i > 0 { // column grants: SELECT (a, b)
				p = strings.TrimSpace(p[:i])
			}
			out[p] = append(out[p], obj)
		}
	}
	return out
}

func hasGrant(g map[string][]string, priv string, objects ...string) bool {
	for _, p := range []string{priv, "ALL PRIVILEGES", "ALL"} {
		for _, o := range g[p] {
			if slices.Contains(objects, strings.ToLower(o)) {
				return true
			}
		}
	}
	return false
}

// grantSecret matches what SHOW GRANTS prints of an account's credentials:
// MariaDB's IDENTIFIED BY PASSWORD '<hash>' and IDENTIFIED VIA plugin
// USING '<hash>', MySQL's AS '<hash>'.
var grantSecret = regexp.MustCompile(`(?i)(\bIDENTIFIED\s+(?:BY\s+PASSWORD|VIA\s+\S+\s+USING|WITH\s+\S+\s+AS|BY)\s+)'(?:[^'\\]|\\.|'')*'`)

// redactGrants keeps password hashes out of evidence: a hash is a
// credential (it can be cracked offline, and some plugins accept it).
func redactGrants(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = grantSecret.ReplaceAllString(l, "${1}'<redacted>'")
	}
	return out
}
