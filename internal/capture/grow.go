//go:build linux

package capture

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/bpf"
)

// A ring that grows. The kernel allocates the whole ring when it is set up
// and the process maps all of it, so the ring is resident from the start
// whether or not anything arrives: on an idle server it was most of watch's
// memory. A live capture can start with a small ring (LiveOptions.RingMB)
// and, when the kernel reports drops, open one twice the size (up to
// MaxRingMB) beside it and move over: the new ring is set up and filtered
// on another goroutine while the old one is still read, so nothing is lost
// while it opens (a 64 MiB ring takes 25-600 ms to map on a busy host).
//
// The move: both rings got the packets since the new one's filter was
// attached. When the reader is behind, the old ring is read up to the new
// one's first packet (every packet before it is there and only there);
// then the old ring is closed and the new one read, skipping what the old
// one gave: packets stamped well before the last one fed, and, near it
// (each socket stamps a packet itself, microseconds apart), those whose
// bytes match a packet fed within dedupSpan of it.

// DefaultMaxRingMB is the largest a live capture's ring grows to by
// default (the size the ring had before it could grow: no kernel drops
// under a saturating sysbench on 2 cores, docs/performance.md).
const DefaultMaxRingMB = 64

const (
	// growCheckPackets: the kernel's drop counter is read every this many
	// packets (and whenever the ring is empty): a system call per packet
	// would cost more than the capture of a small one.
	growCheckPackets = 1024
	// dedupSpan is how far apart the two sockets' stamps of one packet can
	// be (they are taken as the kernel hands the packet to each socket in
	// turn, microseconds apart).
	dedupSpan = 2 * time.Millisecond
)

// ringGrowth is a live capture's plan to grow its ring, touched by the
// decoding goroutine only, except for what the opening goroutine hands
// over under mu.
type ringGrowth struct {
	iface    string
	opts     LiveOptions
	filter   []bpf.RawInstruction
	loopback bool
	curMB    int
	maxMB    int
	packets  int
	// seenDrops: the current ring's drop count when last read.
	seenDrops uint
	// closedDrops: the drops of the rings already replaced.
	closedDrops int64
	// opening: a bigger ring is being opened (or opened and not moved to
	// yet: the move needs its first packet).
	opening bool
	mu      sync.Mutex
	next    *openedRing // set by the opening goroutine
	openErr error
	closed  bool // the capture closed: a ring opened late is closed at once
	// lastNS is the stamp of the newest packet fed (Unix ns); recent the
	// packets fed while a bigger ring opens. After a move, seen holds the
	// hashes of the old ring's last packets, skipped when the new ring
	// brings them again (until dedupUntil, Unix ns).
	lastNS     int64
	recent     []recentPacket
	seed       maphash.Seed
	seen       map[uint64]bool
	dedupUntil int64
	// grew records each move, for the report; moves counts them (read by
	// tests from another goroutine).
	grew  []string
	moves atomic.Int32
}

// newRingGrowth returns the growth plan of a ring opened with opts, or nil
// when the ring keeps its size.
func newRingGrowth(iface string, opts LiveOptions, filter []bpf.RawInstruction, loopback bool) *ringGrowth {
	if opts.MaxRingMB <= opts.RingMB {
		return nil
	}
	return &ringGrowth{iface: iface, opts: opts, filter: filter, loopback: loopback, curMB: opts.RingMB,
		maxMB: opts.MaxRingMB, seed: maphash.MakeSeed()}
}

// afterPacket counts a packet decoded; every growCheckPackets it looks
// at the drops.
func (l *Live) afterPacket(t *Tracker) {
	if g := l.grow; g != nil {
		if g.packets++; g.packets >= growCheckPackets {
			g.packets = 0
			l.checkGrow(t)
		}
	}
}

// checkGrow moves to a bigger ring opened meanwhile, or starts opening
// one when the kernel dropped packets since the last look.
func (l *Live) checkGrow(t *Tracker) {
	g := l.grow
	if g == nil {
		return
	}
	if g.opening {
		g.mu.Lock()
		next, err := g.next, g.openErr
		g.mu.Unlock()
		switch {
		case err != nil:
			g.opening, g.maxMB = false, g.curMB // it will not open: keep this one
			g.grew = append(g.grew, fmt.Sprintf("the capture ring could not grow past %d MiB: %v", g.curMB, err))
		case next != nil:
			l.moveTo(t, next)
		}
		return
	}
	if g.curMB >= g.maxMB {
		return
	}
	_, v3, err := l.tp.SocketStats()
	if err != nil || v3.Drops() == g.seenDrops {
		return
	}
	g.seenDrops = v3.Drops()
	g.opening = true
	go g.open(min(2*g.curMB, g.maxMB))
}

