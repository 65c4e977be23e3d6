package event

import "testing"

func TestSpanOverlap(t *testing.T) {
	cases := []struct {
		s        Span
		from, to int64
		want     int64
	}{
		{Span{10, 20}, 0, 100, 10},
		{Span{10, 20}, 15, 100, 5},
		{Span{10, 20}, 0, 12, 2},
		{Span{10, 20}, 20, 30, 0},
		{Span{10, 20}, 30, 40, 0},
		{Span{10, 10}, 0, 40, 0},
	}
	for _, c := range cases {
		if got := c.s.Overlap(c.from, c.to); got != c.want {
			t.Errorf("%v.Overlap(%d,%d) = %d, want %d", c.s, c.from, c.to, got, c.want)
		}
	}
}
