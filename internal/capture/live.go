//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// LiveOptions tune a live capture.
type LiveOptions struct {
	Options
	// RingMB is the size of the kernel ring (default DefaultRingMB; the
	// ring is resident, so it is much of watch's memory). It is the capture's only
	// queue: it must hold what arrives while the decoding goroutine gets no
	// CPU, which a saturated host does to it at times. A bigger ring rides
	// out longer stalls before the kernel drops packets.
	RingMB int
	// MaxRingMB, when larger than RingMB, lets the ring grow: when the
	// kernel drops packets the capture opens a ring twice the size (up
	// to MaxRingMB) beside it and moves over without a gap (grow.go).
	// 0 or at most RingMB: the ring keeps its size.
	MaxRingMB int
	// Source picks the live capture OpenSource opens: SourceAuto,
	// SourceEBPF or SourcePacket ("": GAPSCOPE_CAPTURE, else
	// DefaultSource).
	Source string
	// ServerRows: the run reads the server's statement rows, which give a
	// statement whose answer the header-only capture cut its rows when
	// joined. Auto uses eBPF only then.
	ServerRows bool
	// BlockKB is the size of one ring block (default 1024 KiB; at least
	// 64 KiB, the largest frame). The kernel hands the ring over block by
	// block: smaller blocks mean more handovers (wake-ups) per packet.
	BlockKB int
}

// DefaultRingMB is the kernel ring's default size at the start. The
// kernel allocates the whole ring when it is set up and the process maps
// all of it, so it is resident even on an idle server (the largest part of
// an idle watch's memory). 24 MiB holds a 20 MB request whole even while
// the decoder gets no CPU (one request can be that large and arrives on
// loopback in tens of milliseconds: the field lab's 20 MB INSERT lost
// packets, and with it the statement, on a 16 MiB ring on a loaded host);
// a load that still makes the kernel drop packets grows the ring
// (MaxRingMB, DefaultMaxRingMB), which costs that burst's drops once.
const DefaultRingMB = 24

// Ring geometry: TPACKET_V3 blocks hold many variable-size frames; a block
// must fit the largest frame (64 KiB on lo with offloads).
const (
	ringBlockSize = 1 << 20
	ringFrameSize = 1 << 16
	// blockTimeout is how long the kernel fills a block before it hands
	// it over partly full. Each handover wakes the capture goroutine: at
	// a trickle (a sampled capture), every blockTimeout. Waking a Go
	// process from idle costs more than the wake itself: the runtime's
	// monitor thread then polls every 20 µs for a millisecond (a large
	// share of watch's CPU in `perf record -g -p` profiles under a saturating
	// sysbench with 20 ms; scripts/bench-watch-cpu.sh RATE=0 shows the
	// context switches). Packets carry the kernel's timestamps, and
	// the joiner waits seconds for the server's rows: 100 ms late costs
	// nothing but memory (a 1 MiB block at most).
	blockTimeout = 100 * time.Millisecond
	idleWait     = 2 * time.Second // longest wait for the ring: a stop interrupts it, and each wake of an idle watch costs
)

// Live is an open AF_PACKET capture on one interface.
type Live struct {
	opts  LiveOptions
	tp    *afpacket.TPacket
	rd    *v3Ring // reads tp's ring in place
	ready *readyWaiter
	link  layers.LinkType
	flink filterLink
	// dropOutgoing: the filter drops outgoing copies (loopback).
	dropOutgoing bool
	iface        string
	// closed: Close may be called from another goroutine.
	closed sync.Once
	// mu guards tp and ready against Close and the stop's interrupt while
	// a growing ring moves (grow, nil for a ring of fixed size).
	mu       sync.Mutex
	stopping bool
	grow     *ringGrowth
	// discarded counts the unfiltered frames queued while the ring was set
	// up, thrown away by attachFilter.
	discarded int
	// ignoresOutgoing: the kernel skips this socket for outgoing packets.
	ignoresOutgoing bool
	// fallback says why an auto source is this ring rather than eBPF.
	fallback string
	// tap, set by tests, sees every frame handed to the tracker.
	tap func(tsUS int64, frame []byte)
}

