package report

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestNiceLinearTicks(t *testing.T) {
	cases := []struct {
		lo, hi  float64
		n       int
		d0, d1  float64
		want    []float64
		comment string
	}{
		{0, 64, 5, 0, 70, []float64{0, 10, 20, 30, 40, 50, 60, 70}, "threads up to 64"},
		{0, 10, 5, 0, 10, []float64{0, 2, 4, 6, 8, 10}, "exact fit"},
		{0.1, 0.7, 6, 0.1, 0.7, []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7}, "decimals without binary noise"},
		{-3, 7, 5, -4, 8, []float64{-4, -2, 0, 2, 4, 6, 8}, "negative low end"},
		{0, 0, 5, 0, 1, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, "empty domain becomes unit"},
		{5, 5, 5, 2, 8, []float64{2, 3, 4, 5, 6, 7, 8}, "one value is centred"},
		{10, 0, 2, 0, 10, []float64{0, 5, 10}, "inverted domain"},
		{0, 1.23e6, 6, 0, 1.4e6, []float64{0, 200000, 400000, 600000, 800000, 1e6, 1.2e6, 1.4e6}, "microseconds"},
	}
	for _, c := range cases {
		s := niceLinear(c.lo, c.hi, c.n, 0, 100)
		if s.d0 != c.d0 || s.d1 != c.d1 || !slices.Equal(s.Ticks(), c.want) {
			t.Errorf("%s: niceLinear(%v, %v, %d) = [%v, %v] %v, want [%v, %v] %v", c.comment, c.lo, c.hi, c.n,
				s.d0, s.d1, s.Ticks(), c.d0, c.d1, c.want)
		}
	}
}

func TestNiceLinearSurvivesNonFinite(t *testing.T) {
	for _, c := range [][2]float64{{math.NaN(), 3}, {0, math.Inf(1)}, {math.Inf(-1), math.NaN()}} {
		s := niceLinear(c[0], c[1], 5, 0, 100)
		if len(s.Ticks()) < 2 || len(s.Ticks()) > 12 {
			t.Errorf("niceLinear(%v, %v) ticks %v", c[0], c[1], s.Ticks())
		}
		for _, v := range s.Ticks() {
			if math.IsNaN(s.Map(v)) || math.IsInf(s.Map(v), 0) {
				t.Errorf("niceLinear(%v, %v) maps %v to %v", c[0], c[1], v, s.Map(v))
			}
		}
	}
}

func TestLinearMapEndsAndInversion(t *testing.T) {
	s := niceLinear(0, 100, 5, 400, 40) // y grows downwards: data 0 at the bottom
	if s.Map(0) != 400 || s.Map(100) != 40 || s.Map(50) != 220 {
		t.Errorf("Map: 0->%v 100->%v 50->%v", s.Map(0), s.Map(100), s.Map(50))
	}
}

func TestNiceLogTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		d0, d1 float64
		want   []float64
	}{
		// three decades or more: decades only
		{150, 2.3e6, 100, 1e7, []float64{100, 1000, 1e4, 1e5, 1e6, 1e7}},
		// fewer: 2x and 5x too, so the axis carries enough labels
		{300, 4000, 100, 1e4, []float64{100, 200, 500, 1000, 2000, 5000, 1e4}},
		// exact decades stay put
		{1000, 1e6, 1000, 1e6, []float64{1000, 1e4, 1e5, 1e6}},
		// one value on a decade widens to the next decade
		{1000, 1000, 1000, 1e4, []float64{1000, 2000, 5000, 1e4}},
		// zero and negatives clamp to the floor (1 µs)
		{0, 50, 1, 100, []float64{1, 2, 5, 10, 20, 50, 100}},
		{-5, math.NaN(), 1, 10, []float64{1, 2, 5, 10}},
	}
	for _, c := range cases {
		s := niceLog(c.lo, c.hi, 0, 300)
		if s.d0 != c.d0 || s.d1 != c.d1 || !slices.Equal(s.Ticks(), c.want) {
			t.Errorf("niceLog(%v, %v) = [%v, %v] %v, want [%v, %v] %v", c.lo, c.hi, s.d0, s.d1, s.Ticks(), c.d0, c.d1, c.want)
		}
	}
}

func TestLogMapIsLogarithmic(t *testing.T) {
	s := niceLog(100, 1e6, 400, 0) // four decades over 400 px
	for v, want := range map[float64]float64{100: 400, 1000: 300, 1e4: 200, 1e5: 100, 1e6: 0, 0: 400, -7: 400} {
		if got := s.Map(v); math.Abs(got-want) > 1e-9 {
			t.Errorf("Map(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestNiceTime(t *testing.T) {
	base := time.Date(2025, 3, 1, 12, 0, 7, 0, time.UTC).UnixMicro()
	cases := []struct {
		span   time.Duration
		step   time.Duration
		first  string
		labels int
	}{
		{20 * time.Second, 5 * time.Second, "12:00:10", 4},
		{10 * time.Minute, 2 * time.Minute, "12:02", 5},
		{3 * time.Hour, 30 * time.Minute, "12:30", 6},
		{3 * 24 * time.Hour, 12 * time.Hour, "03-02 00:00", 6},
	}
	for _, c := range cases {
		s := niceTime(base, base+c.span.Microseconds(), 8, 0, 800)
		ticks := s.Ticks()
		if time.Duration(s.step)*time.Microsecond != c.step || len(ticks) != c.labels || s.Label(ticks[0]) != c.first {
			var labels []string
			for _, v := range ticks {
				labels = append(labels, s.Label(v))
			}
			t.Errorf("span %v: step %v, labels %q; want step %v, %d labels from %s", c.span,
				time.Duration(s.step)*time.Microsecond, labels, c.step, c.labels, c.first)
		}
		if s.Map(float64(base)) != 0 || s.Map(float64(base+c.span.Microseconds())) != 800 {
			t.Errorf("span %v: the domain must stay the data's", c.span)
		}
	}
	one := niceTime(base, base, 8, 0, 800)
	if one.Map(float64(base)) != 400 {
		t.Errorf("a single instant should sit in the middle, at %v", one.Map(float64(base)))
	}
}

func TestFormatters(t *testing.T) {
	for us, want := range map[float64]string{
		0: "0", 1: "1 µs", 500: "500 µs", 1000: "1 ms", 2500: "2.5 ms", 23_290_000: "23.3 s",
		1e6: "1 s", 120e6: "2 min", 90e6: "90 s", 0.5: "0.5 µs",
	} {
		if got := fmtDurationUS(us); got != want {
			t.Errorf("fmtDurationUS(%v) = %q, want %q", us, got, want)
		}
	}
	for v, want := range map[float64]string{
		1: "1", 2.5: "2.5", 0.125: "0.125", 1200: "1200", 0.30000000000000004: "0.3", 12.345: "12.3", 1982.4: "1982",
		-0.0042: "-0.0042",
	} {
		if got := fmtNum(v); got != want {
			t.Errorf("fmtNum(%v) = %q, want %q", v, got, want)
		}
	}
}
