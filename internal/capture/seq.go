package capture

import (
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// halfFlow tracks the sequence space of one direction.
type halfFlow struct {
	init     bool
	sawSYN   bool
	next     uint32 // next in-order sequence number
	wscale   int8   // window-scale shift from the SYN; -1 unknown
	ooo      []oooSeg
	oooBytes int
	free     [][]byte // recycled segment buffers
}

// oooSeg is a segment that arrived ahead of a hole, copied: data holds
// its payload, or for a header-only record cut short its first head bytes
// then its tail; size is its length on the wire.
type oooSeg struct {
	seq  uint32
	tsUS int64
	data []byte
	head int
	size int
	cut  bool
}

// packet is the segment as the capture handed it over.
func (s *oooSeg) packet(tsUS int64) packet {
	p := packet{tsUS: tsUS, payload: s.data[:s.head], size: s.size}
	if s.cut {
		p.tail = s.data[s.head:]
	}
	return p
}

// seqDiff is a-b in sequence space (RFC 1982 arithmetic).
func seqDiff(a, b uint32) int32 { return int32(a - b) }

func (h *halfFlow) release() {
	h.ooo, h.free, h.oooBytes = nil, nil, 0
}

// data runs the payload of p through sequence tracking to the decoder.
func (f *flow) data(dir mysqlproto.Direction, p *packet) {
	h := &f.half[dir]
	if !h.init {
		h.init, h.next = true, p.seq // first segment of a mid-stream direction
	}
	n := p.size
	if n == 0 {
		return
	}
	// MySQL is half duplex: once this side speaks, the other side has said
	// all it will say for now, so a hole left there will never be filled.
	if other := 1 - dir; len(f.half[other].ooo) > 0 {
		f.flushHole(other)
	}
	d := seqDiff(p.seq, h.next)
	switch {
	case d == 0:
		f.deliverPacket(dir, p, 0)
		h.next += uint32(n)
		f.drain(dir, p.tsUS)
	case d < 0:
		f.overlap(dir, p, int(d))
	default:
		// A cut answer ahead of a hole is buffered as it came (head,
		// tail and length): a slow reader's receiver drops segments past
		// its window and the retransmission fills the hole later.
		f.t.stats.OutOfOrder++
		f.buffer(dir, p)
	}
}

// deliverPacket delivers p's payload from byte from on.
func (f *flow) deliverPacket(dir mysqlproto.Direction, p *packet, from int) {
	if !p.cut() {
		f.deliver(dir, p.tsUS, p.payload[from:])
		return
	}
	if tailAt := p.size - len(p.tail); from >= tailAt {
		f.deliver(dir, p.tsUS, p.tail[from-tailAt:])
		return
	}
	if dir == toServer || from > len(p.payload) {
		// Bytes that were not captured where the decoder must have them: a
		// request cut (the program cuts only answers, but a connection
		// between two server ports has no answer side), or a
		// retransmission whose fresh bytes start in the middle.
		if dir == toClient && !f.inTLS {
			f.ans.skipped += int64(p.size - from)
		}
		f.t.stats.Gaps++
		f.gap(dir, p.tsUS)
		f.wantFull()
		return
	}
	f.answerCut(p.tsUS, p.payload[from:], p.tail, p.size-from)
}

// gap tells the decoder (or the TLS flight timer) that bytes were lost.
func (f *flow) gap(dir mysqlproto.Direction, tsUS int64) {
	if f.inTLS {
		f.tls.gap()
	} else {
		f.dec.Gap(dir, tsUS)
		f.ans.boundary()
	}
}

// overlap handles a segment starting before h.next: a retransmission, maybe
// carrying new bytes at its end.
func (f *flow) overlap(dir mysqlproto.Direction, p *packet, d int) {
	h := &f.half[dir]
	n := p.size
	if n <= 1 && d == -1 {
		return // keep-alive or zero-window probe, not a retransmission
	}
	f.retransmit()
	if fresh := n + d; fresh > 0 {
		f.deliverPacket(dir, p, n-fresh)
		h.next += uint32(fresh)
		f.drain(dir, p.tsUS)
	}
}

func (f *flow) retransmit() {
	f.retrans++
	f.t.stats.Retransmits++
}

// buffer keeps a copy of a segment that arrived ahead of a hole, in sequence
// order. Past MaxOutOfOrder bytes the hole is declared lost.
func (f *flow) buffer(dir mysqlproto.Direction, p *packet) {
	h := &f.half[dir]
	i := 0
	for i < len(h.ooo) && seqDiff(h.ooo[i].seq, p.seq) < 0 {
		i++
	}
	if i < len(h.ooo) && h.ooo[i].seq == p.seq && h.ooo[i].size >= p.size {
		f.retransmit() // the same early segment twice
		return
	}
	var buf []byte
	if k := len(h.free); k > 0 {
		buf, h.free = h.free[k-1][:0], h.free[:k-1]
	}
	seg := oooSeg{seq: p.seq, tsUS: p.tsUS, data: append(append(buf, p.payload...), p.tail...),
		head: len(p.payload), size: p.size, cut: p.cut()}
	h.ooo = append(h.ooo, oooSeg{})
	copy(h.ooo[i+1:], h.ooo[i:])
	h.ooo[i] = seg
	h.oooBytes += len(seg.data)
	if h.oooBytes > f.t.opts.MaxOutOfOrder {
		f.flushHole(dir)
	}
}

// drain delivers buffered segments that have become contiguous. Their bytes
// reach the application when the hole fills, so they carry tsUS.
func (f *flow) drain(dir mysqlproto.Direction, tsUS int64) {
	h := &f.half[dir]
	for len(h.ooo) > 0 && f.state == stateMySQL {
		s := h.ooo[0]
		if seqDiff(s.seq, h.next) > 0 {
			return
		}
		h.ooo = h.ooo[:copy(h.ooo, h.ooo[1:])]
		h.oooBytes -= len(s.data)
		if fresh := int(seqDiff(s.seq+uint32(s.size), h.next)); fresh > 0 {
			p := s.packet(max(tsUS, s.tsUS))
			f.deliverPacket(dir, &p, s.size-fresh)
			h.next += uint32(fresh)
		}
		h.free = append(h.free, s.data)
	}
}

// flushHole declares every hole in dir lost: the decoder is told about the
// gap and the buffered bytes after it are delivered.
func (f *flow) flushHole(dir mysqlproto.Direction) {
	h := &f.half[dir]
	for len(h.ooo) > 0 && f.state == stateMySQL {
		f.t.stats.Gaps++
		first := h.ooo[0]
		f.gap(dir, first.tsUS)
		h.next = first.seq
		f.drain(dir, first.tsUS) // lost bytes: the rest were seen when captured
	}
}

// deliver hands in-order bytes to the decoder (or, after STARTTLS, to the
// TLS flight timer).
func (f *flow) deliver(dir mysqlproto.Direction, tsUS int64, data []byte) {
	if f.inTLS {
		f.tls.bytes(f, dir, tsUS, data)
		return
	}
	switch {
	case dir == toClient && f.headAnswers():
		f.answerBytes(tsUS, data)
	case dir == toServer && f.t.heads:
		f.ans.clientSpoke()
		f.dec.Feed(dir, tsUS, data)
	default:
		f.dec.Feed(dir, tsUS, data)
	}
	if info := f.dec.Info(); info != nil && (info.TLS || info.Compressed) {
		if info.TLS {
			f.startTLS()
		}
		if f.t.heads {
			f.wantFull() // the kernel did when it saw the handshake; not for a connection older than the capture
		}
	}
}
