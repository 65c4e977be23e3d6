package event

import (
	"slices"
	"testing"
)

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

func TestSeverityOrder(t *testing.T) {
	fs := []Finding{{Code: "a", Severity: SeverityInfo}, {Code: "b", Severity: "bogus"}, {Code: "c", Severity: SeverityCritical},
		{Code: "d", Severity: SeverityWarning}, {Code: "e", Severity: SeverityCritical}}
	slices.SortStableFunc(fs, MoreSevere)
	var got string
	for _, f := range fs {
		got += f.Code
	}
	if got != "cedab" {
		t.Errorf("most severe first, stable otherwise: got %s, want cedab", got)
	}
}
