package overhead

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Round is one measured run of the workload under one configuration.
type Round struct {
	Config string `json:"config"`
	// Position is the configuration's place in the rotation (0: baseline).
	Position int `json:"position"`
	// Index is the rotation the round belongs to: rounds with the same
	// Index ran back to back and are compared as a pair.
	Index   int           `json:"round"`
	StartUS int64         `json:"t"`
	TPS     float64       `json:"tps"`
	QPS     float64       `json:"qps"`
	LatAvg  time.Duration `json:"lat_avg_ns"`
	LatP95  time.Duration `json:"lat_p95_ns"`
	Errors  int64         `json:"errors"`
	// Applied is AppliedStartup when the setting was in place from the
	// server's start (options of a sandbox restart, or performance_schema
	// itself), AppliedRuntime when set on the running server. Understates
	// marks a setting that takes full effect only at startup but could
	// only be applied at runtime (a server gapscope may not restart).
	Applied     string `json:"applied,omitempty"`
	Understates bool   `json:"understates,omitempty"`
	// CPUPerTx is the CPU time (user + system) the server and gapscope's
	// process (its watch, and the builtin workload, which runs in it) used
	// per transaction during the round: what runs on a database host;
	// sysbench is left out. 0 when the server's CPU could not be read (a
	// server that is not a sandbox).
	CPUPerTx time.Duration `json:"cpu_per_tx_ns,omitempty"`
}

// How a round's setting was put in place (Round.Applied).
const (
	AppliedStartup = "startup"
	AppliedRuntime = "runtime"
)

// Verdicts of Row.AboveNoise.
const (
	VerdictBaseline = "baseline"
	VerdictYes      = "yes"
	VerdictNo       = "no"
	VerdictUnknown  = "noise too high to tell"
)

// Row is one line of the overhead case's table (docs/field-reports.md).
type Row struct {
	Config   string  `json:"config"`
	Rounds   int     `json:"rounds"`
	TPS      float64 `json:"tps_median"`
	TPSMin   float64 `json:"tps_min"`
	TPSMax   float64 `json:"tps_max"`
	QPS      float64 `json:"qps_median"`
	LatAvgMS float64 `json:"lat_avg_ms"`
	LatP95MS float64 `json:"lat_p95_ms"`
	// Ratio is the geometric mean of the paired ratios TPS(config) /
	// TPS(baseline) of the same rotation; [RatioLow, RatioHigh] is its 95%
	// confidence interval (0 when fewer than two pairs).
	Ratio     float64 `json:"ratio"`
	RatioLow  float64 `json:"ratio_low"`
	RatioHigh float64 `json:"ratio_high"`
	Pairs     int     `json:"pairs"`
	// AboveNoise is one of the Verdict constants.
	AboveNoise string `json:"above_noise"`
	// Capacity is the geometric mean of the paired ratios of transactions
	// per CPU second (Round.CPUPerTx), config/baseline, and
	// [CapacityLow, CapacityHigh] its 95% interval: the share of a
	// CPU-bound server's throughput the setting leaves. Other load on the
	// host moves TPS a lot and CPU per transaction little, so where every
	// pair has it the verdict is decided on it (VerdictOn). 0 when the
	// CPU was not measured; CPUPerTxMS is the median.
	CPUPerTxMS   float64 `json:"cpu_per_tx_ms,omitempty"`
	Capacity     float64 `json:"capacity,omitempty"`
	CapacityLow  float64 `json:"capacity_low,omitempty"`
	CapacityHigh float64 `json:"capacity_high,omitempty"`
	// VerdictOn names the interval AboveNoise was decided on:
	// VerdictOnCapacity or VerdictOnTPS.
	VerdictOn string `json:"verdict_on,omitempty"`
	// Applied and Understates are the rounds' (Round.Applied).
	Applied     string `json:"applied,omitempty"`
	Understates bool   `json:"understates,omitempty"`
	// LatAvgLowMS..LatP95HighMS are the 95% intervals of the paired
	// latency ratios applied to the baseline's medians (0 when fewer than
	// two pairs); the baseline row has none.
	LatAvgLowMS  float64 `json:"lat_avg_low_ms,omitempty"`
	LatAvgHighMS float64 `json:"lat_avg_high_ms,omitempty"`
	LatP95LowMS  float64 `json:"lat_p95_low_ms,omitempty"`
	LatP95HighMS float64 `json:"lat_p95_high_ms,omitempty"`
	// Drift marks a row measured faster than a baseline it only adds work
	// to, beyond the noise: the host's drift did not cancel in its pairs,
	// so its verdict is not "yes" but undecided (addsWork).
	Drift bool `json:"drift,omitempty"`
}

