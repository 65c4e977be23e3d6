package report

import (
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"
)

// addToSketch (a table lookup for small latencies) must leave the sketch
// as ddsketch's own Add does: same count, same value at every quantile.
func TestAddToSketchAsDDSketchAdd(t *testing.T) {
	want, err := ddsketch.LogCollapsingLowestDenseDDSketch(sketchAccuracy, sketchBins)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgg("d", "t")
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		var us int64
		switch i % 4 {
		case 0:
			us = 0
		case 1:
			us = r.Int64N(int64(len(smallIndexes())) + 10) // around the table's end too
		case 2:
			us = r.Int64N(1000)
		default:
			us = r.Int64N(100_000_000)
		}
		a.addToSketch(us)
		_ = want.Add(float64(us))
	}
	if got, want := a.sketch.GetCount(), want.GetCount(); got != want {
		t.Fatalf("count %v, want %v", got, want)
	}
	for q := 0.0; q <= 1; q += 0.001 {
		g, err1 := a.sketch.GetValueAtQuantile(q)
		w, err2 := want.GetValueAtQuantile(q)
		if g != w || err1 != nil || err2 != nil {
			t.Fatalf("quantile %.3f: %v (%v), want %v (%v)", q, g, err1, w, err2)
		}
	}
}
