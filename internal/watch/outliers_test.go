package watch

import (
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
	p99 := k.quantile(0.99)
	if p99 < 80_000 || p99 > 99_000 { // within a bucket (19%) below 99 ms
		t.Errorf("p99 of 100 µs..100 ms = %d µs", p99)
	}
}

func stmt(digest string, us int64) *event.Statement {
	return &event.Statement{Digest: digest, ClientUS: us}
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
