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
// The move: both rings get every packet from the moment the new one's
// filter is attached. Packets before it are in the old ring only, so the
// old ring is read up to the new one's first packet and the rest is read
// from the new ring. The reader moves as soon as the new ring is open (it
// waits for the new ring's first block rather than read on in the old
// one), but it may have fed some of the old ring's later packets by then:
// every packet fed since the bigger ring began opening is remembered by
// the hash of its bytes (a frame's headers make it unique), and the new
// ring's copies of those are skipped. The old ring may drop packets while
// the new one opens (it is the one too small): those are not remembered,
// so the new ring's copies are fed. A stamp does not decide it: the two
// sockets stamp one packet each in turn, microseconds apart, and a packet
// the old ring dropped has no stamp to compare.

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
	// turn, microseconds apart): past the last packet fed by this much,
	// none of the new ring's packets can be one the old ring gave.
	dedupSpan = 2 * time.Millisecond
	// maxRemembered bounds the hashes kept while a bigger ring opens (16
	// bytes each): the oldest half is forgotten when it is reached.
	maxRemembered = 1 << 17
	// moveWait is how long the reader waits for the new ring's first
	// block when it is open: the kernel hands a block over within
	// blockTimeout of its first packet.
	moveWait = 3 * blockTimeout
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
	// opened: the opening goroutine set next or openErr (read without the
	// lock on every packet, so the reader moves as soon as it can).
	opened  atomic.Bool
	mu      sync.Mutex
	next    *openedRing // set by the opening goroutine
	openErr error
	closed  bool // the capture closed: a ring opened late is closed at once
	// lastNS is the stamp of the newest packet fed (Unix ns); recent the
	// packets fed while a bigger ring opens (forgotNS the newest stamp of
	// those forgotten to bound them). After a move, seen holds their
	// hashes, skipped when the new ring brings them again (until
	// dedupUntil, Unix ns).
	lastNS     int64
	recent     []recentPacket
	forgotNS   int64
	seed       maphash.Seed
	seen       map[uint64]int
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
		if g.packets++; g.packets >= growCheckPackets || (g.opening && g.opened.Load()) {
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
			g.recent = nil
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
	g.opening, g.forgotNS = true, 0
	g.opened.Store(false)
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
		return
	default:
		g.next = r
	}
	g.opened.Store(true)
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
// packets the old one already gave are skipped. It waits moveWait for the
// new ring's first block; with none yet it does nothing, and the next
// check tries again.
func (l *Live) moveTo(t *Tracker, next *openedRing) {
	data, firstNS, ok := next.rd.readNS()
	if !ok && next.w.wait(moveWait) {
		data, firstNS, ok = next.rd.readNS()
	}
	if !ok {
		return
	}
	first := append([]byte(nil), data...)
	g := l.grow
	if cut := firstNS; g.lastNS < cut {
		l.drainUpTo(t, cut)
	}
	g.seen = make(map[uint64]int, len(g.recent))
	for _, r := range g.recent {
		g.seen[r.h]++
	}
	g.recent, g.dedupUntil = nil, g.lastNS+int64(dedupSpan)
	_, v3, _ := l.tp.SocketStats()
	g.closedDrops += int64(v3.Drops())
	g.grew = append(g.grew, fmt.Sprintf("the capture ring grew from %d to %d MiB after the kernel dropped packets", g.curMB, next.mb))
	g.curMB, g.seenDrops, g.opening = next.mb, 0, false
	g.opened.Store(false)
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
// remembers the packets' hashes; just after a move it skips the new ring's
// copies of the packets the old ring already gave.
func (l *Live) feed(t *Tracker, tsUS, tsNS int64, data []byte) {
	if g := l.grow; g != nil {
		if g.seen != nil && !g.given(tsNS, data) {
			return
		}
		if g.opening {
			g.remember(tsNS, data)
		}
		g.lastNS = max(g.lastNS, tsNS)
	}
	l.decodePacket(t, tsUS, data)
}

// given reports whether a packet of the new ring, just after a move, is
// still to be fed: not one the old ring gave (each remembered copy
// matches once). Past dedupUntil none can be, and the memory is let go.
func (g *ringGrowth) given(tsNS int64, data []byte) bool {
	switch {
	case tsNS > g.dedupUntil:
		g.seen = nil
		return true
	case tsNS <= g.forgotNS:
		return false // older than the hashes kept: the old ring gave it
	}
	h := maphash.Bytes(g.seed, data)
	if n := g.seen[h]; n > 0 {
		g.seen[h] = n - 1
		return false
	}
	return true
}

// recentPacket is a packet fed while a bigger ring opens.
type recentPacket struct {
	ns int64
	h  uint64
}

// remember keeps the hash of a packet fed while a bigger ring opens; at
// maxRemembered it forgets the oldest half.
func (g *ringGrowth) remember(ns int64, data []byte) {
	if len(g.recent) >= maxRemembered {
		half := len(g.recent) / 2
		g.forgotNS = max(g.forgotNS, g.recent[half-1].ns)
		g.recent = append(g.recent[:0], g.recent[half:]...)
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