// Method says how Summarize computes the interval, for output beside it.
const Method = "paired rounds: ratio TPS(config)/TPS(baseline) per rotation, and capacity: the same ratio of transactions per CPU " +
	"second of the server and gapscope's process (measured on a sandbox; the builtin workload runs in that process and dilutes it, " +
	"sysbench does not); 95% Student t-interval on the mean log ratio " +
	"(geometric mean ratio, exp(mean ± t·sd/√n)); the verdict is decided on capacity where every pair has it (other load on " +
	"the host moves TPS, not CPU per transaction), else on TPS: above noise when the interval excludes 1.0, 'no' when it lies within " +
	"±resolution of 1.0, else noise too high to tell (against ps-off, to which every setting only adds work, a speedup beyond " +
	"the noise is drift the pairs did not cancel: undecided, and noted); rotations are added while a row is undecided, up to the time limit, leaving out " +
	"decided rows and rows that could not be decided in the time left at their spread"

// What Row.AboveNoise was decided on (Row.VerdictOn).
const (
	VerdictOnCapacity = "capacity"
	VerdictOnTPS      = "tps"
)

// Decided returns the ratio and interval the row's verdict was decided on:
// capacity, or TPS.
func (r Row) Decided() (ratio, low, high float64) {
	if r.VerdictOn == VerdictOnCapacity {
		return r.Capacity, r.CapacityLow, r.CapacityHigh
	}
	return r.Ratio, r.RatioLow, r.RatioHigh
}

// DefaultResolution is the smallest change worth telling apart (5%): an
// interval around 1.0 narrower than this says "no"; a wider one cannot
// rule a real cost out.
const DefaultResolution = 0.05

// Summarize builds the table: one Row per configuration in the order of
// configs, the first being the baseline. Rounds of unknown configurations
// are ignored.
func Summarize(rounds []Round, configs []string, resolution float64) []Row {
	if resolution <= 0 {
		resolution = DefaultResolution
	}
	rows := make([]Row, 0, len(configs))
	for i, name := range configs {
		mine := roundsOf(rounds, name)
		r := describe(name, mine)
		if i == 0 {
			r.Ratio, r.RatioLow, r.RatioHigh, r.AboveNoise = 1, 1, 1, VerdictBaseline
			if r.CPUPerTxMS > 0 {
				r.Capacity, r.CapacityLow, r.CapacityHigh = 1, 1, 1
			}
			r.Pairs = len(mine)
		} else {
			base := roundsOf(rounds, configs[0])
			ratios := pairedRatios(base, mine, func(x Round) float64 { return x.TPS })
			r.Pairs = len(ratios)
			r.Ratio, r.RatioLow, r.RatioHigh = RatioInterval(ratios)
			r.AboveNoise, r.VerdictOn = Verdict(r.RatioLow, r.RatioHigh, len(ratios), resolution), VerdictOnTPS
			capacity := pairedRatios(base, mine, txPerCPUSecond)
			if len(capacity) > 0 {
				r.Capacity, r.CapacityLow, r.CapacityHigh = RatioInterval(capacity)
			}
			if len(capacity) == len(ratios) && len(capacity) >= 2 {
				r.AboveNoise, r.VerdictOn = Verdict(r.CapacityLow, r.CapacityHigh, len(capacity), resolution), VerdictOnCapacity
			}
			if addsWork(configs[0]) {
				r.AboveNoise, r.Drift = noSpeedup(r, resolution)
			}
			b := describe(configs[0], base)
			r.LatAvgLowMS, r.LatAvgHighMS = latencyInterval(base, mine, b.LatAvgMS, func(x Round) float64 { return ms(x.LatAvg) })
			r.LatP95LowMS, r.LatP95HighMS = latencyInterval(base, mine, b.LatP95MS, func(x Round) float64 { return ms(x.LatP95) })
		}
		rows = append(rows, r)
	}
	return rows
}

// addsWork reports whether every setting compared with baseline only adds
// work to it: true for ps-off, where every instrument is off. Measured
// faster than such a baseline beyond the noise, a setting has not made the
// server faster; the pairs did not cancel the host's drift (other load,
// one restart's luck), and more pairs are the answer, not a verdict.
func addsWork(baseline string) bool { return baseline == "ps-off" }

// noSpeedup is a row's verdict when its setting only adds work to the
// baseline: a speedup within the resolution is "no" cost; a larger one is
// undecided, marked as drift.
func noSpeedup(r Row, resolution float64) (verdict string, drift bool) {
	_, low, high := r.Decided()
	if r.AboveNoise != VerdictYes || low <= 1 {
		return r.AboveNoise, false
	}
	if high <= 1+resolution {
		return VerdictNo, false
	}
	return VerdictUnknown, true
}

