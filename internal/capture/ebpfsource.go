//go:build linux

package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	ebpfasm "github.com/cilium/ebpf/asm"
	"github.com/gapscope/gapscope/internal/event"
	"golang.org/x/sys/unix"
)

// The header-only live capture: a program at the interface's tc hook
// (ebpfprog.go) hands over one record per packet of the ports (requests
// whole, answers whole up to headBytes+tailBytes of payload, longer ones
// cut to their first headBytes and last tailBytes), read in place from a
// BPF ring buffer by one goroutine that drives the same tracker and
// decoder as the AF_PACKET ring (headmode.go says what a cut answer
// leaves unknown).
const (
	headBytes = 1024
	tailBytes = 128
	// ebpfPoll is the reader's timer while records come. Header-only
	// records are small, so waiting for BPFWakeBytes took longer at a
	// saturating load than the server's history_long and a thread's
	// history keep a row (docs/performance.md, "The header-only eBPF
	// capture, built"): a slow statement reached watch after its row was
	// lost. While nothing comes the wait doubles up to idleWait.
	ebpfPoll = 25 * time.Millisecond
	// lightPoll is the timer while records come slower than lightRate a
	// second (a few hundred statements): every wake of the process costs
	// it far more than the records it reads then, and at that rate the
	// server's history_long keeps a statement for over a second, ten
	// times this wait. A busier wire brings ebpfPoll back at once.
	lightPoll = 100 * time.Millisecond
	lightRate = 2000
	// lightWakeBytes: while the reader keeps lightPoll, the program wakes
	// it once this much waits, so that a burst after a light spell reaches
	// it within milliseconds (at 20k statements a second, ~12 ms), not at
	// the end of its wait: the server's history rings turn over in tens
	// of milliseconds at such rates. A light load's records stay below it.
	lightWakeBytes = 128 << 10
	// fullMapSize bounds the connections in the full map (an LRU map).
	fullMapSize = 65536
)

// EBPF is an open header-only capture on one interface.
type EBPF struct {
	opts LiveOptions
	ring *BPFRing
	full *ebpf.Map
	// wake holds the flag the reader sets before a long sleep: the
	// program's next record wakes it (1), or a smaller wake threshold in
	// bytes (submitWaking); wakeSet is what the reader last wrote there.
	// Its second entry is the program's latch: set when a record past the
	// threshold woke the reader, cleared by the reader (through wakeMem,
	// no system call) before it waits again, so that one wake is asked
	// for each time the reader falls behind, not one per record.
	wake    *ebpf.Map
	wakeMem *ebpf.Memory
	wakeSet uint32
	iface   string
	closed  sync.Once
	// egressNote, on an interface other than loopback, says what its
	// egress stamps may count as queue (stampsAsTheRing).
	egressNote string
}

// OpenEBPF loads and attaches the header-only program on iface for the
// server ports. It needs CAP_BPF and CAP_NET_ADMIN (root) and a kernel
// with BPF ring buffers (5.8+); tcx (6.6+) or a clsact qdisc.
func OpenEBPF(iface string, opts LiveOptions) (*EBPF, error) {
	return openEBPF(iface, opts, false)
}

func openEBPF(iface string, opts LiveOptions, forceClsact bool) (*EBPF, error) {
	opts.Options = opts.Options.withDefaults()
	if opts.RingMB <= 0 {
		opts.RingMB = DefaultRingMB
	}
	if iface == "" || iface == "any" {
		return nil, errors.New("live capture needs one interface (e.g. lo, eth0), not \"any\"")
	}
	if len(opts.Ports) > 32 {
		return nil, errors.New("ebpf capture: at most 32 ports")
	}
	full, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LRUHash, KeySize: uint32(len(fullKey{})), ValueSize: 4, MaxEntries: fullMapSize})
	if err != nil {
		return nil, fmt.Errorf("creating the full-payload map (needs CAP_BPF): %w", err)
	}
	wake, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 2, Flags: unix.BPF_F_MMAPABLE})
	if err != nil {
		full.Close()
		return nil, fmt.Errorf("creating the wake-up map (needs CAP_BPF): %w", err)
	}
	wakeMem, err := wake.Memory()
	if err != nil {
		full.Close()
		wake.Close()
		return nil, fmt.Errorf("mapping the wake-up map: %w", err)
	}
	ring, err := attachBPF(iface, opts.RingMB, func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions {
		return headerProgram(l2, opts.Ports, headBytes, tailBytes, ringFD, dropsFD, full.FD(), wake.FD())
	}, hooks{clsact: forceClsact, loIngress: true})
	if err != nil {
		full.Close()
		wake.Close()
		return nil, err
	}
	return &EBPF{opts: opts, ring: ring, full: full, wake: wake, wakeMem: wakeMem, iface: iface}, nil
}

// RingBytes is the BPF ring buffer's data size (a power of two at least
// the RingMB asked for).
func (e *EBPF) RingBytes() int64 { return int64(len(e.ring.data)) }

// Describe says which capture this is.
func (e *EBPF) Describe() string {
	return fmt.Sprintf("eBPF header-only (%s on %s; answers past %d+%d bytes cut)", e.ring.Hook, e.iface, headBytes, tailBytes)
}

