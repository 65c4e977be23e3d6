package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// Costs measured here, cited as evidence so a user can weigh them.
const (
	measuredAllOn = "measured by gapscope overhead on MariaDB 10.11, sysbench oltp_read_write 4 tables x 20k rows, 4 threads, 2 cores: every instrument and consumer on 1400 TPS vs 1963 with default performance_schema (x0.71)"
	measuredTrace = "measured by gapscope overhead on MariaDB 10.11, sysbench oltp_read_write 4 tables x 20k rows, 4 threads, 2 cores: optimizer_trace on in every session 1237 TPS vs 1963 (x0.62)"
)

// perfSchemaOn reports whether performance_schema is on; without the
// variable, consumers having been read means it is.
func (w *Window) perfSchemaOn() bool {
	if v, ok := w.Vars["performance_schema"]; ok {
		return isOn(v)
	}
	return len(w.Consumers) > 0
}

// checkInstrumentationCost flags instrumentation that costs throughput
// everywhere to help in a few sessions (the overhead and plan-flip cases of docs/field-reports.md).
func checkInstrumentationCost(w *Window) []event.Finding {
	var out []event.Finding
	if f := allInstruments(w); f != nil {
		out = append(out, *f)
	}
	if f := optimizerTraceOn(w); f != nil {
		out = append(out, *f)
	}
	return out
}

// allInstruments: the cost measured here is that of every instrument and
// consumer on; the synchronisation waits (mutex, rwlock, cond: timed on
// every lock the server takes) are the costly class. The finding fires when
// they, or every consumer, are on, and says whether the measured cost is
// this configuration's or only an upper bound for it.
func allInstruments(w *Window) *event.Finding {
	if !w.perfSchemaOn() {
		return nil
	}
	var on, total int
	for class, c := range w.Instruments {
		on, total = on+instrumentsOn(class, c), total+c.Total
	}
	synch := w.Instruments["wait/synch"]
	synchOn := synch.Total > 0 && mostlyOn("wait/synch", synch)
	consOn := 0
	for _, v := range w.Consumers {
		if v {
			consOn++
		}
	}
	consAll := len(w.Consumers) >= 5 && consOn == len(w.Consumers)
	if !synchOn && !consAll {
		return nil
	}
	everything := consAll && share(int64(on), int64(total)) >= 0.9
	estimate := "an upper bound: measured with every instrument and consumer on; this configuration has only part of that on, so it costs less, by an amount not measured"
	cost := "with every instrument and consumer on, throughput was measured at x0.71 on an OLTP load; this configuration costs at most that"
	if everything {
		estimate = "measured with this configuration (every instrument and consumer on)"
		cost = "that costs about 29% of throughput on an OLTP load"
	}
	return &event.Finding{
		Code:     CodeInstrumentationCost,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("performance_schema has %d of %d instruments on (synchronisation waits: %d of %d) and %d of %d consumers on; %s",
			on, total, instrumentsOn("wait/synch", synch), synch.Total, consOn, len(w.Consumers), cost),
		Evidence: map[string]any{
			"instruments": w.Instruments, "consumers_on": consOn, "consumers": len(w.Consumers),
			"measured": measuredAllOn, "estimate": estimate,
		},
		Fix: "UPDATE performance_schema.setup_instruments SET ENABLED='NO', TIMED='NO' WHERE NAME LIKE 'wait/synch/%'; UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME LIKE 'events_waits%' OR NAME LIKE 'events_stages_history%'; keep statement instruments and events_statements_history_long (what gapscope reads); enable the rest per investigation",
	}
}

// mostlyOn: at least nine in ten instruments on (a few stay off on
// servers that call themselves "all on").
func mostlyOn(class string, c collect.Instruments) bool {
	return share(int64(instrumentsOn(class, c)), int64(c.Total)) >= 0.9
}

// instrumentsOn counts the instruments of a class that are enabled and
// timed; memory instruments count nothing in time, so enabled is on.
func instrumentsOn(class string, c collect.Instruments) int {
	if class == "memory" {
		return c.Enabled
	}
	return min(c.Enabled, c.Timed)
}