// driftNotes says, for each row marked Drift, why it stays undecided.
func driftNotes(table []Row) []string {
	var out []string
	for _, r := range table {
		if r.Drift {
			x, lo, hi := r.Decided()
			out = append(out, fmt.Sprintf("%s: measured faster than the %s baseline, x%.3f [x%.3f–x%.3f] over %d pairs (by %s): "+
				"a setting that only adds work is not faster; the host's drift did not cancel in these pairs, so the row stays undecided",
				r.Config, table[0].Config, x, lo, hi, r.Pairs, r.VerdictOn))
		}
	}
	return out
}

// txPerCPUSecond is a round's transactions per CPU second (0 when its CPU
// was not measured).
func txPerCPUSecond(x Round) float64 {
	if x.CPUPerTx <= 0 {
		return 0
	}
	return float64(time.Second) / float64(x.CPUPerTx)
}

func roundsOf(rounds []Round, name string) []Round {
	var out []Round
	for _, r := range rounds {
		if r.Config == name {
			out = append(out, r)
		}
	}
	return out
}

// describe fills the per-configuration medians, range and latencies.
func describe(name string, rs []Round) Row {
	r := Row{Config: name, Rounds: len(rs)}
	if len(rs) == 0 {
		return r
	}
	tps, qps, avg, p95 := make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs)), make([]float64, len(rs))
	var cpu []float64
	for i, x := range rs {
		tps[i], qps[i] = x.TPS, x.QPS
		avg[i], p95[i] = ms(x.LatAvg), ms(x.LatP95)
		if x.CPUPerTx > 0 {
			cpu = append(cpu, ms(x.CPUPerTx))
		}
	}
	r.TPS, r.QPS, r.LatAvgMS, r.LatP95MS, r.CPUPerTxMS = median(tps), median(qps), median(avg), median(p95), median(cpu)
	r.TPSMin, r.TPSMax = slices.Min(tps), slices.Max(tps)
	r.Applied, r.Understates = rs[0].Applied, rs[0].Understates
	return r
}

// latencyInterval is the 95% interval of a latency: the paired ratios'
// interval applied to the baseline's median.
func latencyInterval(base, cfg []Round, baseMedian float64, f func(Round) float64) (low, high float64) {
	_, lo, hi := RatioInterval(pairedRatios(base, cfg, f))
	return lo * baseMedian, hi * baseMedian
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pairedRatios divides f of each config round by f of the baseline round
// of the same rotation; a rotation missing either (an interrupted run, or a
// row decided before it) is skipped.
func pairedRatios(base, cfg []Round, f func(Round) float64) []float64 {
	var out []float64
	for _, c := range cfg {
		for _, b := range base {
			if b.Index == c.Index && f(b) > 0 && f(c) > 0 {
				out = append(out, f(c)/f(b))
				break
			}
		}
	}
	return out
}

// RatioInterval returns the geometric mean of ratios and its 95%
// t-interval, computed on log ratios (a ratio's noise is multiplicative:
// x0.5 and x2 are equally far from 1). With one ratio the interval is
// unknown (0, 0); with none everything is 0.
func RatioInterval(ratios []float64) (mean, low, high float64) {
	n := len(ratios)
	if n == 0 {
		return 0, 0, 0
	}
	var sum float64
	logs := make([]float64, n)
	for i, r := range ratios {
		logs[i] = math.Log(r)
		sum += logs[i]
	}
	m := sum / float64(n)
	if n < 2 {
		return math.Exp(m), 0, 0
	}
	var ss float64
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	half := TQuantile975(n-1) * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	return math.Exp(m), math.Exp(m - half), math.Exp(m + half)
}

// Verdict decides whether a ratio interval stands above the noise: "yes"
// when it excludes 1.0, "no" when it lies within ±resolution of 1.0 (any
// real difference is smaller than what we care about), otherwise (or with
// fewer than two pairs) the noise is too high to tell.
func Verdict(low, high float64, pairs int, resolution float64) string {
	switch {
	case pairs < 2 || low <= 0:
		return VerdictUnknown
	case high < 1 || low > 1:
		return VerdictYes
	case low >= 1-resolution && high <= 1+resolution:
		return VerdictNo
	default:
		return VerdictUnknown
	}
}

// t975 holds Student's t 0.975 quantiles for 1..30 degrees of freedom
// (standard table values).
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// TQuantile975 returns Student's t 0.975 quantile for df degrees of
// freedom: the table up to 30, then the Cornish-Fisher expansion around
// the normal quantile (error < 0.001 beyond 30).
func TQuantile975(df int) float64 {
	if df < 1 {
		return math.Inf(1)
	}
	if df <= len(t975) {
		return t975[df-1]
	}
	const z = 1.959964
	d := float64(df)
	return z + (z*z*z+z)/(4*d) + (5*math.Pow(z, 5)+16*z*z*z+3*z)/(96*d*d)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
