package report

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// scale maps data values onto pixels and proposes the values worth a tick.
type scale interface {
	Map(v float64) float64
	Ticks() []float64
}

// linearScale maps [d0, d1] linearly onto [r0, r1]; ticks are the round
// values (1, 2 or 5 times a power of ten) niceLinear chose.
type linearScale struct {
	d0, d1, r0, r1 float64
	ticks          []float64
}

func (s linearScale) Map(v float64) float64 {
	if s.d1 == s.d0 {
		return s.r0
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

func (s linearScale) Ticks() []float64 { return s.ticks }

// niceLinear returns a scale over [lo, hi] widened to round tick values,
// with about n intervals. An empty or inverted domain becomes a unit one so
// that a chart of constant values still has an axis.
func niceLinear(lo, hi float64, n int, r0, r1 float64) linearScale {
	lo, hi = saneDomain(lo, hi)
	step := niceStep(hi-lo, n)
	first := math.Floor(lo/step + 1e-9)
	last := math.Ceil(hi/step - 1e-9)
	ticks := make([]float64, 0, int(last-first)+1)
	for i := first; i <= last; i++ {
		ticks = append(ticks, cleanFloat(i*step))
	}
	return linearScale{d0: cleanFloat(first * step), d1: cleanFloat(last * step), r0: r0, r1: r1, ticks: ticks}
}

// saneDomain repairs domains no axis can show: NaN or infinite ends,
// lo > hi, or a single value.
func saneDomain(lo, hi float64) (float64, float64) {
	if math.IsNaN(lo) || math.IsInf(lo, 0) {
		lo = 0
	}
	if math.IsNaN(hi) || math.IsInf(hi, 0) {
		hi = lo
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi == lo {
		if lo == 0 {
			return 0, 1
		}
		d := math.Abs(lo) / 2
		if lo > 0 {
			return max(0, lo-d), hi + d // a positive quantity keeps a zero baseline
		}
		return lo - d, hi + d
	}
	return lo, hi
}

// niceStep is the 1, 2, 5 or 10 times a power of ten closest (on a log
// scale) to span/n, so that an axis gets about n intervals: between n/1.4
// and n*1.4.
func niceStep(span float64, n int) float64 {
	raw := span / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f >= math.Sqrt(50):
		return 10 * mag
	case f >= math.Sqrt(10):
		return 5 * mag
	case f >= math.Sqrt(2):
		return 2 * mag
	}
	return mag
}

// cleanFloat drops the binary noise of i*step (0.30000000000000004).
func cleanFloat(v float64) float64 {
	c, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	if err != nil {
		return v
	}
	return c
}

// logScale maps [d0, d1] (both > 0) onto [r0, r1] by log10; its domain
// spans whole decades.
type logScale struct {
	d0, d1, r0, r1 float64
	ticks          []float64
}

// logFloor is the smallest value a log axis shows: 1 (a microsecond, for
// latencies); zero and negative values are drawn there.
const logFloor = 1

func (s logScale) Map(v float64) float64 {
	v = max(v, s.d0, logFloor)
	l0, l1 := math.Log10(s.d0), math.Log10(s.d1)
	return s.r0 + (math.Log10(v)-l0)/(l1-l0)*(s.r1-s.r0)
}

func (s logScale) Ticks() []float64 { return s.ticks }

// niceLog returns a log scale over whole decades around [lo, hi]. Ticks are
// the decades, plus 2x and 5x when the axis spans fewer than three decades
// (otherwise it would carry only two or three labels).
func niceLog(lo, hi float64, r0, r1 float64) logScale {
	if !(lo >= logFloor) || math.IsInf(lo, 0) {
		lo = logFloor
	}
	if !(hi >= lo) || math.IsInf(hi, 0) {
		hi = lo
	}
	e0 := math.Floor(math.Log10(lo) + 1e-9)
	e1 := math.Ceil(math.Log10(hi) - 1e-9)
	if e1 <= e0 {
		e1 = e0 + 1
	}
	var ticks []float64
	for e := e0; e <= e1; e++ {
		d := math.Pow(10, e)
		ticks = append(ticks, cleanFloat(d))
		if e1-e0 < 3 && e < e1 {
			ticks = append(ticks, cleanFloat(2*d), cleanFloat(5*d))
		}
	}
	return logScale{d0: math.Pow(10, e0), d1: math.Pow(10, e1), r0: r0, r1: r1, ticks: ticks}
}

// timeSteps are the tick intervals a time axis may use, in microseconds.
var timeSteps = []int64{
	1e6, 2e6, 5e6, 10e6, 15e6, 30e6,
	60e6, 2 * 60e6, 5 * 60e6, 10 * 60e6, 15 * 60e6, 30 * 60e6,
	3600e6, 2 * 3600e6, 3 * 3600e6, 6 * 3600e6, 12 * 3600e6, 24 * 3600e6,
}

// timeScale is a linear scale over Unix microseconds whose ticks fall on
// round clock times (UTC), so that labels read 12:05, 12:10, ...
type timeScale struct {
	linearScale
	step int64
}

// niceTime returns a time scale over [lo, hi] with about n ticks on
// multiples of a step from timeSteps. The domain stays [lo, hi] (padded by
// half a point when it is one instant), so the first point sits on the axis.
func niceTime(lo, hi int64, n int, r0, r1 float64) timeScale {
	lo, hi = clampTime(lo), clampTime(hi)
	if hi < lo {
		lo, hi = hi, lo
	}
	if hi == lo {
		lo, hi = lo-500_000, hi+500_000
	}
	n = max(n, 1)
	day := timeSteps[len(timeSteps)-1]
	step := ceilDiv(hi-lo, int64(n)*day) * day // whole days beyond the table
	for _, s := range timeSteps {
		if (hi-lo)/s <= int64(n) {
			step = s
			break
		}
	}
	var ticks []float64
	for t := ceilDiv(lo, step) * step; t <= hi; t += step {
		ticks = append(ticks, float64(t))
	}
	return timeScale{linearScale{d0: float64(lo), d1: float64(hi), r0: r0, r1: r1, ticks: ticks}, step}
}

// maxTimeUS bounds the times an axis shows (about year 2250 either side of
// 1970): sums and differences of clamped times never overflow, and nothing
// real lies beyond.
const maxTimeUS = 1 << 58

func clampTime(t int64) int64 { return min(max(t, -maxTimeUS), maxTimeUS) }

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// Label formats a tick of the scale: seconds appear only when the step is
// under a minute, the date only when the axis spans more than a day.
func (s timeScale) Label(v float64) string {
	t := time.UnixMicro(int64(v)).UTC()
	switch {
	case s.d1-s.d0 > 24*3600e6:
		return t.Format("01-02 15:04")
	case s.step < 60e6:
		return t.Format("15:04:05")
	}
	return t.Format("15:04")
}

// fmtDurationUS labels a duration axis tick: 500 µs, 2 ms, 1.5 s, 2 min.
func fmtDurationUS(us float64) string {
	a := math.Abs(us)
	switch {
	case a == 0:
		return "0"
	case a >= 120e6:
		return fmtNum(us/60e6) + " min"
	case a >= 1e6:
		return fmtNum(us/1e6) + " s"
	case a >= 1e3:
		return fmtNum(us/1e3) + " ms"
	}
	return fmtNum(us) + " µs"
}

// fmtNum prints at most three significant digits without an exponent or
// trailing zeros: 1, 2.5, 0.125, 1200.
func fmtNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	dec := 2
	if a := math.Abs(v); a < 1 && a > 0 {
		dec = min(2-int(math.Floor(math.Log10(a))), 12)
	} else if a >= 100 {
		dec = 0
	} else if a >= 10 {
		dec = 1
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// fmtCount labels a count axis tick.
func fmtCount(v float64) string { return fmtNum(v) }
