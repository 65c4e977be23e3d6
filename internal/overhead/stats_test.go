package overhead

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// rotation builds synthetic rounds: tps[c][r] for config c in rotation r.
func rotation(names []string, tps [][]float64) []Round {
	var out []Round
	for r := range tps[0] {
		for c, name := range names {
			if tps[c][r] == 0 {
				continue // a missing round (interrupted run)
			}
			out = append(out, Round{Config: name, Position: c, Index: r, TPS: tps[c][r], QPS: 20 * tps[c][r],
				LatAvg: time.Duration(float64(time.Second) * 4 / tps[c][r]), LatP95: time.Duration(r+1) * time.Millisecond})
		}
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestRatioIntervalKnownValues(t *testing.T) {
	// log ratios ln(0.7), ln(0.72), ln(0.68): mean and sd computed by hand.
	ratios := []float64{0.7, 0.72, 0.68}
	mean, lo, hi := RatioInterval(ratios)
	logs := []float64{math.Log(0.7), math.Log(0.72), math.Log(0.68)}
	m := (logs[0] + logs[1] + logs[2]) / 3
	var ss float64
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	half := 4.303 * math.Sqrt(ss/2) / math.Sqrt(3)
	if !near(mean, math.Exp(m), 1e-12) || !near(lo, math.Exp(m-half), 1e-12) || !near(hi, math.Exp(m+half), 1e-12) {
		t.Fatalf("RatioInterval = %v [%v, %v], want %v [%v, %v]", mean, lo, hi, math.Exp(m), math.Exp(m-half), math.Exp(m+half))
	}
	if !(lo < mean && mean < hi && hi < 1) {
		t.Fatalf("interval [%v, %v] around %v should lie below 1", lo, hi, mean)
	}
}

func TestRatioIntervalDegenerate(t *testing.T) {
	if m, lo, hi := RatioInterval(nil); m != 0 || lo != 0 || hi != 0 {
		t.Errorf("no ratios: %v %v %v", m, lo, hi)
	}
	if m, lo, hi := RatioInterval([]float64{0.8}); !near(m, 0.8, 1e-12) || lo != 0 || hi != 0 {
		t.Errorf("one ratio: %v %v %v, want 0.8 with no interval", m, lo, hi)
	}
	// Identical ratios: zero spread, the interval collapses onto the mean.
	if m, lo, hi := RatioInterval([]float64{0.9, 0.9, 0.9}); !near(m, 0.9, 1e-12) || !near(lo, 0.9, 1e-12) || !near(hi, 0.9, 1e-12) {
		t.Errorf("constant ratios: %v [%v, %v]", m, lo, hi)
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		name   string
		lo, hi float64
		pairs  int
		want   string
	}{
		{"cost above noise", 0.68, 0.74, 3, VerdictYes},
		{"faster above noise", 1.02, 1.10, 3, VerdictYes},
		{"tight around 1", 0.97, 1.02, 5, VerdictNo},
		{"edge of resolution", 0.95, 1.05, 5, VerdictNo},
		{"wide around 1", 0.80, 1.15, 3, VerdictUnknown},
		{"one pair", 0.5, 0.6, 1, VerdictUnknown},
		{"no interval", 0, 0, 3, VerdictUnknown},
	}
	for _, c := range cases {
		if got := Verdict(c.lo, c.hi, c.pairs, 0.05); got != c.want {
			t.Errorf("%s: Verdict(%v, %v, %d) = %q, want %q", c.name, c.lo, c.hi, c.pairs, got, c.want)
		}
	}
}

func TestTQuantile(t *testing.T) {
	for df, want := range map[int]float64{1: 12.706, 2: 4.303, 5: 2.571, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980, 100000: 1.960} {
		if got := TQuantile975(df); !near(got, want, 0.0015) {
			t.Errorf("t(0.975, %d) = %.4f, want %.3f", df, got, want)
		}
	}
	if !math.IsInf(TQuantile975(0), 1) {
		t.Error("df 0 should give +Inf")
	}
}

func TestSummarizeSeedLikeTable(t *testing.T) {
	names := []string{"ps-off", "ps-default", "ps-all", "optimizer-trace"}
	// Drift: every config gets slower over the rotations by the same factor,
	// which the pairing cancels. ps-default is noise around 1; ps-all x0.71
	// and optimizer-trace x0.62 with small per-pair noise.
	tps := [][]float64{
		{2000, 1800, 1600, 1900},
		{1980, 1830, 1570, 1910},
		{1420, 1280, 1140, 1345},
		{1240, 1115, 995, 1180},
	}
	rows := Summarize(rotation(names, tps), names, 0.05)
	if len(rows) != len(names) {
		t.Fatalf("%d rows, want %d", len(rows), len(names))
	}
	base := rows[0]
	if base.AboveNoise != VerdictBaseline || base.Ratio != 1 || base.Rounds != 4 {
		t.Errorf("baseline row %+v", base)
	}
	if base.TPS != 1850 || base.TPSMin != 1600 || base.TPSMax != 2000 || base.QPS != 37000 {
		t.Errorf("baseline median/min/max/qps = %v/%v/%v/%v, want 1850/1600/2000/37000", base.TPS, base.TPSMin, base.TPSMax, base.QPS)
	}
	if base.LatP95MS != 2.5 {
		t.Errorf("median p95 = %v ms, want 2.5", base.LatP95MS)
	}
	if r := rows[1]; r.AboveNoise != VerdictNo || r.RatioLow >= 1 || r.RatioHigh <= 1 {
		t.Errorf("ps-default: %+v, want an interval around 1 within 5%%", r)
	}
	for _, r := range rows[2:] {
		if r.AboveNoise != VerdictYes || r.RatioHigh >= 1 || r.Pairs != 4 {
			t.Errorf("%s: %+v, want a cost above noise from 4 pairs", r.Config, r)
		}
	}
	if !near(rows[2].Ratio, 0.71, 0.01) || !near(rows[3].Ratio, 0.62, 0.01) {
		t.Errorf("ratios %.3f, %.3f; want ~0.71, ~0.62", rows[2].Ratio, rows[3].Ratio)
	}
}

func TestSummarizeNoisyAndMissingRounds(t *testing.T) {
	names := []string{"ps-default", "gapscope-watch"}
	// ±20% noise with a 3% true cost cannot be told apart in 3 rounds.
	noisy := [][]float64{{2000, 1600, 2100}, {1650, 1900, 1700}}
	rows := Summarize(rotation(names, noisy), names, 0.05)
	if rows[1].AboveNoise != VerdictUnknown {
		t.Errorf("noisy rounds: %+v, want %q", rows[1], VerdictUnknown)
	}
	// An interrupted run: the last rotation has no baseline, so only two
	// pairs exist although the config has three rounds.
	partial := [][]float64{{2000, 2010, 0}, {1500, 1490, 1480}}
	rows = Summarize(rotation(names, partial), names, 0.05)
	if rows[1].Rounds != 3 || rows[1].Pairs != 2 {
		t.Errorf("partial: rounds %d pairs %d, want 3 and 2", rows[1].Rounds, rows[1].Pairs)
	}
	// A configuration that never ran has an empty row, no verdict.
	rows = Summarize(nil, names, 0.05)
	if rows[1].Rounds != 0 || rows[1].AboveNoise != VerdictUnknown || rows[1].Ratio != 0 {
		t.Errorf("empty: %+v", rows[1])
	}
}

func TestParseConfigs(t *testing.T) {
	cs, err := ParseConfigs("ps-off, ps-default,ps-all,ps-all-runtime,innodb-metrics-all,optimizer-trace,gapscope-watch")
	if err != nil || len(cs) != 7 || cs[0].Name != "ps-off" {
		t.Fatalf("ParseConfigs: %v %v", Names(cs), err)
	}
	for _, c := range cs {
		if c.Apply == nil || c.Restore == nil || c.Summary == "" {
			t.Errorf("%s: incomplete config", c.Name)
		}
	}
	for _, bad := range []string{"ps-off", "ps-off,nope", "ps-all,ps-all", ""} {
		if _, err := ParseConfigs(bad); err == nil {
			t.Errorf("ParseConfigs(%q) accepted", bad)
		}
	}
	off, _ := lookup(Configs(), "ps-off")
	all, _ := lookup(Configs(), "ps-all")
	trace, _ := lookup(Configs(), "optimizer-trace")
	if !off.NeedsRestart(true) || off.NeedsRestart(false) || !all.NeedsRestart(false) || all.NeedsRestart(true) || trace.NeedsRestart(true) || trace.NeedsRestart(false) {
		t.Error("NeedsRestart disagrees with the configs' performance_schema needs")
	}
}

func TestSettingsDiff(t *testing.T) {
	a := Settings{PerfSchema: true, Instruments: map[string]Instrument{"wait/x": {}, "statement/y": {true, true}},
		Consumers: map[string]bool{"events_statements_current": false}, Timers: map[string]string{"wait": "CYCLE"},
		InnoDBMetrics: []string{"a", "b"}, OptimizerTrace: "enabled=off"}
	if d := a.Diff(a); len(d) != 0 {
		t.Fatalf("identical settings differ: %v", d)
	}
	b := a
	b.Instruments = map[string]Instrument{"wait/x": {true, false}, "statement/y": {true, true}}
	b.Consumers = map[string]bool{"events_statements_current": true}
	b.Timers = map[string]string{"wait": "NANOSECOND"}
	b.InnoDBMetrics = []string{"a"}
	b.OptimizerTrace = "enabled=on"
	if d := a.Diff(b); len(d) != 5 {
		t.Fatalf("Diff = %v, want 5 lines", d)
	}
}

func TestFindingsOnlyForCostsAboveNoise(t *testing.T) {
	names := []string{"ps-off", "ps-default", "ps-all", "ps-all-runtime"}
	tps := [][]float64{
		{2000, 1800, 1600},
		{1980, 1830, 1570}, // noise
		{1420, 1280, 1140}, // cost
		{2300, 2070, 1840}, // faster, above noise: not a cost
	}
	res := &Result{Baseline: "ps-off", Driver: "builtin", Table: Summarize(rotation(names, tps), names, 0.05)}
	f := Findings(res)
	if len(f) != 1 {
		t.Fatalf("%d findings, want 1: %+v", len(f), f)
	}
	if f[0].Code != "INSTRUMENTATION_COST" || f[0].Evidence["config"] != "ps-all" || f[0].Fix == "" || f[0].Severity != "warning" {
		t.Fatalf("finding %+v", f[0])
	}
	if r := f[0].Evidence["ratio"].(float64); r > 0.72 || r < 0.70 {
		t.Fatalf("evidence ratio %v", r)
	}
}

// TestCapacityDecidesWhereCPUIsMeasured: on a shared host TPS swings with
// other load while CPU per transaction holds; where every pair has its CPU
// the verdict is decided on transactions per CPU second, and the finding
// says so with both intervals. Rounds without CPU (a server that is not a
// sandbox, or a store written before CPU was measured) fall back to TPS.
func TestCapacityDecidesWhereCPUIsMeasured(t *testing.T) {
	names := []string{"ps-off", "ps-all"}
	tps := [][]float64{{2000, 1100, 1700, 900}, {1400, 1500, 1000, 1000}}       // x0.70-x1.36: undecided
	cpu := [][]time.Duration{{1000, 1010, 990, 1005}, {1120, 1130, 1110, 1135}} // µs per transaction: x0.89
	with := rotation(names, tps)
	for i := range with {
		with[i].CPUPerTx = cpu[with[i].Position][with[i].Index] * time.Microsecond
	}
	rows := Summarize(with, names, 0.05)
	r := rows[1]
	if r.VerdictOn != VerdictOnCapacity || r.AboveNoise != VerdictYes || !near(r.Capacity, 0.89, 0.01) || r.CapacityHigh >= 0.92 || r.CPUPerTxMS != 1.125 {
		t.Fatalf("with CPU: %+v", r)
	}
	if rows[0].Capacity != 1 || rows[0].CPUPerTxMS != 1.0025 {
		t.Errorf("baseline row %+v", rows[0])
	}
	if _, lo, _ := RatioInterval([]float64{1.4 / 2, 1.5 / 1.1, 1 / 1.7, 1 / 0.9}); r.RatioLow != lo {
		t.Errorf("TPS interval x%.3f–x%.3f, want it kept beside capacity (low %.3f)", r.RatioLow, r.RatioHigh, lo)
	}
	f := Findings(&Result{Baseline: "ps-off", Table: rows})
	if len(f) != 1 || f[0].Evidence["verdict_on"] != VerdictOnCapacity || f[0].Evidence["capacity"] != r.Capacity ||
		!strings.Contains(f[0].Summary, "transactions per CPU second") {
		t.Fatalf("findings %+v", f)
	}
	rows = Summarize(rotation(names, tps), names, 0.05)
	if rows[1].VerdictOn != VerdictOnTPS || rows[1].AboveNoise != VerdictUnknown || rows[1].Capacity != 0 {
		t.Errorf("without CPU: %+v", rows[1])
	}
}

// TestPairsToDecide: a clear cost with a moderate spread needs a few more
// pairs; a ratio near 1 with the same spread needs more than a short run
// has, and is reported hopeless; a row without a spread keeps running.
func TestPairsToDecide(t *testing.T) {
	// x0.929 [x0.849–x1.016] over 5 pairs (lab run, ps-all): sd of the log
	// ratios 0.072, decided at 7 pairs if they hold.
	cost := Row{Config: "ps-all", Pairs: 5, Ratio: 0.929, RatioLow: 0.849, RatioHigh: 1.016, VerdictOn: VerdictOnTPS}
	if got := PairsToDecide(cost, 0.05, 10); got != 7 {
		t.Errorf("cost: %d pairs, want 7", got)
	}
	if got := PairsToDecide(cost, 0.05, 1); got != -1 {
		t.Errorf("cost with one more pair: %d, want -1", got)
	}
	// x0.998 [x0.915–x1.090] over 5 pairs (ps-default): 'no' needs the
	// interval within ±5%, about 10 pairs.
	flat := Row{Config: "ps-default", Pairs: 5, Capacity: 0.998, CapacityLow: 0.915, CapacityHigh: 1.090, VerdictOn: VerdictOnCapacity}
	if got := PairsToDecide(flat, 0.05, 3); got != -1 {
		t.Errorf("flat within 3 more: %d, want -1", got)
	}
	if got := PairsToDecide(flat, 0.05, 20); got < 9 || got > 12 {
		t.Errorf("flat: %d pairs, want about 10", got)
	}
	if got := PairsToDecide(Row{Pairs: 1, Ratio: 0.9}, 0.05, 5); got != 0 {
		t.Errorf("one pair: %d, want 0 (no spread to go by)", got)
	}
}

// TestSpeedupOverPSOffIsDrift: every setting only adds work to ps-off, so
// one measured faster beyond the noise is the host's drift, not a verdict:
// undecided, marked, noted and kept rotating; a speedup within the
// resolution is no cost. Against another baseline a speedup is a verdict.
func TestSpeedupOverPSOffIsDrift(t *testing.T) {
	names := []string{"ps-off", "ps-all", "ps-default"}
	// ps-all x1.058 [x1.014–x1.102] by capacity over 3 pairs, as a CI run
	// measured it; ps-default x1.02, tight.
	cpu := [][]time.Duration{{837, 669, 734}, {780, 645, 692}, {820, 656, 720}}
	tps := [][]float64{{1505, 1792, 1730}, {1608, 1879, 1828}, {1530, 1830, 1765}}
	rounds := rotation(names, tps)
	for i := range rounds {
		rounds[i].CPUPerTx = cpu[rounds[i].Position][rounds[i].Index] * time.Microsecond
	}
	rows := Summarize(rounds, names, 0.05)
	all, def := rows[1], rows[2]
	if all.AboveNoise != VerdictUnknown || !all.Drift || all.CapacityLow <= 1 {
		t.Errorf("ps-all faster beyond noise: %+v, want undecided and marked drift", all)
	}
	if def.AboveNoise != VerdictNo || def.Drift || def.CapacityLow <= 1 || def.CapacityHigh > 1.05 {
		t.Errorf("ps-default faster within 5%%: %+v, want no cost", def)
	}
	notes := driftNotes(rows)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "ps-all: measured faster than the ps-off baseline") {
		t.Errorf("drift notes %q", notes)
	}
	if got := PairsToDecide(all, 0.05, 10); got != 0 {
		t.Errorf("drifting row: PairsToDecide %d, want 0 (keeps its rotations)", got)
	}
	if got := undecided(rows, []int{0, 1, 2}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("rows kept rotating %v, want the baseline and ps-all", got)
	}
	if f := Findings(&Result{Baseline: "ps-off", Table: rows}); len(f) != 0 {
		t.Errorf("findings %+v, want none", f)
	}
	// ps-all as the baseline: ps-off faster is what turning instruments off does.
	rev := []string{"ps-all", "ps-off"}
	rows = Summarize(rotation(rev, [][]float64{tps[0], tps[1]}), rev, 0.05)
	if rows[1].AboveNoise != VerdictYes || rows[1].RatioLow <= 1 || rows[1].Drift {
		t.Errorf("ps-off against ps-all: %+v, want faster above noise, no drift mark", rows[1])
	}
}