// optimizerTraceOn: SET GLOBAL optimizer_trace is inherited by every new
// session, so every statement pays for a trace nobody reads.
func optimizerTraceOn(w *Window) *event.Finding {
	v := strings.ToLower(w.Vars["optimizer_trace"])
	if !strings.Contains(v, "enabled=on") {
		return nil
	}
	return &event.Finding{
		Code:     CodeInstrumentationCost,
		Severity: event.SeverityWarning,
		Summary:  "optimizer_trace is enabled globally, so every new session traces every statement; that costs about 38% of throughput on an OLTP load",
		Evidence: map[string]any{"optimizer_trace": w.Vars["optimizer_trace"], "optimizer_trace_max_mem_size": w.Vars["optimizer_trace_max_mem_size"], "measured": measuredTrace},
		Fix:      "SET GLOBAL optimizer_trace='enabled=off'; trace only the session under study (SET SESSION optimizer_trace='enabled=on'), or let gapscope plans capture the plan of slow executions",
	}
}

// neededStatementConsumers are what gapscope's statement cursor reads:
// events_statements_history_long, filled only while the consumers above it
// in this list are on (the consumer hierarchy); statements_digest gives the
// digests that group statements.
var neededStatementConsumers = []string{"global_instrumentation", "thread_instrumentation",
	"events_statements_current", "events_statements_history_long", "statements_digest"}

// threadHistoryConsumer records the last statements of each thread, where
// watch reads the statements that stand out (history_long turns over too
// fast on a busy server).
const threadHistoryConsumer = "events_statements_history"

// checkMissingConsumers says which of the consumers and statement
// instruments gapscope joins are off, naming exactly those in the fix
// (performance_schema itself off is PS_OFF's).
func checkMissingConsumers(w *Window) []event.Finding {
	if !w.perfSchemaOn() || len(w.Consumers) == 0 {
		return nil
	}
	missing := consumersOff(w, neededStatementConsumers)
	missing = append(missing, consumersOff(w, []string{threadHistoryConsumer})...)
	stmt, read := w.Instruments["statement"]
	instrOff := read && stmt.Total > 0 && !(stmt.Enabled == stmt.Total && stmt.Timed == stmt.Total)
	if len(missing) == 0 && !instrOff {
		return nil
	}
	return []event.Finding{missingFinding(missing, stmt, instrOff)}
}

func missingFinding(missing []string, stmt collect.Instruments, instrOff bool) event.Finding {
	var fix []string
	if len(missing) > 0 {
		fix = append(fix, enableConsumersFix(missing)+";")
	}
	if instrOff {
		fix = append(fix, "UPDATE performance_schema.setup_instruments SET ENABLED='YES', TIMED='YES' WHERE NAME LIKE 'statement/%'; across restarts: performance-schema-instrument='statement/%=ON' under [mysqld]")
	}
	sev := event.SeverityWarning
	if slices.ContainsFunc(missing, func(c string) bool { return c != "statements_digest" && c != threadHistoryConsumer }) || (stmt.Total > 0 && stmt.Enabled == 0) {
		sev = event.SeverityCritical // no statement reaches the history: nothing to join
	}
	summary := "performance_schema does not record what gapscope joins: consumers off: " + orNone(missing)
	if stmt.Total > 0 {
		summary += fmt.Sprintf("; statement instruments enabled: %d of %d, timed: %d", stmt.Enabled, stmt.Total, stmt.Timed)
	}
	if slices.Contains(missing, threadHistoryConsumer) {
		summary += "; without " + threadHistoryConsumer + " (the last 10 statements of each thread) watch cannot join the slow statements of busy connections once history_long has turned over"
	}
	return event.Finding{
		Code:     CodeMissingConsumers,
		Severity: sev,
		Summary:  summary,
		Evidence: map[string]any{"missing_consumers": missing, "statement_instruments": stmt},
		Fix:      strings.TrimSuffix(strings.Join(fix, " "), ";"),
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
