package watch

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func TestBucketEdges(t *testing.T) {
	for _, us := range []int64{1, 2, 3, 4, 5, 7, 8, 9, 100, 1000, 10_000, 123_456, 1 << 40} {
		b := bucketOf(us)
		if low := bucketLow(b); low > us {
			t.Errorf("%d µs in bucket %d whose lower edge is %d", us, b, low)
		}
		if b+1 < sketchBuckets && bucketLow(b+1) <= us {
			t.Errorf("%d µs in bucket %d but bucket %d starts at %d", us, b, b+1, bucketLow(b+1))
		}
	}
}

func TestSketchQuantile(t *testing.T) {
	var k latencySketch
	for i := int64(1); i <= 1000; i++ {
		k.add(i * 100) // 100 µs .. 100 ms, uniform
	}
	p99 := bucketLow(k.quantileBucket(0.99))
	if p99 < 80_000 || p99 > 99_000 { // within a bucket (19%) below 99 ms
		t.Errorf("p99 of 100 µs..100 ms = %d µs", p99)
	}
}

func stmt(digest string, us int64) *event.Statement {
	return &event.Statement{Digest: digest, Parts: event.Parts{ClientUS: us}}
}

func TestOutlierRule(t *testing.T) {
	o := newOutlierRule()
	// A fresh digest: the floor alone decides.
	if o.observe(stmt("a", 9_999)) || !o.observe(stmt("a", 10_000)) {
		t.Error("a new digest is not judged by the floor")
	}
	// A digest that usually takes 30 ms: its usual runs do not stand out,
	// a run past its p99 does.
	for range 1000 {
		if o.observe(stmt("report", 30_000)) && o.sketches["report"].n > outlierMinSamples {
			t.Fatal("a usual run of a slow digest stood out")
		}
	}
	if !o.observe(stmt("report", 60_000)) {
		t.Error("a run at twice a slow digest's usual time did not stand out")
	}
	// A digest that usually takes 300 ms: at the ceiling every run counts.
	for range 200 {
		o.observe(stmt("batch", 300_000))
	}
	if !o.observe(stmt("batch", 300_000)) {
		t.Error("a 300 ms statement did not stand out (the ceiling)")
	}
	// A fast digest: its slow tail below the floor never stands out.
	for i := range 10_000 {
		if o.observe(stmt("point", int64(50+i%9000))) {
			t.Fatal("a statement under the floor stood out")
		}
	}
}

func TestSketchSpan(t *testing.T) {
	if sketchHigh-sketchLow+1 != sketchSpan {
		t.Fatalf("sketchSpan %d, the floor's and the ceiling's buckets %d..%d", sketchSpan, sketchLow, sketchHigh)
	}
}

// fullSketch is the sketch of every bucket the compact one stands for.
type fullSketch struct {
	n       uint64
	buckets [sketchBuckets]uint64
}

func (k *fullSketch) add(us int64) { k.n++; k.buckets[bucketOf(us)]++ }

func (k *fullSketch) quantileBucket(q float64) int {
	rank := uint64(q * float64(k.n))
	var seen uint64
	for b, c := range k.buckets {
		if seen += c; seen > rank {
			return b
		}
	}
	return sketchBuckets - 1
}

// TestCompactSketchDecides: between the floor and the ceiling, where the
// rule asks the p99, the compact sketch answers as the full one, whatever
// the distribution (all under the floor, around it, past the ceiling).
func TestCompactSketchDecides(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		var c latencySketch
		var f fullSketch
		center := int64(1) << (rng.IntN(22)) // 1 µs .. 2 s
		for range 50 + rng.IntN(3000) {
			us := center/2 + rng.Int64N(center*2+1)
			if rng.IntN(50) == 0 {
				us *= 10
			}
			c.add(us)
			f.add(us)
		}
		if c.n != f.n {
			t.Fatalf("trial %d: counted %d, full sketch %d", trial, c.n, f.n)
		}
		for us := outlierFloor.Microseconds(); us < outlierCeiling.Microseconds(); us += 997 {
			if got, want := bucketOf(us) > c.quantileBucket(0.99), bucketOf(us) > f.quantileBucket(0.99); got != want {
				t.Fatalf("trial %d (center %d µs): %d µs stands out %v, full sketch says %v", trial, center, us, got, want)
			}
		}
	}
}

// TestOutlierRuleBounded: 500,000 digests seen once (an alias per call)
// leave at most maxSketches sketches, and a digest that turns hot after
// them still gets its p99.
func TestOutlierRuleBounded(t *testing.T) {
	o := newOutlierRule()
	for i := range 500_000 {
		o.observe(stmt(fmt.Sprintf("churn-%d", i), 500))
		if len(o.sketches) > maxSketches {
			t.Fatalf("%d sketches after %d digests, bound %d", len(o.sketches), i+1, maxSketches)
		}
	}
	for i := range 20_000 {
		o.observe(stmt("report", 30_000))
		o.observe(stmt(fmt.Sprintf("late-%d", i), 500))
	}
	if o.sketches["report"] == nil {
		t.Fatal("a digest that turned hot after the churn has no sketch")
	}
	if o.observe(stmt("report", 30_000)) {
		t.Error("a usual run of a hot digest stood out: the rule has no p99 for it")
	}
	if len(o.sketches) > maxSketches {
		t.Errorf("%d sketches, bound %d", len(o.sketches), maxSketches)
	}
}
