package report

import (
	"container/heap"
	"hash/maphash"
)

// The profile's digest budget. A profile keeps at most MaxDigests rows of
// its own; a statement of any further digest is counted in "(other)"
// (calls, time, its sketch). So that a digest that turns hot after the
// budget filled is not lost in "(other)" for the rest of a week-long run,
// the digests beyond the budget are ranked by a space-saving counter
// (Metwally et al., "Efficient computation of frequent and top-k elements
// in data streams", 2005) weighted by time: a digest whose time counted
// beyond the budget surely exceeds the time of the smallest kept row is
// promoted to a row of its own and that row is folded into "(other)".
// Memory is then bounded by MaxDigests rows, MaxDigests counters, and
// nothing per distinct digest seen.

// digestSeed hashes digests for the space-saving counters (one per
// process, read only).
var digestSeed = maphash.MakeSeed()

// ssCounter is one space-saving counter: a digest's (hash's) weight since
// it took the counter, plus err, the weight of the digest it replaced,
// which it may or may not have had.
type ssCounter struct {
	hash uint64
	w    int64 // estimate: at most w-err of it surely belongs to hash
	err  int64
}

// spaceSaving keeps k counters, the smallest on top.
type spaceSaving struct {
	k   int
	c   []ssCounter
	idx map[uint64]int // hash -> position in c
}

func newSpaceSaving(k int) *spaceSaving {
	return &spaceSaving{k: k, idx: map[uint64]int{}}
}

func (s *spaceSaving) Len() int           { return len(s.c) }
func (s *spaceSaving) Less(i, j int) bool { return s.c[i].w < s.c[j].w }
func (s *spaceSaving) Swap(i, j int) {
	s.c[i], s.c[j] = s.c[j], s.c[i]
	s.idx[s.c[i].hash] = i
	s.idx[s.c[j].hash] = j
}
func (s *spaceSaving) Push(x any) {
	c := x.(ssCounter)
	s.idx[c.hash] = len(s.c)
	s.c = append(s.c, c)
}
func (s *spaceSaving) Pop() any {
	c := s.c[len(s.c)-1]
	s.c = s.c[:len(s.c)-1]
	delete(s.idx, c.hash)
	return c
}

// add counts w more for h and returns the weight that surely belongs to
// h since it took its counter (its estimate less the inherited error).
func (s *spaceSaving) add(h uint64, w int64) int64 {
	if i, ok := s.idx[h]; ok {
		s.c[i].w += w
		heap.Fix(s, i)
		return s.c[i].w - s.c[i].err
	}
	if len(s.c) < s.k {
		heap.Push(s, ssCounter{hash: h, w: w})
		return w
	}
	// Replace the smallest counter: the newcomer may have had its weight.
	top := &s.c[0]
	delete(s.idx, top.hash)
	*top = ssCounter{hash: h, w: top.w + w, err: top.w}
	s.idx[h] = 0
	heap.Fix(s, 0)
	return w
}

// remove forgets h (promoted to a row of its own).
func (s *spaceSaving) remove(h uint64) {
	if i, ok := s.idx[h]; ok {
		heap.Remove(s, i)
	}
}

// keptHeap finds the kept row with the least weight. Entries are not
// updated as rows grow (that would cost every statement a heap fix): a
// row's weight only grows, so a stale entry is a lower bound, and min
// refreshes stale entries from the top until the top one is current.
type keptHeap []keptEntry

type keptEntry struct {
	a *agg
	w int64 // a's weight when last looked at
}

func (h keptHeap) Len() int           { return len(h) }
func (h keptHeap) Less(i, j int) bool { return h[i].w < h[j].w }
func (h keptHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].a.heapIdx, h[j].a.heapIdx = i, j
}
func (h *keptHeap) Push(x any) {
	e := x.(keptEntry)
	e.a.heapIdx = len(*h)
	*h = append(*h, e)
}
func (h *keptHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = keptEntry{}
	*h = old[:len(old)-1]
	e.a.heapIdx = -1
	return e
}

// min returns the kept row of least weight and that weight (nil when none
// is kept).
func (h *keptHeap) min() (*agg, int64) {
	for len(*h) > 0 {
		top := &(*h)[0]
		if w := top.a.weight(); w != top.w {
			top.w = w
			heap.Fix(h, 0)
			continue
		}
		return top.a, top.w
	}
	return nil, 0
}

// weight ranks a row for the budget: its time, plus one per call so that
// rows of statements that take no time (COM_PING, a server-time profile
// without timers) still rank by how often they come, plus what it earned
// in "(other)" before its promotion.
func (a *agg) weight() int64 { return a.totalUS + a.calls + a.credit }
