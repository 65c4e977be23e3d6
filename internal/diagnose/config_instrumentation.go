package diagnose

import (
	"fmt"
	"strings"

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
// everywhere to help in a few sessions (seeds 001 and 003).
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

// allInstruments: waits (mutex, rwlock, cond) are the costly class; every
// instrument on, or every consumer on, is what the measurement covers.
func allInstruments(w *Window) *event.Finding {
	if !w.perfSchemaOn() {
		return nil
	}
	var on, total int
	for _, c := range w.Instruments {
		on, total = on+c[0], total+c[1]
	}
	waits := w.Instruments["wait"]
	instrAll := total > 0 && (share(int64(on), int64(total)) >= 0.9 || (waits[1] > 0 && share(int64(waits[0]), int64(waits[1])) >= 0.9))
	consOn := 0
	for _, v := range w.Consumers {
		if v {
			consOn++
		}
	}
	consAll := len(w.Consumers) >= 5 && consOn == len(w.Consumers)
	if !instrAll && !consAll {
		return nil
	}
	return &event.Finding{
		Code:     CodeInstrumentationCost,
		Severity: event.SeverityWarning,
		Summary:  fmt.Sprintf("performance_schema has %d of %d instruments and %d of %d consumers on; that costs about 29%% of throughput on an OLTP load", on, total, consOn, len(w.Consumers)),
		Evidence: map[string]any{
			"instruments": w.Instruments, "consumers_on": consOn, "consumers": len(w.Consumers),
			"measured": measuredAllOn,
		},
		Fix: "UPDATE performance_schema.setup_instruments SET ENABLED='NO', TIMED='NO' WHERE NAME LIKE 'wait/synch/%'; UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME LIKE 'events_waits%' OR NAME LIKE 'events_stages_history%'; keep statement instruments and events_statements_history_long (what gapscope reads); enable the rest per investigation",
	}
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

// requiredConsumers are what gapscope's statement cursor needs; a consumer
// only records when the ones above it in this list are on too.
var requiredConsumers = []string{"global_instrumentation", "thread_instrumentation", "events_statements_current", "statements_digest"}

// checkMissingConsumers says what gapscope cannot see and gives the SQL (or
// the option, when performance_schema itself is off) to fix it.
func checkMissingConsumers(w *Window) []event.Finding {
	if v, ok := w.Vars["performance_schema"]; ok && !isOn(v) {
		return []event.Finding{{
			Code:     CodeMissingConsumers,
			Severity: event.SeverityWarning,
			Summary:  "performance_schema is OFF: gapscope sees only the wire and cannot split queue, execution and send-stall time",
			Evidence: map[string]any{"performance_schema": v},
			Fix:      "add performance_schema=ON and performance-schema-consumer-events-statements-history-long=ON under [mysqld] in my.cnf and restart (it cannot be turned on at runtime); run watch with --iface meanwhile",
		}}
	}
	if len(w.Consumers) == 0 {
		return nil
	}
	missing := missingConsumers(w.Consumers)
	stmt := w.Instruments["statement"]
	instrOff := stmt[1] > 0 && stmt[0] < stmt[1]
	if len(missing) == 0 && !instrOff {
		return nil
	}
	return []event.Finding{missingFinding(missing, stmt, instrOff)}
}

func missingConsumers(c map[string]bool) []string {
	var missing []string
	for _, name := range requiredConsumers {
		if !c[name] {
			missing = append(missing, name)
		}
	}
	if !c["events_statements_history_long"] && !c["events_statements_history"] {
		missing = append(missing, "events_statements_history_long")
	}
	return missing
}

func missingFinding(missing []string, stmt [2]int, instrOff bool) event.Finding {
	var fix []string
	if len(missing) > 0 {
		fix = append(fix, fmt.Sprintf("UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN ('%s');", strings.Join(missing, "','")))
	}
	if instrOff {
		fix = append(fix, "UPDATE performance_schema.setup_instruments SET ENABLED='YES', TIMED='YES' WHERE NAME LIKE 'statement/%';")
	}
	fix = append(fix, "to keep it after a restart add performance-schema-consumer-events-statements-history-long=ON under [mysqld]")
	return event.Finding{
		Code:     CodeMissingConsumers,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("performance_schema does not record what gapscope joins: consumers off: %s; statement instruments on: %d of %d",
			strings.Join(missing, ", "), stmt[0], stmt[1]),
		Evidence: map[string]any{"missing_consumers": missing, "statement_instruments": stmt},
		Fix:      strings.Join(fix, " "),
	}
}
