package report

import (
	"math/rand/v2"
	"testing"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/gapscope/gapscope/internal/event"
)

// addToSketch (a table lookup for small latencies) must leave the sketch
// as ddsketch's own Add does: same count, same value at every quantile.
func TestAddToSketchAsDDSketchAdd(t *testing.T) {
	want, err := ddsketch.LogCollapsingLowestDenseDDSketch(sketchAccuracy, sketchBins)
	if err != nil {
		t.Fatal(err)
	}
	a := newAgg("d", "t")
	a.ensureSketch()
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

// A row keeps its latencies exactly up to exactValues calls and has no
// sketch until then; past it, and after a merge past it, its sketch holds
// every latency, as one fed each of them.
func TestSketchBeyondExactValues(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	feed := func(a *agg, want *ddsketch.DDSketch, n int) {
		for range n {
			us := r.Int64N(200_000)
			a.add(&event.Statement{}, us)
			a.classStats.add(&event.Statement{}, nil, us, a.calls)
			_ = want.Add(float64(us))
		}
	}
	sketch := func() *ddsketch.DDSketch {
		s, err := ddsketch.LogCollapsingLowestDenseDDSketch(sketchAccuracy, sketchBins)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	same := func(name string, a *agg, want *ddsketch.DDSketch) {
		t.Helper()
		if a.sketch == nil {
			t.Fatalf("%s: %d calls and no sketch", name, a.calls)
		}
		if got, w := a.sketch.GetCount(), want.GetCount(); got != w || int64(got) != a.calls {
			t.Fatalf("%s: count %v, want %v (%d calls)", name, got, w, a.calls)
		}
		for q := 0.0; q <= 1; q += 0.01 {
			g, _ := a.sketch.GetValueAtQuantile(q)
			w, _ := want.GetValueAtQuantile(q)
			if g != w {
				t.Fatalf("%s: quantile %.2f: %v, want %v", name, q, g, w)
			}
		}
	}

	small, wantSmall := newAgg("s", "s"), sketch()
	feed(small, wantSmall, exactValues)
	if small.sketch != nil || len(small.exact) != exactValues {
		t.Fatalf("%d calls: sketch %v, %d exact values", small.calls, small.sketch != nil, len(small.exact))
	}
	feed(small, wantSmall, 1)
	same("one past exactValues", small, wantSmall)

	a, b, want := newAgg("a", "a"), newAgg("b", "b"), sketch()
	feed(a, want, 100)
	feed(b, want, 100)
	if err := a.merge(b); err != nil {
		t.Fatal(err)
	}
	same("two rows of 100 merged", a, want)

	big, other, wantBig := newAgg("c", "c"), newAgg("d", "d"), sketch()
	feed(big, wantBig, 500)
	feed(other, wantBig, 50)
	if err := big.merge(other); err != nil {
		t.Fatal(err)
	}
	same("a row of 50 merged into one of 500", big, wantBig)
	if err := other.merge(big); err != nil {
		t.Fatal(err)
	}
	if other.calls != 600 || other.sketch.GetCount() != 600 {
		t.Fatalf("a row of 500 merged into one of 50: %d calls, %v in its sketch", other.calls, other.sketch.GetCount())
	}
}
