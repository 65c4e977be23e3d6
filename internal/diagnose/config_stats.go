package diagnose

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// statsCheck is one way InnoDB statistics can drift between executions and
// flip plans (the plan-flip case of docs/field-reports.md: table_scan rows 1 vs 197 million).
type statsCheck struct {
	bad      func(w *Window) bool
	severity event.Severity
	summary  string
	fix      string
}

var statsChecks = []statsCheck{
	{
		bad:      func(w *Window) bool { v, ok := w.Vars["innodb_stats_persistent"]; return ok && !isOn(v) },
		severity: event.SeverityWarning,
		summary:  "innodb_stats_persistent=OFF: InnoDB statistics are transient, re-sampled from %s pages when a table is opened and after 1/16 of it changes, so the same query can get a different plan from one execution to the next",
		fix:      "SET GLOBAL innodb_stats_persistent=ON (and in my.cnf), then ANALYZE TABLE the hot tables",
	},
	{
		bad:      func(w *Window) bool { v, ok := w.Vars["innodb_stats_on_metadata"]; return ok && isOn(v) },
		severity: event.SeverityWarning,
		summary:  "innodb_stats_on_metadata=ON: SHOW TABLE STATUS and information_schema queries re-sample statistics (%s pages), changing plans under running applications",
		fix:      "SET GLOBAL innodb_stats_on_metadata=OFF",
	},
	{
		bad: func(w *Window) bool {
			v, ok := w.Vars["innodb_stats_auto_recalc"]
			return ok && !isOn(v) && isOn(w.Vars["innodb_stats_persistent"])
		},
		severity: event.SeverityInfo,
		summary:  "innodb_stats_auto_recalc=OFF: persistent statistics are refreshed only by ANALYZE TABLE (sample %s pages) and go stale as tables change",
		fix:      "SET GLOBAL innodb_stats_auto_recalc=ON, or schedule ANALYZE TABLE after bulk changes",
	},
	{
		bad: func(w *Window) bool {
			n, ok := w.varInt("innodb_stats_transient_sample_pages")
			return ok && n < 8 && !isOn(w.Vars["innodb_stats_persistent"])
		},
		severity: event.SeverityInfo,
		summary:  "transient statistics sample only %s pages (default 8): estimates on large tables vary widely",
		fix:      "SET GLOBAL innodb_stats_transient_sample_pages=8, better innodb_stats_persistent=ON",
	},
}

// checkTransientStats flags statistics settings that make plans unstable.
func checkTransientStats(w *Window) []event.Finding {
	var out []event.Finding
	pages := w.samplePages()
	for _, c := range statsChecks {
		if !c.bad(w) {
			continue
		}
		out = append(out, event.Finding{
			Code:     CodeTransientStats,
			Severity: c.severity,
			Summary:  fmt.Sprintf(c.summary, pages),
			Evidence: w.statsEvidence(),
			Fix:      c.fix,
		})
	}
	return out
}

// samplePages is the sample size the statistics actually in use take.
func (w *Window) samplePages() string {
	name := "innodb_stats_persistent_sample_pages"
	if !isOn(w.Vars["innodb_stats_persistent"]) {
		name = "innodb_stats_transient_sample_pages"
	}
	if v, ok := w.Vars[name]; ok {
		return v
	}
	return "?"
}

func (w *Window) statsEvidence() map[string]any {
	ev := map[string]any{}
	for _, k := range sortedKeys(w.varsWithPrefix("innodb_stats_")) {
		ev[k] = w.Vars[k]
	}
	if v, ok := w.Vars["use_stat_tables"]; ok {
		ev["use_stat_tables"] = v
	}
	return ev
}
