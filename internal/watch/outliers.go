package watch

import (
	"math/bits"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// The outlier rule. A statement stands out when its client time is at
// least outlierFloor and at least its digest's running p99, the p99 capped
// at outlierCeiling:
//
//	client_us >= max(outlierFloor, min(p99(digest), outlierCeiling))
//
// Every such statement is joined by reads of its own thread's history,
// whatever the budget and the history_long ring do.
//
//   - The floor keeps the fast majority out: a healthy OLTP statement takes
//     well under a millisecond, and 10 ms is what a user starts to feel
//     when a page runs a handful of them; below it, the p99 of a digest
//     of point selects would make 1% of a busy server's statements
//     "outliers", each costing a read of the server.
//   - The p99 keeps a digest that is always slow (a report that always
//     takes 50 ms) from making every one of its runs an outlier: its usual
//     runs are decomposed with the join sample's, its slow ones stand out.
//   - The ceiling: whatever a digest usually takes, a statement of 100 ms
//     or more is always joined: that is the time a DBA looks for, and at
//     most ten such statements a second per connection can happen.
//
// Until a digest has outlierMinSamples statements its p99 is unknown and
// the floor alone decides.
const (
	outlierFloor      = 10 * time.Millisecond
	outlierCeiling    = 100 * time.Millisecond
	outlierMinSamples = 100
	// maxSketches bounds the digests followed (20,000 × ~170 bytes with
	// the map's entry: under 4 MB). Past it, the digests that have not
	// reached outlierMinSamples are dropped, at most once every
	// sweepEvery new digests (a sweep reads every sketch), so a digest that
	// turns hot later still gets one; new digests while none is free are
	// judged by the floor alone. Without the sweep an application naming
	// its statements anew (an alias per call) fills the map with digests
	// seen once, and every digest after them goes without a p99 for good.
	maxSketches = 20_000
	sweepEvery  = maxSketches / 8
)

// outlierRule applies the rule above. It belongs to the capture's
// goroutine (wireStage.take), which feeds it every statement.
type outlierRule struct {
	sketches map[string]*latencySketch
	// missed counts the digests turned away since the last sweep.
	missed int
}

func newOutlierRule() *outlierRule { return &outlierRule{sketches: map[string]*latencySketch{}} }

// observe counts s in its digest's sketch and reports whether it stands
// out: past the bucket that holds the digest's p99 (a digest that always
// takes the same time has no outliers but by the ceiling). Statements below the floor cost a map lookup and an increment.
func (o *outlierRule) observe(s *event.Statement) bool {
	us := s.ClientUS
	sk := o.sketches[s.Digest]
	if sk == nil && o.room() {
		sk = &latencySketch{}
		o.sketches[s.Digest] = sk
	}
	if sk != nil {
		sk.add(us)
	}
	if us < outlierFloor.Microseconds() {
		return false
	}
	if us >= outlierCeiling.Microseconds() || sk == nil || sk.n < outlierMinSamples {
		return true
	}
	return bucketOf(us) > sk.quantileBucket(0.99)
}

// room reports whether a new digest can have a sketch, sweeping the
// undecided ones out when the map is full (see maxSketches).
func (o *outlierRule) room() bool {
	if len(o.sketches) < maxSketches {
		return true
	}
	if o.missed++; o.missed < sweepEvery {
		return false
	}
	o.missed = 0
	for d, sk := range o.sketches {
		if sk.n < outlierMinSamples {
			delete(o.sketches, d)
		}
	}
	return len(o.sketches) < maxSketches
}

// latencySketch is a histogram of latencies in buckets a quarter of a
// doubling wide (19% apart): enough to tell a statement's p99 from its
// outliers. The rule compares a latency with the p99 only between the
// floor and the ceiling, so only the buckets there are kept; the
// latencies under the floor are counted in one bucket and those past the
// ceiling in another: the same answers as a sketch of every bucket, in
// ~150 bytes per digest instead of 1.5 KB.
type latencySketch struct {
	n            uint64
	below, above uint64
	buckets      [sketchSpan]uint64 // bucketOf(floor) .. bucketOf(ceiling)
}

// sketchBuckets covers 1 µs to 2^48 µs, four buckets per doubling.
const sketchBuckets = 48 * 4

// The buckets a latencySketch keeps.
var (
	sketchLow  = bucketOf(outlierFloor.Microseconds())
	sketchHigh = bucketOf(outlierCeiling.Microseconds())
)

// sketchSpan is sketchHigh-sketchLow+1, as a constant for the array
// (TestSketchSpan checks it).
const sketchSpan = 15

// bucketOf is the bucket of a latency in µs: the index of its highest bit
// times four, plus the next two bits (below 4 µs, one bucket per µs).
func bucketOf(us int64) int {
	if us < 4 {
		return int(max(us, 0))
	}
	hi := bits.Len64(uint64(us)) - 1
	sub := int(uint64(us)>>(hi-2)) & 3
	return min(hi*4+sub, sketchBuckets-1)
}

// bucketLow is the smallest latency (µs) bucket b holds (buckets 4-7 are
// never used).
func bucketLow(b int) int64 {
	if b < 8 {
		return int64(min(b, 4))
	}
	hi, sub := b/4, b%4
	return int64(4+sub) << (hi - 2)
}

func (k *latencySketch) add(us int64) {
	k.n++
	switch b := bucketOf(us); {
	case b < sketchLow:
		k.below++
	case b > sketchHigh:
		k.above++
	default:
		k.buckets[b-sketchLow]++
	}
}

// quantileBucket returns the bucket holding the q-quantile: sketchLow-1
// when it is under the floor's bucket, sketchHigh+1 when past the
// ceiling's.
func (k *latencySketch) quantileBucket(q float64) int {
	rank := uint64(q * float64(k.n))
	seen := k.below
	if seen > rank {
		return sketchLow - 1
	}
	for i, c := range k.buckets {
		seen += c
		if seen > rank {
			return sketchLow + i
		}
	}
	return sketchHigh + 1
}
