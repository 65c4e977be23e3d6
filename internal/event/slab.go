package event

import "sync/atomic"

// Slabs hands out statements from blocks of SlabLen, and takes a block
// back for reuse once every statement of it was released: a live capture
// makes one statement per statement on the wire, and allocating them
// fresh (the allocation, and the collector's marking and sweeping it
// brings on) was a visible share of watch's CPU at saturation
// (docs/performance.md).
//
// A statement never released is simply collected with its block, so
// Release is an optimisation on a path that knows the statement's end.
// Releasing one that is still read, or a copy of one, hands its memory to
// a new statement: only the path that ends a statement's life releases it
// (in watch, after its accounting and its sinks). Releasing the same
// statement twice does nothing.
//
// New is called from one goroutine; Release from any.
type Slabs struct {
	cur  *slab
	next int
	free chan *slab
}

// SlabLen is how many statements one block holds: 14 of ~480 bytes fill
// a 6,784-byte size class.
const SlabLen = 14

// freeSlabs bounds the blocks kept for reuse (~7 MiB when full). A consumer
// releases in bursts (watch's main loop takes a quarter of a second of
// statements at a time: ~500 blocks at 30k statements a second), and a
// block that finds no room is collected, so the list holds a burst.
const freeSlabs = 1024

type slab struct {
	stmts [SlabLen]Statement
	// live counts the statements not yet released; the block is reused
	// when it reaches 0 (its statements were all handed out by then).
	live atomic.Int32
	home *Slabs
}

// NewSlabs returns an empty allocator.
func NewSlabs() *Slabs { return &Slabs{free: make(chan *slab, freeSlabs)} }

// New returns a zeroed statement.
func (p *Slabs) New() *Statement {
	if p.cur == nil || p.next == SlabLen {
		p.cur, p.next = p.take(), 0
	}
	s := &p.cur.stmts[p.next]
	s.slab = p.cur
	p.next++
	return s
}

// take returns a released block, or a new one.
func (p *Slabs) take() *slab {
	var b *slab
	select {
	case b = <-p.free:
	default:
		b = &slab{home: p}
	}
	b.live.Store(SlabLen)
	return b
}

// Release ends s's life: once every statement of its block is released,
// the block is cleared and kept for reuse. A statement not from Slabs is
// left alone.
func (s *Statement) Release() {
	b := s.slab
	if b == nil {
		return
	}
	s.slab = nil // a second Release of s does nothing
	if b.live.Add(-1) != 0 {
		return
	}
	clear(b.stmts[:])
	select {
	case b.home.free <- b:
	default: // enough blocks kept: this one is collected
	}
}
