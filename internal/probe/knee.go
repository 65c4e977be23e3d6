package probe

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// KneeOptions tune FitKnee; zero fields take the values of
// DefaultKneeOptions.
type KneeOptions struct {
	// MinSide is how many points must lie on each side of a breakpoint.
	MinSide int
	// Alpha is the p-value the permutation test (see FitKnee) must reach.
	Alpha float64
	// MinRise: the points above the knee must be at least this many times
	// slower than the trend below it predicts (a steady exponential climb
	// is no knee).
	MinRise float64
	// Permutations is the number of reshuffles of the one-line fit's
	// residuals the test compares the data with; the smallest p-value it
	// can give is 1/(Permutations+1).
	Permutations int
	// Bootstrap is the number of resamples for the knee's spread (negative:
	// none).
	Bootstrap int
	// Seed makes the permutations and the bootstrap reproducible.
	Seed uint64
}

// DefaultKneeOptions are used for every zero field of KneeOptions.
var DefaultKneeOptions = KneeOptions{MinSide: 4, Alpha: 0.01, MinRise: 2, Permutations: 499, Bootstrap: 200, Seed: 1}

func (o KneeOptions) withDefaults() KneeOptions {
	d := DefaultKneeOptions
	o.MinSide = cmp.Or(o.MinSide, d.MinSide)
	o.Alpha = cmp.Or(o.Alpha, d.Alpha)
	o.MinRise = cmp.Or(o.MinRise, d.MinRise)
	if o.Permutations <= 0 {
		o.Permutations = d.Permutations
	}
	o.Bootstrap = cmp.Or(o.Bootstrap, d.Bootstrap)
	o.Seed = cmp.Or(o.Seed, d.Seed)
	return o
}

type Knee struct {
	Found bool `json:"found"`
	// Reason says why no knee was reported, when Found is false.
	Reason string `json:"reason,omitempty"`
	Points int    `json:"points"`
	// Threads is the breakpoint, between the highest thread count of the
	// lower segment (LastBelow) and the lowest of the upper one
	// (FirstAbove): where the two lines cross when they cross there (a
	// bend), else midway (a jump).
	Threads    float64 `json:"knee_threads"`
	LastBelow  float64 `json:"last_below"`
	FirstAbove float64 `json:"first_above"`
	Below      Segment `json:"below"`
	Above      Segment `json:"above"`
	// RSSLine and RSSKnee are the residual sums of squares of the two fits;
	// Improvement = 1 - RSSKnee/RSSLine is the share of the line's misfit the
	// split explains.
	RSSLine     float64 `json:"rss_line"`
	RSSKnee     float64 `json:"rss_knee"`
	Improvement float64 `json:"fit_improvement"`
	// F is the classical F statistic of the split against one line, for
	// reference. Z is the test statistic: the largest standardized rank sum
	// (Mann-Whitney) over the cuts, of the points above a cut against those
	// below it, both measured from the lower segment's trend. P is its
	// permutation p-value: the share of reshuffles of the one-line fit's
	// residuals that gave a Z at least as large.
	F float64 `json:"f"`
	Z float64 `json:"z"`
	P float64 `json:"p"`
	// Low and High bound the breakpoint over bootstrap resamples (10th and
	// 90th percentiles); both equal Threads without a bootstrap.
	Low  float64 `json:"knee_low"`
	High float64 `json:"knee_high"`
	// Rise is how many times slower the points above the knee are than the
	// lower segment's trend predicts for them (geometric mean).
	Rise float64 `json:"rise"`
	// MaxThreads is the highest thread count observed.
	MaxThreads float64 `json:"max_threads"`
	// KneeUS is the lower segment's latency at its last point; PeakUS the
	// highest latency observed above the knee.
	KneeUS float64 `json:"knee_us"`
	PeakUS float64 `json:"peak_us"`
}

// At returns the fitted latency (µs) at x threads.
func (k Knee) At(x float64) float64 {
	if x <= k.Threads {
		return k.Below.At(x)
	}
	return k.Above.At(x)
}

// FitKnee fits latency (µs) against thread counts: ordinary least squares
// on log latency (the canary's noise is multiplicative), first as one
// line, then as two lines split at the breakpoint that minimises the total
// residual among the cuts between observed thread counts.
//
// Whether the split is a knee is a rank test calibrated by permutation,
// not an F-test: canary latencies are heavy-tailed (one run that queued
// behind a checkpoint is x10), and above a pool cap Threads_running stops
// growing while latency climbs, a near-vertical cloud whose spread a second
// line cannot fit; both inflate the split's residual and hid a x7.9 rise
// at the cap (F-test p=0.025). The statistic asks only whether the points
// above a cut sit above the trend below it, by ranks (see Knee.Z), and its
// null distribution comes from the data: the one-line fit's residuals
// reshuffled over the same thread counts, searched over the same cuts, so
// the search and the tails are both paid for. A knee is reported when P <=
// Alpha and the points above the split are at least MinRise times slower
// than the lower trend predicts. Points with a non-positive or non-finite
// latency or thread count are ignored.
func FitKnee(threads, latencyUS []float64, o KneeOptions) Knee {
	o = o.withDefaults()
	pts := logPoints(threads, latencyUS)
	k := Knee{Points: len(pts)}
	if len(pts) < 2*o.MinSide+1 {
		k.Reason = "too few points"
		return k
	}
	sp, ok := bestSplit(pts, o.MinSide)
	if !ok {
		k.Reason = "too few distinct thread counts"
		return k
	}
	k.LastBelow, k.FirstAbove = sp.lastBelow, sp.firstUp
	k.Threads = sp.breakpoint()
	k.Below, k.Above = sp.lo, sp.hi
	k.RSSKnee, k.RSSLine = sp.rss, lineRSS(pts)
	k.MaxThreads = pts[len(pts)-1].x
	k.Rise = rise(pts[sp.below:], sp.lo, sp.lastBelow)
	k.KneeUS, k.PeakUS = sp.lo.At(sp.lastBelow), peak(pts[sp.below:])
	k.F, _ = fTest(k.RSSLine, k.RSSKnee, len(pts))
	k.Z, k.P = permutationTest(pts, o)
	if k.RSSLine > 0 {
		k.Improvement = 1 - k.RSSKnee/k.RSSLine
	}
	k.Low, k.High = k.Threads, k.Threads
	if o.Bootstrap > 0 {
		k.Low, k.High = bootstrapSpread(pts, o)
	}
	k.Found, k.Reason = judge(k, o)
	return k.finite()
}

