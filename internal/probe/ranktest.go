package probe

import (
	"math"
	"math/rand/v2"
	"slices"
)

// maxCuts bounds the cuts the rank statistic looks at: with more distinct
// thread counts (a day of one-minute runs), evenly spaced ones among them.
const maxCuts = 48

// permutationTest returns the robust statistic of pts (sorted by x) and
// the permutation p-value of the knee test. Under the null hypothesis log
// latency is one line in the thread count plus exchangeable noise, so the
// one-line fit's residuals, reshuffled and added back to the line, give
// data sets as likely as the observed one. Two statistics are computed on
// each, both maximised over the same cuts: the robust rise (rankTest.stat:
// a wall of latency above a cap, heavy-tailed noise) and the F statistic of
// two least-squares lines against one (a clean bend). Each data set's
// smaller marginal p-value is its combined statistic, so the p-value
// returned pays for the search over cuts, for using two statistics, and for
// whatever tails the noise has, without assuming a distribution for it.
func permutationTest(pts []point, o KneeOptions) (z, p float64) {
	// Too few points for the robust statistic's cuts leaves it 0 and the
	// F statistic alone.
	rt := newRankTest(pts, candidateCuts(pts, max(o.MinSide, minRobustSide)))
	z = rt.stat(rt.y)
	f := supF(pts, o.MinSide)
	mx, my := meanXY(pts)
	var m moments
	for _, q := range pts {
		m.add(q.x-mx, q.y-my)
	}
	a, b, _ := m.line()
	fit := make([]float64, len(pts))
	res := make([]float64, len(pts))
	for i, q := range pts {
		fit[i] = my + a + b*(q.x-mx)
		res[i] = q.y - fit[i]
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x51ed270b27f3c9a1))
	y := make([]float64, len(pts))
	perm := slices.Clone(pts)
	zs, fs := make([]float64, o.Permutations), make([]float64, o.Permutations)
	for j := range o.Permutations {
		rng.Shuffle(len(res), func(i, j int) { res[i], res[j] = res[j], res[i] })
		for i := range y {
			y[i] = fit[i] + res[i]
			perm[i].y = y[i]
		}
		zs[j], fs[j] = rt.stat(y), supF(perm, o.MinSide)
	}
	sz, sf := slices.Sorted(slices.Values(zs)), slices.Sorted(slices.Values(fs))
	q0 := min(upperP(sz, z), upperP(sf, f))
	le := 0
	for j := range zs {
		if min(upperP(sz, zs[j]), upperP(sf, fs[j])) <= q0+1e-12 {
			le++
		}
	}
	return z, float64(le+1) / float64(o.Permutations+1)
}

// upperP is the permutation p-value of v among the sorted null values.
func upperP(sorted []float64, v float64) float64 {
	i, _ := slices.BinarySearch(sorted, v-1e-9)
	return float64(len(sorted)-i+1) / float64(len(sorted)+1)
}

// supF is the F statistic of the best two-line split against one line.
func supF(pts []point, minSide int) float64 {
	sp, ok := bestSplit(pts, minSide)
	if !ok {
		return 0
	}
	f, _ := fTest(lineRSS(pts), sp.rss, len(pts))
	return min(f, math.MaxFloat64)
}

// minRobustSide: a median absolute deviation needs a few points.
const minRobustSide = 8

// candidateCuts lists the indexes i that split pts (sorted by x) between
// two distinct thread counts with at least minSide points on each side, at
// most maxCuts of them.
func candidateCuts(pts []point, minSide int) []int {
	var cuts []int
	for i := minSide; i <= len(pts)-minSide; i++ {
		if pts[i].x != pts[i-1].x {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) <= maxCuts {
		return cuts
	}
	out := make([]int, 0, maxCuts)
	for k := range maxCuts {
		out = append(out, cuts[k*(len(cuts)-1)/(maxCuts-1)])
	}
	return slices.Compact(out)
}

// rankTest computes the statistic for any latencies over fixed thread
// counts and cuts, reusing its buffers.
type rankTest struct {
	x, y   []float64
	cuts   []int
	prefix []moments
	below  []float64
	above  []float64
}

func newRankTest(pts []point, cuts []int) *rankTest {
	rt := &rankTest{x: make([]float64, len(pts)), y: make([]float64, len(pts)), cuts: cuts,
		prefix: make([]moments, len(pts)+1), below: make([]float64, 0, len(pts)), above: make([]float64, 0, len(pts))}
	for i, p := range pts {
		rt.x[i], rt.y[i] = p.x, p.y
	}
	return rt
}

// stat is the largest, over the cuts, of a robust t statistic: the median
// of how far the points above the cut lie above the least-squares line of
// the points below it (from that line's level at the last point below,
// extended by its slope when it climbs, as Knee.Rise), over its standard
// error from the points below: their scatter as a median absolute
// deviation, the median's own error, and the error of extending the line.
// Medians make one wild run count as one point, however wild; unlike a rank
// statistic, the rise's size counts, so a wall of latency above a pool cap
// stands far above any extension of the trend below.
func (rt *rankTest) stat(y []float64) float64 {
	n := len(y)
	var mx, my float64
	for i := range y {
		mx += rt.x[i]
		my += y[i]
	}
	mx, my = mx/float64(n), my/float64(n)
	for i := range y {
		rt.prefix[i+1] = rt.prefix[i]
		rt.prefix[i+1].add(rt.x[i]-mx, y[i]-my)
	}
	best := math.Inf(-1)
	for _, c := range rt.cuts {
		m := rt.prefix[c]
		a, b, _ := m.line()
		last := rt.x[c-1] - mx
		base := a + b*last
		rt.below, rt.above = rt.below[:0], rt.above[:0]
		var xa float64
		for i := range y {
			xi, yi := rt.x[i]-mx, y[i]-my
			if i < c {
				rt.below = append(rt.below, yi-(a+b*xi))
			} else {
				rt.above = append(rt.above, yi-(base+max(b, 0)*(xi-last)))
				xa += xi
			}
		}
		nb, na := float64(c), float64(n-c)
		xa /= na
		scale := 1.4826 * medianAbs(rt.below) * math.Sqrt(nb/(nb-2))
		if scale <= 0 {
			continue
		}
		xb := m.x / m.n
		sxx := m.xx - m.x*m.x/m.n
		lev := 1 / nb
		if sxx > 0 {
			lev += (xa - xb) * (xa - xb) / sxx
		}
		se := scale * math.Sqrt(math.Pi/(2*na)+lev)
		best = max(best, median(rt.above)/se)
	}
	if math.IsInf(best, -1) {
		return 0
	}
	return best
}

// medianAbs is the median of |v|; it reorders v.
func medianAbs(v []float64) float64 {
	for i := range v {
		v[i] = math.Abs(v[i])
	}
	return median(v)
}

// median of v; it sorts v.
func median(v []float64) float64 {
	slices.Sort(v)
	k := len(v)
	if k%2 == 1 {
		return v[k/2]
	}
	return (v[k/2-1] + v[k/2]) / 2
}
