package join

import "slices"

// interval is a closed range of candidate clock origins [lo, hi] (µs)
// allowed by one piece of evidence.
type interval struct{ lo, hi int64 }

// consensus finds the clock origin most pieces of evidence agree on:
// the points covered by the most intervals (Marzullo's intersection). A
// wrong pairing yields an interval somewhere else, so a minority of them
// cannot move the result. Its buffer is reused: no allocation once grown.
type consensus struct {
	ends []int64 // 2v for an interval's start, 2v+1 for its end: starts sort first
}

// region is the outcome of a consensus: the best count, the range of
// origins covered by at least some level of intervals, and whether that
// level is reached in more than one separate place (the evidence is
// ambiguous; the range is then the hull of all such places).
type region struct {
	count     int
	lo, hi    int64
	ambiguous bool
}

func (c *consensus) load(ivs []interval) {
	c.ends = c.ends[:0]
	for _, iv := range ivs {
		if iv.lo > iv.hi {
			continue
		}
		c.ends = append(c.ends, 2*iv.lo, 2*iv.hi+1)
	}
	slices.Sort(c.ends)
}

// peak loads ivs and returns the best count.
func (c *consensus) peak(ivs []interval) int {
	c.load(ivs)
	best, n := 0, 0
	for _, e := range c.ends {
		if e&1 == 0 {
			n++
			best = max(best, n)
		} else {
			n--
		}
	}
	return best
}

// at returns the range covered by at least level intervals of the last
// peak call (best is that call's result). A few honest intervals always
// miss the true origin by a µs of jitter, so level is set a little below
// best.
func (c *consensus) at(best, level int) region {
	level = max(level, 1)
	r := region{count: best}
	runs, n := 0, 0
	for _, e := range c.ends {
		v := e >> 1 // floor division keeps negative origins right
		if e&1 == 0 {
			if n++; n == level { // a run at or above level begins
				if runs++; runs == 1 {
					r.lo = v
				}
			}
			continue
		}
		if n == level { // the run ends at v (closed)
			r.hi = v
		}
		n--
	}
	r.ambiguous = runs > 1
	return r
}

// countIn returns the most intervals of the last peak call that cover one
// point of [lo, hi].
func (c *consensus) countIn(lo, hi int64) int {
	best, n := 0, 0
	for _, e := range c.ends {
		v := e >> 1
		if v > hi {
			return max(best, n) // what is still open covers hi
		}
		if e&1 == 0 {
			n++
			if v >= lo {
				best = max(best, n)
			}
			continue
		}
		if v >= lo {
			best = max(best, n) // this interval still covers v
		}
		n--
	}
	return best
}