// OpenLive opens a TPACKET_V3 ring on iface with a BPF filter for the server
// ports. It needs CAP_NET_RAW (root); no libpcap is involved. Every packet
// Run reads has passed the filter: what the ring caught before the filter
// was attached is discarded here, which costs one poll timeout (~50 ms).
func OpenLive(iface string, opts LiveOptions) (*Live, error) {
	opts.Options = opts.Options.withDefaults()
	if opts.RingMB <= 0 {
		opts.RingMB = DefaultRingMB
	}
	link, flink, loopback, err := interfaceLink(iface)
	if err != nil {
		return nil, err
	}
	filter, err := buildFilter(opts.Ports, flink, loopback)
	if err != nil {
		return nil, err
	}
	r, err := openRing(iface, opts, opts.RingMB, filter, loopback)
	if err != nil {
		return nil, err
	}
	return &Live{opts: opts, tp: r.tp, rd: r.rd, ready: r.w, link: link, flink: flink, dropOutgoing: loopback, iface: iface,
		discarded: r.discarded, ignoresOutgoing: r.ignoresOutgoing, grow: newRingGrowth(iface, opts, filter, loopback)}, nil
}

// openedRing is a ring with its filter attached, ready to read.
type openedRing struct {
	tp              *afpacket.TPacket
	rd              *v3Ring // reads tp's ring in place
	w               *readyWaiter
	mb              int
	discarded       int
	ignoresOutgoing bool
}

// openRing opens a TPACKET_V3 ring of mb MiB on iface and attaches filter
// (after discarding what it caught before the filter).
func openRing(iface string, opts LiveOptions, mb int, filter []bpf.RawInstruction, loopback bool) (*openedRing, error) {
	block := ringBlockSize
	if opts.BlockKB > 0 {
		block = max(opts.BlockKB<<10, ringFrameSize)
	}
	tp, err := afpacket.NewTPacket(
		afpacket.OptInterface(iface),
		afpacket.TPacketVersion3,
		afpacket.OptFrameSize(ringFrameSize),
		afpacket.OptBlockSize(block),
		afpacket.OptNumBlocks(max(mb<<20/block, 2)),
		afpacket.OptBlockTimeout(blockTimeout),
		afpacket.OptPollTimeout(0), // reads never block: readyWaiter waits
	)
	if err != nil {
		return nil, fmt.Errorf("opening AF_PACKET ring on %s (needs root or CAP_NET_RAW): %w", iface, err)
	}
	ignoresOutgoing := loopback && ignoreOutgoing(tp)
	ring := liveRing{TPacket: tp, w: newReadyWaiter(socketFD(tp))}
	discarded, err := attachFilter(ring, filter)
	if err == nil {
		// Reading the kernel counters resets them: KernelDrops then counts
		// only packets the filter kept, not the discarded open window.
		err = tp.InitSocketStats()
	}
	if err != nil {
		ring.w.close()
		tp.Close()
		return nil, fmt.Errorf("attaching port filter on %s: %w", iface, err)
	}
	rd, err := newV3Ring(tp, block)
	if err != nil {
		ring.w.close()
		tp.Close()
		return nil, fmt.Errorf("reading the AF_PACKET ring on %s: %w", iface, err)
	}
	ring.w.readable = rd.ready
	return &openedRing{tp: tp, rd: rd, w: ring.w, mb: mb, discarded: discarded, ignoresOutgoing: ignoresOutgoing}, nil
}

// ErrStopped: the capture has ended.
var ErrStopped = errors.New("capture already stopped")

// ignoreOutgoing asks the kernel not to hand the socket outgoing packets
// (PACKET_IGNORE_OUTGOING, Linux 4.20+). On loopback every packet comes
// twice, and the filter already drops the outgoing copy, but only after
// the kernel cloned it for us in the sender's context; skipping the socket
// spares that clone on every packet. It reports whether the kernel took it
// (older kernels: the filter still drops the copy).
func ignoreOutgoing(tp *afpacket.TPacket) bool {
	fd := socketFD(tp)
	return fd >= 0 && unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1) == nil
}

// socketFD reads the ring's socket descriptor, which afpacket does not
// export (reading an unexported int through reflect is allowed; -1 if the
// field is not there in another version).
func socketFD(tp *afpacket.TPacket) int {
	f := reflect.ValueOf(tp).Elem().FieldByName("fd")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return -1
	}
	return int(f.Int())
}