// finite replaces the infinities and NaNs of degenerate fits, which
// encoding/json refuses: an exact fit's F becomes the largest float, a
// bootstrap that found no split leaves the range at the knee.
func (k Knee) finite() Knee {
	if math.IsInf(k.F, 1) {
		k.F = math.MaxFloat64
	}
	if math.IsInf(k.Z, 0) || math.IsNaN(k.Z) {
		k.Z = 0
	}
	if math.IsNaN(k.Low) || math.IsNaN(k.High) {
		k.Low, k.High = k.Threads, k.Threads
	}
	return k
}

// rise is the geometric mean, over the points above the knee, of their
// latency over what the lower segment predicts: its level at its last
// point, extended by its slope when that climbs. A falling lower slope is
// not extended: noise in a few points would make everything above look
// slow.
func rise(above []point, lo Segment, lastBelow float64) float64 {
	base := lo.Intercept + lo.Slope*lastBelow
	var sum float64
	for _, p := range above {
		sum += p.y - (base + max(lo.Slope, 0)*(p.x-lastBelow))
	}
	return math.Exp(sum / float64(len(above)))
}

func peak(pts []point) float64 {
	m := math.Inf(-1)
	for _, p := range pts {
		m = max(m, p.y)
	}
	return math.Exp(m)
}

// judge decides whether the fitted split is a knee worth reporting.
func judge(k Knee, o KneeOptions) (bool, string) {
	switch {
	case k.P > o.Alpha:
		return false, "latency above no cut stands above the trend below it beyond what reshuffled noise gives"
	case k.Rise < o.MinRise:
		return false, "latency above the bend is not much above the trend below it"
	}
	return true, ""
}

type point struct{ x, y float64 }

// logPoints keeps the usable points, as (threads, ln latency), sorted by
// threads.
func logPoints(threads, latencyUS []float64) []point {
	n := min(len(threads), len(latencyUS))
	pts := make([]point, 0, n)
	for i := range n {
		x, l := threads[i], latencyUS[i]
		if !(x >= 0) || math.IsInf(x, 0) || !(l > 0) || math.IsInf(l, 0) {
			continue
		}
		pts = append(pts, point{x, math.Log(l)})
	}
	slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
	return pts
}

// lineRSS is the residual sum of squares of the least-squares line.
func lineRSS(pts []point) float64 {
	mx, my := meanXY(pts)
	var m moments
	for _, p := range pts {
		m.add(p.x-mx, p.y-my)
	}
	_, _, rss := m.line()
	return rss
}

// fTest compares the split (two lines, plus the breakpoint counted in the
// residual degrees of freedom: n-5) with one line: 2 extra parameters. For
// 2 numerator degrees of freedom the F distribution's tail has the closed
// form (d2/(d2+2F))^(d2/2).
func fTest(rssLine, rssKnee float64, n int) (f, p float64) {
	d2 := float64(n - 5)
	if d2 <= 0 {
		return 0, 1
	}
	if rssKnee <= 1e-12*max(rssLine, 1) {
		if rssLine-rssKnee > 1e-12 {
			return math.Inf(1), 0
		}
		return 0, 1
	}
	f = ((rssLine - rssKnee) / 2) / (rssKnee / d2)
	if f <= 0 {
		return 0, 1
	}
	return f, math.Pow(d2/(d2+2*f), d2/2)
}

// bootstrapSpread refits the breakpoint on resampled points and returns its
// 10th and 90th percentiles.
func bootstrapSpread(pts []point, o KneeOptions) (lo, hi float64) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	sample := make([]point, len(pts))
	var cs []float64
	for range o.Bootstrap {
		for i := range sample {
			sample[i] = pts[rng.IntN(len(pts))]
		}
		slices.SortFunc(sample, func(a, b point) int { return cmp.Compare(a.x, b.x) })
		if sp, ok := bestSplit(sample, o.MinSide); ok {
			cs = append(cs, sp.breakpoint())
		}
	}
	if len(cs) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(cs)
	return quantile(cs, 0.10), quantile(cs, 0.90)
}

// quantile is the linear-interpolation quantile of sorted v.
func quantile(v []float64, q float64) float64 {
	pos := q * float64(len(v)-1)
	i := int(pos)
	if i+1 >= len(v) {
		return v[len(v)-1]
	}
	return v[i] + (pos-float64(i))*(v[i+1]-v[i])
}
