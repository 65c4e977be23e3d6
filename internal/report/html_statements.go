package report

import (
	"cmp"
	"math"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
)

// StatementSummary accumulates what the HTML report draws from statements
// (watch data): the decomposition per digest and the queue time per
// thread-pool group over time. Memory is bounded whatever the number of
// statements, so a caller can stream a large store through it.
type StatementSummary struct {
	profile *Profile
	queue   queueSeries
	n       int64
	joined  int64
}

// NewStatementSummary returns an empty summary.
func NewStatementSummary() *StatementSummary {
	return &StatementSummary{profile: NewProfile(ProfileOptions{Metric: ClientLatency}),
		queue: queueSeries{widthUS: 1e6, buckets: map[queueKey]queueBucket{}}}
}

// Add counts one statement.
func (s *StatementSummary) Add(st *event.Statement) {
	s.profile.Add(st) // a replica's binlog stream only as a note
	if st.Why == event.ReplicaStream {
		return
	}
	s.n++
	if !st.Joined {
		return
	}
	s.joined++
	if st.PoolGroup != nil && st.TReqFirst > 0 {
		s.queue.add(*st.PoolGroup, st.TReqFirst, st.QueueUS)
	}
}

// Len is the number of statements added.
func (s *StatementSummary) Len() int64 { return s.n }

// TopDecomposed returns the n digests with the most client time among
// those with joined statements (which carry the five parts).
func (s *StatementSummary) TopDecomposed(n int) []DigestRow {
	var out []DigestRow
	for _, d := range s.profile.Result().Digests {
		if d.Parts != nil && len(out) < n {
			out = append(out, d)
		}
	}
	return out
}

// QueuePoint is one time bucket of a pool group's queue wait.
type QueuePoint struct {
	TimeUS  int64 // bucket start
	MaxUS   int64 // worst queue wait of a statement in the bucket
	TotalUS int64 // all queue wait in the bucket
	Calls   int64
}

// GroupQueue is a thread-pool group's queue wait over time.
type GroupQueue struct {
	Group      int
	WidthUS    int64 // bucket width
	Points     []QueuePoint
	MaxUS      int64
	Statements int64
}

// PoolQueue returns each pool group's queue series, by group.
func (s *StatementSummary) PoolQueue() []GroupQueue { return s.queue.series() }

// maxQueueBuckets bounds the (group, bucket) cells; past it the bucket
// width doubles and cells merge, so a week-long watch costs what a
// minute-long one does.
const maxQueueBuckets = 4096

type queueKey struct {
	group  int
	bucket int64
}

type queueBucket struct{ max, total, calls int64 }

type queueSeries struct {
	widthUS int64
	buckets map[queueKey]queueBucket
}

func (q *queueSeries) add(group int, tUS, queueUS int64) {
	k := queueKey{group, tUS / q.widthUS}
	b := q.buckets[k]
	b.max, b.total, b.calls = max(b.max, queueUS), b.total+queueUS, b.calls+1
	q.buckets[k] = b
	if len(q.buckets) > maxQueueBuckets {
		q.coarsen()
	}
}

// coarsen doubles the bucket width until the cells fit again.
func (q *queueSeries) coarsen() {
	for len(q.buckets) > maxQueueBuckets/2 {
		q.widthUS *= 2
		merged := make(map[queueKey]queueBucket, len(q.buckets))
		for k, b := range q.buckets {
			nk := queueKey{k.group, floorDiv(k.bucket, 2)}
			m := merged[nk]
			m.max, m.total, m.calls = max(m.max, b.max), m.total+b.total, m.calls+b.calls
			merged[nk] = m
		}
		q.buckets = merged
	}
}

// mergeFactor is the power of two by which buckets merge for drawing.
func (q *queueSeries) mergeFactor() int64 {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for k := range q.buckets {
		lo, hi = min(lo, k.bucket), max(hi, k.bucket)
	}
	k := int64(1)
	for hi >= lo && (hi-lo)/k+1 > maxQueuePoints {
		k *= 2
	}
	return k
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// maxQueuePoints bounds the points of a drawn series: buckets merge
// (by powers of two) until the time range fits in that many.
const maxQueuePoints = 150

func (q *queueSeries) series() []GroupQueue {
	k := q.mergeFactor()
	by := map[int]*GroupQueue{}
	cells := map[queueKey]queueBucket{}
	for key, b := range q.buckets {
		nk := queueKey{key.group, floorDiv(key.bucket, k)}
		m := cells[nk]
		m.max, m.total, m.calls = max(m.max, b.max), m.total+b.total, m.calls+b.calls
		cells[nk] = m
	}
	for key, b := range cells {
		g := by[key.group]
		if g == nil {
			g = &GroupQueue{Group: key.group, WidthUS: q.widthUS * k}
			by[key.group] = g
		}
		g.Points = append(g.Points, QueuePoint{TimeUS: key.bucket * g.WidthUS, MaxUS: b.max, TotalUS: b.total, Calls: b.calls})
		g.MaxUS = max(g.MaxUS, b.max)
		g.Statements += b.calls
	}
	out := make([]GroupQueue, 0, len(by))
	for _, g := range by {
		slices.SortFunc(g.Points, func(a, b QueuePoint) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GroupQueue) int { return a.Group - b.Group })
	return out
}