// interfaceLink reads the interface's ARPHRD type. Loopback
// frames carry an Ethernet header, and the kernel hands each one to packet
// sockets twice (outgoing and incoming).
func interfaceLink(iface string) (layers.LinkType, filterLink, bool, error) {
	if iface == "" || iface == "any" {
		return 0, 0, false, errors.New("live capture needs one interface (e.g. lo, eth0), not \"any\"")
	}
	typ, err := hardwareType(iface)
	if err != nil {
		return 0, 0, false, fmt.Errorf("interface %q: %w", iface, err)
	}
	switch {
	case typ == arphrdEther:
		return layers.LinkTypeEthernet, filterEthernet, false, nil
	case typ == arphrdLoopback:
		return layers.LinkTypeEthernet, filterEthernet, true, nil
	case rawIPHardware(typ): // tun, wireguard, ppp, ip tunnels
		return layers.LinkTypeRaw, filterRawIP, false, nil
	}
	return 0, 0, false, fmt.Errorf("interface %q: unsupported hardware type %d", iface, typ)
}

// Close releases the ring. Run closes it too.
func (l *Live) Close() error {
	l.closed.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.grow != nil {
			l.grow.close()
		}
		l.ready.close()
		l.tp.Close()
	})
	return nil
}

// Run captures until ctx ends, calling emit for every statement; emit must
// be fast and never block. Packets are decoded where the kernel put them,
// in the ring, on the goroutine that reads it: nothing is copied, and the
// ring itself (RingMB) is the queue that rides out a slow moment (a copy
// into batches for a second goroutine cost more CPU than it saved). The
// tracker keeps no reference to a packet's bytes after Packet returns,
// which is what lets the ring take its block back.
func (l *Live) Run(ctx context.Context, emit func(*event.Statement)) (Stats, error) {
	defer l.Close()
	defer context.AfterFunc(ctx, l.interrupt)()
	t := NewTracker(l.opts.Options, emit)
	err := l.decode(ctx, t)
	t.Close(time.Now().UnixMicro())
	if _, v3, serr := l.tp.SocketStats(); serr == nil {
		t.stats.KernelDrops = int64(v3.Drops())
	}
	t.stats.KernelDrops += l.grow.dropsBefore()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil // stopping is how a live capture ends
	}
	st := t.Stats()
	st.Source = "packet"
	if l.fallback != "" {
		st.Notes = append(st.Notes, l.fallback)
	}
	st.Notes = append(st.Notes, l.grow.notes()...)
	return st, err
}

// RingBytes is the ring's size at open (a ring that grows on drops maps
// the larger one beside it, then moves: grow.go).
func (l *Live) RingBytes() int64 { return int64(l.opts.RingMB) << 20 }

// Describe says which capture this is.
func (l *Live) Describe() string {
	d := "AF_PACKET ring on " + l.iface
	if l.fallback != "" {
		d += " (" + l.fallback + ")"
	}
	return d
}

// ctxEvery+1 is how many frames a busy ring's reader takes between looks
// at its context (an empty ring's looks at it every time).
const ctxEvery = 1<<8 - 1

// decode feeds the tracker every packet the ring holds, waiting for the
// kernel to hand over a block when it holds none, until ctx ends.
func (l *Live) decode(ctx context.Context, t *Tracker) error {
	for n := 0; ; n++ {
		data, tsNS, ok := l.rd.readNS()
		if !ok || n&ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !ok {
			l.checkGrow(t)
			l.ready.wait(idleWait)
			continue
		}
		l.feed(t, tsNS/1000, tsNS, data)
		l.afterPacket(t)
	}
}

// decodePacket hands one frame to the tracker.
func (l *Live) decodePacket(t *Tracker, tsUS int64, data []byte) {
	if l.tap != nil {
		l.tap(tsUS, data)
	}
	t.Packet(l.link, tsUS, data)
}

// interrupt ends the ring's wait in progress and every later one (the
// capture is stopping), whichever ring is read by then.
func (l *Live) interrupt() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	l.ready.interrupt()
}