// Close detaches the program and releases the maps. Run closes it too.
func (e *EBPF) Close() error {
	e.closed.Do(e.release)
	return nil
}

func (e *EBPF) release() { e.ring.Close(); e.full.Close(); e.wake.Close() }

// Run captures until ctx ends, calling emit for every statement, as
// Live.Run does: records are decoded in place, on the goroutine that
// reads them.
func (e *EBPF) Run(ctx context.Context, emit func(*event.Statement)) (Stats, error) {
	defer e.Close()
	t := NewTracker(e.opts.Options, emit)
	t.heads, t.full = true, e.setFull
	read := func(rec []byte) {
		t.Record(rec, headBytes, e.ring.WallUS(int64(binary.NativeEndian.Uint64(rec))))
	}
	defer context.AfterFunc(ctx, e.ring.Interrupt)()
	// The reader keeps its pace with the timer (ebpfPoll; lightPoll while
	// records come slowly, the program then waking it at lightWakeBytes),
	// backing off to idleWait while nothing comes, so that an idle watch
	// wakes every 2 s. Before a wait longer than its pace it asks the
	// program to wake it at the next record: a burst after a quiet spell
	// then reaches the tracker at once, not up to 2 s later (the AF_PACKET
	// ring hands over such a trickle within blockTimeout).
	pace := readerPace{every: ebpfPoll}
	wait := ebpfPoll
	for ctx.Err() == nil {
		if n := e.ring.Each(recordHeader, read); n > 0 {
			wait = pace.read(n)
			continue
		}
		if wait > pace.every {
			e.setWake(1)
			if n := e.ring.Each(recordHeader, read); n > 0 { // came before the flag was set
				wait = pace.read(n)
				continue
			}
		} else {
			e.setWake(pace.wakeBytes())
		}
		pace.waited(time.Now(), t.stats.Flows)
		e.rearmWake()
		e.ring.Wait(wait)
		wait = min(2*wait, idleWait)
	}
	e.ring.Each(recordHeader, read) // what the program wrote before the stop
	t.Close(time.Now().UnixMicro())
	t.stats.KernelDrops = e.ring.Dropped()
	st := t.Stats()
	st.Source = "ebpf (" + e.ring.Hook + ")"
	if e.egressNote != "" {
		st.Notes = append(st.Notes, e.egressNote)
	}
	return st, nil
}

// readerPace is the reader's timer while records come: ebpfPoll, or
// lightPoll while they come slower than lightRate a second and no
// connection opened, judged over each wait and the reads after it. New
// connections keep ebpfPoll: their threads are read while they live only
// if the wire hands them over soon (a connection-per-request client's
// close within milliseconds).
type readerPace struct {
	every time.Duration // the timer now
	since time.Time     // when the wait being judged began
	got   int           // records read since then
	flows int64         // the tracker's connections then
}

// read counts n records read and returns the wait to use next.
func (p *readerPace) read(n int) time.Duration {
	p.got += n
	return p.every
}

// waited judges the records read since the last wait began, now that
// another begins: the pace for the next ones.
func (p *readerPace) waited(now time.Time, flows int64) {
	if !p.since.IsZero() && p.got > 0 {
		p.every = paceFor(p.got, now.Sub(p.since))
		if flows != p.flows {
			p.every = ebpfPoll
		}
	}
	p.since, p.got, p.flows = now, 0, flows
}

// wakeBytes is the wake threshold the program keeps during a wait at this
// pace: lightWakeBytes at lightPoll, else none (0: its own).
func (p *readerPace) wakeBytes() uint32 {
	if p.every == lightPoll {
		return lightWakeBytes
	}
	return 0
}

// paceFor is the timer for records read at got over elapsed.
func paceFor(got int, elapsed time.Duration) time.Duration {
	if elapsed > 0 && float64(got) < lightRate*elapsed.Seconds() {
		return lightPoll
	}
	return ebpfPoll
}

// setWake writes the wake flag (submitWaking) unless it holds v already:
// a flag of 1 is written each time, since the program clears it when it
// wakes the reader. A failure leaves the reader at its timer.
func (e *EBPF) setWake(v uint32) {
	if v == e.wakeSet && v != 1 {
		return
	}
	_ = e.wake.Put(uint32(0), v)
	e.wakeSet = v
}

// rearmWake clears the program's wake latch (submitWaking) if it is set:
// the reader has read what woke it, and the next time records pile up
// past the threshold one of them may wake it again.
func (e *EBPF) rearmWake() {
	var v [4]byte
	if _, err := e.wakeMem.ReadAt(v[:], wakeLatchOffset); err != nil || v == [4]byte{} {
		return
	}
	_, _ = e.wakeMem.WriteAt(make([]byte, 4), wakeLatchOffset)
}

// wakeLatchOffset is where the wake map's second entry lies in its
// memory: an array's entries are 8-aligned.
const wakeLatchOffset = 8

// setFull puts a connection in the program's full map, or takes it out.
func (e *EBPF) setFull(key flowKey, clientIsA, on bool) {
	cli, srv := key.a, key.b
	if !clientIsA {
		cli, srv = srv, cli
	}
	k := fullKeyOf(cli, srv)
	if on {
		_ = e.full.Put(k, uint32(1)) // a failure leaves the answers cut: said by their notes
		return
	}
	_ = e.full.Delete(k)
}