// open opens a ring of mb MiB, on its own goroutine.
func (g *ringGrowth) open(mb int) {
	r, err := openRing(g.iface, g.opts, mb, g.filter, g.loopback)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err != nil:
		g.openErr = err
	case g.closed:
		r.close()
	default:
		g.next = r
	}
}

// close ends the plan: a ring opened but not moved to is closed.
func (g *ringGrowth) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.next != nil {
		g.next.close()
		g.next = nil
	}
}

func (r *openedRing) close() {
	r.w.close()
	r.tp.Close()
}

// moveTo moves to the new ring: the old one is read up to the new one's
// first packet (when the reader is behind) and closed; the new one's
// packets the old one already gave are skipped. With no packet in the new
// ring yet (the kernel hands a block over when it is full or after
// blockTimeout) it does nothing: the next check tries again.
func (l *Live) moveTo(t *Tracker, next *openedRing) {
	data, firstNS, ok := next.rd.readNS()
	if !ok {
		return
	}
	first := append([]byte(nil), data...)
	g := l.grow
	if cut := firstNS; g.lastNS < cut {
		l.drainUpTo(t, cut)
	}
	g.seen = map[uint64]bool{}
	for _, r := range g.recent {
		if r.ns >= g.lastNS-int64(dedupSpan) {
			g.seen[r.h] = true
		}
	}
	g.recent, g.dedupUntil = nil, g.lastNS+int64(dedupSpan)
	_, v3, _ := l.tp.SocketStats()
	g.closedDrops += int64(v3.Drops())
	g.grew = append(g.grew, fmt.Sprintf("the capture ring grew from %d to %d MiB after the kernel dropped packets", g.curMB, next.mb))
	g.curMB, g.seenDrops, g.opening = next.mb, 0, false
	g.moves.Add(1)
	g.mu.Lock()
	g.next = nil
	g.mu.Unlock()
	l.swap(next)
	l.feed(t, firstNS/1000, firstNS, first)
}

// drainUpTo feeds t the old ring's packets stamped before cut (Unix ns).
// Packets from cut on are in the new ring too, which will bring them.
func (l *Live) drainUpTo(t *Tracker, cut int64) {
	for {
		data, ns, ok := l.rd.readNS()
		if !ok {
			if !l.ready.wait(drainQuiet) {
				return // a partly full block is handed over within blockTimeout: none is left
			}
			continue
		}
		if ns >= cut {
			return
		}
		l.feed(t, ns/1000, ns, data)
	}
}

// feed decodes a packet read from the ring. While a bigger ring opens it
// remembers the packets' hashes; just after a move it skips the packets
// the old ring already gave: those stamped well before its last one, and
// those near it that it holds the bytes of.
func (l *Live) feed(t *Tracker, tsUS, tsNS int64, data []byte) {
	if g := l.grow; g != nil {
		if g.seen != nil {
			switch {
			case tsNS > g.dedupUntil:
				g.seen = nil
			case tsNS < g.dedupUntil-2*int64(dedupSpan):
				return
			case g.seen[maphash.Bytes(g.seed, data)]:
				return
			}
		}
		if g.opening {
			g.remember(tsNS, data)
		}
		g.lastNS = max(g.lastNS, tsNS)
	}
	l.decodePacket(t, tsUS, data)
}

// recentPacket is a packet fed while a bigger ring opens.
type recentPacket struct {
	ns int64
	h  uint64
}

// remember keeps the hash of a packet fed while a bigger ring opens,
// forgetting those older than dedupSpan before it.
func (g *ringGrowth) remember(ns int64, data []byte) {
	if len(g.recent) >= 4096 {
		keep := g.recent[:0]
		for _, r := range g.recent {
			if r.ns >= ns-int64(dedupSpan) {
				keep = append(keep, r)
			}
		}
		g.recent = keep
	}
	g.recent = append(g.recent, recentPacket{ns: ns, h: maphash.Bytes(g.seed, data)})
}

// swap makes next the ring Run reads and closes the old one.
func (l *Live) swap(next *openedRing) {
	l.mu.Lock()
	old := &openedRing{tp: l.tp, rd: l.rd, w: l.ready}
	l.tp, l.rd, l.ready = next.tp, next.rd, next.w
	if l.stopping {
		l.ready.interrupt()
	}
	l.mu.Unlock()
	old.close()
}

// growNotes says how the ring grew, for the run's notes.
func (g *ringGrowth) notes() []string {
	if g == nil {
		return nil
	}
	return g.grew
}

// dropsBefore is what the rings already replaced dropped.
func (g *ringGrowth) dropsBefore() int64 {
	if g == nil {
		return 0
	}
	return g.closedDrops
}
