package probe

import "math"

// Segment is a least-squares line over part of the points: ln(latency µs)
// = Intercept + Slope × threads.
type Segment struct {
	Intercept float64 `json:"intercept"`
	Slope     float64 `json:"slope"`
	Points    int     `json:"points"`
}

// At is the segment's latency (µs) at x threads.
func (s Segment) At(x float64) float64 { return math.Exp(s.Intercept + s.Slope*x) }

// moments accumulates the sums a least-squares line needs.
type moments struct{ n, x, y, xx, xy, yy float64 }

func (m *moments) add(x, y float64) {
	m.n++
	m.x += x
	m.y += y
	m.xx += x * x
	m.xy += x * y
	m.yy += y * y
}

func (m moments) minus(o moments) moments {
	return moments{m.n - o.n, m.x - o.x, m.y - o.y, m.xx - o.xx, m.xy - o.xy, m.yy - o.yy}
}

// line returns the least-squares line of the summed points (a flat line
// through the mean when they share one x) and its residual sum of squares.
func (m moments) line() (a, b, rss float64) {
	if m.n == 0 {
		return 0, 0, 0
	}
	sxx := m.xx - m.x*m.x/m.n
	sxy := m.xy - m.x*m.y/m.n
	syy := m.yy - m.y*m.y/m.n
	if sxx > 1e-12*max(m.xx, 1) {
		b = sxy / sxx
	}
	a = (m.y - b*m.x) / m.n
	return a, b, max(syy-b*sxy, 0)
}

// split is a two-segment fit: the points up to index below-1 on one line,
// the rest on another.
type split struct {
	below              int
	lastBelow, firstUp float64
	lo, hi             Segment
	rss                float64
}

// breakpoint is where the two lines cross when that lies between the
// segments (the latency bends there), else the middle of the gap (it
// jumps).
func (s split) breakpoint() float64 {
	if db := s.lo.Slope - s.hi.Slope; db != 0 {
		x := (s.hi.Intercept - s.lo.Intercept) / db
		eps := 1e-9 * (s.firstUp - s.lastBelow)
		if x >= s.lastBelow-eps && x <= s.firstUp+eps {
			return min(max(x, s.lastBelow), s.firstUp)
		}
	}
	return (s.lastBelow + s.firstUp) / 2
}

// bestSplit tries every cut between two consecutive distinct thread counts
// that leaves at least minSide points on each side and returns the one
// with the least total residual. pts must be sorted by x. Each cut costs
// O(1) from prefix sums over data centred on its mean (for precision).
func bestSplit(pts []point, minSide int) (split, bool) {
	mx, my := meanXY(pts)
	prefix := make([]moments, len(pts)+1)
	for i, p := range pts {
		prefix[i+1] = prefix[i]
		prefix[i+1].add(p.x-mx, p.y-my)
	}
	total := prefix[len(pts)]
	best := split{rss: math.Inf(1)}
	for i := minSide; i <= len(pts)-minSide; i++ {
		if pts[i].x == pts[i-1].x {
			continue // not a cut between distinct thread counts
		}
		_, _, r1 := prefix[i].line()
		_, _, r2 := total.minus(prefix[i]).line()
		if r1+r2 < best.rss {
			best = split{below: i, lastBelow: pts[i-1].x, firstUp: pts[i].x, rss: r1 + r2}
		}
	}
	if math.IsInf(best.rss, 1) {
		return best, false
	}
	best.lo = segment(prefix[best.below], mx, my)
	best.hi = segment(total.minus(prefix[best.below]), mx, my)
	return best, true
}

// segment turns centred sums into a line in original units.
func segment(m moments, mx, my float64) Segment {
	a, b, _ := m.line()
	return Segment{Intercept: my + a - b*mx, Slope: b, Points: int(m.n)}
}

func meanXY(pts []point) (mx, my float64) {
	for _, p := range pts {
		mx += p.x
		my += p.y
	}
	n := float64(len(pts))
	return mx / n, my / n
}
