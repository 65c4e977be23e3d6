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
	// maxSketches bounds the digests followed; past it, new digests are
	// judged by the floor alone.
	maxSketches = 20_000
)

// outlierRule applies the rule above. It belongs to the capture's
// goroutine (wireStage.take), which feeds it every statement.
type outlierRule struct {
	sketches map[string]*latencySketch
}

func newOutlierRule() *outlierRule { return &outlierRule{sketches: map[string]*latencySketch{}} }

// observe counts s in its digest's sketch and reports whether it stands
// out: past the bucket that holds the digest's p99 (a digest that always
// takes the same time has no outliers but by the ceiling). Statements below the floor cost a map lookup and an increment.
func (o *outlierRule) observe(s *event.Statement) bool {
	us := s.ClientUS
	sk := o.sketches[s.Digest]
	if sk == nil && len(o.sketches) < maxSketches {
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

// latencySketch is a histogram of latencies in buckets a quarter of a
// doubling wide (19% apart): enough to tell a statement's p99 from its
// outliers, in 1.5 KB per digest whatever the count.
type latencySketch struct {
	n       uint64
	buckets [sketchBuckets]uint64
}

// sketchBuckets covers 1 µs to 2^48 µs, four buckets per doubling.
const sketchBuckets = 48 * 4

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
	k.buckets[bucketOf(us)]++
}

// quantileBucket returns the bucket holding the q-quantile.
func (k *latencySketch) quantileBucket(q float64) int {
	rank := uint64(q * float64(k.n))
	var seen uint64
	for b, c := range k.buckets {
		seen += c
		if seen > rank {
			return b
		}
	}
	return sketchBuckets - 1
}

// quantile returns the lower edge of the bucket holding the q-quantile.
func (k *latencySketch) quantile(q float64) int64 { return bucketLow(k.quantileBucket(q)) }
