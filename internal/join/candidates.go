package join

import (
	"cmp"
	"slices"

	"github.com/gapscope/gapscope/internal/collect"
)

// spanIndex narrows connOfRows to the connections that can hold an ended
// thread's rows. A row is a hit on a connection only if one of its pending
// wire statements spans the row's start (from its request's first byte to
// its answer, within fitTolUS); a connection with no such statement for any
// of the rows has no hit and is never chosen. Trying every connection with
// pending statements for every ended thread made a connection-per-request
// burst quadratic: hundreds of ended threads against hundreds of
// connections per pass were a third of watch's CPU.
type spanIndex struct {
	stale  bool
	spans  []wireSpan // answered statements, by lo
	maxLen int64      // the longest span in spans
	ids    []uint64   // candidates' result buffer
	seen   map[uint64]struct{}
	// exhaustive lists every connection with pending statements instead:
	// the reference a test holds the index to.
	exhaustive bool
}

// wireSpan is one pending wire statement's [lo, hi]: the row starts the
// statement can explain.
type wireSpan struct {
	lo, hi int64
	id     uint64
}

// build indexes every pending wire statement of every connection.
func (x *spanIndex) build(j *Joiner) {
	x.spans, x.maxLen = x.spans[:0], 0
	for id, c := range j.conns {
		for i := 0; i < c.wires.len(); i++ {
			answer := latestStart(c, i)
			if answer >= noEnd {
				continue // no answer yet (a COM_QUIT): no evidence
			}
			sp := wireSpan{lo: c.wires.at(i).s.TReqFirst - j.clk.fitTolUS, hi: answer + j.clk.fitTolUS, id: id}
			x.spans = append(x.spans, sp)
			x.maxLen = max(x.maxLen, sp.hi-sp.lo)
		}
	}
	slices.SortFunc(x.spans, func(a, b wireSpan) int { return cmp.Compare(a.lo, b.lo) })
	x.stale = false
}

// candidates returns the connections with a pending wire statement that
// can hold one of rows (on the capture's clock), each once. The slice is
// reused by the next call.
func (j *Joiner) candidates(rows []collect.ServerStatement) []uint64 {
	x := &j.thr.spans
	if x.stale || x.seen == nil {
		x.build(j)
	}
	if x.seen == nil {
		x.seen = map[uint64]struct{}{}
	}
	clear(x.seen)
	x.ids = x.ids[:0]
	if x.exhaustive {
		for id, c := range j.conns {
			if c.wires.len() > 0 {
				x.ids = append(x.ids, id)
			}
		}
		slices.Sort(x.ids)
		return x.ids
	}
	add := func(id uint64) {
		if _, ok := x.seen[id]; !ok {
			x.seen[id] = struct{}{}
			x.ids = append(x.ids, id)
		}
	}
	for i := range rows {
		start := rows[i].StartUS
		// spans with lo <= start, scanning back while one could still
		// reach start (none is longer than maxLen)
		k, _ := slices.BinarySearchFunc(x.spans, start, func(sp wireSpan, t int64) int {
			if sp.lo <= t {
				return -1
			}
			return 1
		})
		for k--; k >= 0 && x.spans[k].lo >= start-x.maxLen; k-- {
			if x.spans[k].hi >= start {
				add(x.spans[k].id)
			}
		}
	}
	slices.Sort(x.ids) // the same rows, the same order: a tie breaks the same way every run
	return x.ids
}
