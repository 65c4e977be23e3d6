package overhead

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
)

// fixes say what to do about each measured cost.
var fixes = map[string]string{
	"ps-default":         "performance_schema's defaults cost this much here; keep it on unless the interval is far below 1 (it is what gapscope and most tools read)",
	"ps-all":             "do not put performance-schema-instrument='%=ON' and every consumer in my.cnf: keep statement instruments and events_statements_history_long, leave wait/synch/% and events_waits_% off, and enable more per investigation",
	"ps-all-runtime":     "enable instruments and consumers per investigation, not all at once; and know that enabling them at runtime understates what the same setting costs in my.cnf (the ps-all row, applied at startup)",
	"innodb-metrics-all": "SET GLOBAL innodb_monitor_disable='all', then enable the counters you read (innodb_monitor_enable takes a name, module_ or pattern)",
	"optimizer-trace":    "SET GLOBAL optimizer_trace='enabled=off'; trace only the session under study (SET SESSION optimizer_trace='enabled=on')",
	"gapscope-watch":     "run gapscope watch for bounded windows (--duration), or server-side only (--no-capture), on a server this busy",
	"ps-off":             "performance_schema off is the cheapest setting; the ratio is to your baseline",
}

// Findings returns an INSTRUMENTATION_COST finding for each configuration
// whose throughput stands below the baseline above the noise.
func Findings(res *Result) []event.Finding {
	var out []event.Finding
	for _, r := range res.Table {
		if x, _, _ := r.Decided(); r.AboveNoise != VerdictYes || x >= 1 {
			continue
		}
		out = append(out, costFinding(res, r))
	}
	return out
}

func costFinding(res *Result, r Row) event.Finding {
	x, lo, hi := r.Decided()
	sev := event.SeverityInfo
	if hi < 0.9 {
		sev = event.SeverityWarning // at least 10% of throughput, surely
	}
	summary := fmt.Sprintf("%s costs %.0f%% of throughput against %s (x%.2f, 95%% interval x%.2f–x%.2f over %d paired rounds)",
		r.Config, (1-x)*100, res.Baseline, x, lo, hi, r.Pairs)
	if r.VerdictOn == VerdictOnCapacity {
		summary = fmt.Sprintf("%s costs %.0f%% of a CPU-bound server's throughput against %s: x%.2f transactions per CPU second "+
			"(95%% interval x%.2f–x%.2f over %d paired rounds; TPS on this host x%.2f, x%.2f–x%.2f)",
			r.Config, (1-x)*100, res.Baseline, x, lo, hi, r.Pairs, r.Ratio, r.RatioLow, r.RatioHigh)
	}
	ev := map[string]any{
		"config": r.Config, "baseline": res.Baseline, "ratio": r.Ratio, "ratio_low": r.RatioLow, "ratio_high": r.RatioHigh,
		"pairs": r.Pairs, "tps_median": r.TPS, "baseline_tps_median": baselineTPS(res), "driver": res.Driver,
		"threads": res.Threads, "tables": res.Tables, "table_size": res.TableSize, "round_s": res.Duration.Seconds(),
		"applied": r.Applied, "verdict_on": r.VerdictOn, "method": Method,
	}
	if r.Capacity > 0 {
		ev["capacity"], ev["capacity_low"], ev["capacity_high"], ev["cpu_per_tx_ms"] = r.Capacity, r.CapacityLow, r.CapacityHigh, r.CPUPerTxMS
	}
	return event.Finding{Code: diagnose.CodeInstrumentationCost, Severity: sev, Summary: summary, Evidence: ev, Fix: fixes[r.Config]}
}

func baselineTPS(res *Result) float64 {
	if len(res.Table) == 0 {
		return 0
	}
	return res.Table[0].TPS
}
