//go:build linux

package capture

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	ebpfasm "github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The eBPF side of a capture: a program at an interface's traffic-control
// hook (tcx, Linux 6.6+; a clsact qdisc's filter on older kernels) writes
// records into a BPF ring buffer that this process maps and reads in
// place, as it reads the AF_PACKET ring. The header-only source
// (ebpfsource.go) and wirebench's floors (benchmarks/wirebench) build
// their programs on it. The reader is woken only when BPFWakeBytes wait,
// or at its timeout, as the AF_PACKET ring hands over a block when it is
// full or old.

// BPFWakeBytes: a record submitted while this much waits wakes the
// reader. It is a guard against the ring filling, not the reader's pace:
// every record submitted past it, until the reader has run, asks the
// kernel for another wake-up, which at 256 KiB put the program's share of
// the host above the AF_PACKET tap's. The reader keeps its own pace with
// a timer (ebpfsource.go).
const BPFWakeBytes = 1 << 20

// Ring buffer header bits (include/uapi/linux/bpf.h).
const (
	ringbufBusy    = 1 << 31
	ringbufDiscard = 1 << 30
	ringbufHdrLen  = 8
)

// Program labels and return values shared by the programs built here.
const (
	// BPFNext is the label that passes the packet on; BPFDrop the one that
	// counts it in the drops map, then passes it on.
	BPFNext = "next"
	BPFDrop = "drop"
	// tcNext: a tcx program's "next program decides"; a clsact filter
	// in direct-action mode reads it as TC_ACT_UNSPEC, the same.
	tcNext = -1
)

// The program's stack and the __sk_buff fields it reads.
const (
	BPFSkbLen   = 0  // __sk_buff.len
	skbProtocol = 16 // __sk_buff.protocol (network order)
	// BPFScratch is where BPFMatch leaves the IP header on the stack (20
	// bytes, or 40 for IPv6, from here up to -24 at most; an IPv4 header
	// without options has the TCP header's first 20 bytes after it);
	// -8..-4 hold the TCP ports as sent, BPFTCPOffset the TCP header's
	// data-offset byte.
	BPFScratch   = -64
	BPFTCPOffset = -24
	// bpfTCPHead is where BPFMatch loads the TCP header's first 13 bytes
	// (ports to data offset) when they did not come with the IP header.
	bpfTCPHead = -160
)

// BPFRing is an attached program, the ring buffer it fills and a per-CPU
// counter of the packets it could not queue.
type BPFRing struct {
	ring, drops *ebpf.Map
	prog        *ebpf.Program
	links       []link.Link
	clsact      *clsactFilter // the program's attachment when the kernel has no tcx
	consumer    []byte        // the consumer position's page (read-write)
	producer    []byte        // the producer position's page, then the data
	data        []byte
	mask        uint64
	wrapped     []byte // a record that wraps past the data's end, copied
	offset      int64  // CLOCK_REALTIME − CLOCK_MONOTONIC, ns
	// w waits for the ring through Go's network poller, as the AF_PACKET
	// ring's reader does (ready.go says why not poll(2)).
	w *readyWaiter
	// Hook says where the program runs: "tcx" or "clsact".
	Hook   string
	closed bool
}

// BPFBuild makes the program for an interface whose frames start with a
// link header of l2 bytes (14 on Ethernet and loopback, 0 on raw-IP
// devices), writing into the ring buffer ringFD and counting what it
// cannot queue in dropsFD (a one-slot per-CPU array of u64).
type BPFBuild func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions

// AttachBPF loads the program build makes, attaches it to iface's egress
// (and ingress, but on loopback, where every packet leaves and comes
// back) through tcx, or through a clsact qdisc's filters where the kernel
// has no tcx, and maps a ring buffer of ringMB MiB (rounded up to a power
// of two). It needs CAP_BPF and CAP_NET_ADMIN (root).
func AttachBPF(iface string, ringMB int, build BPFBuild) (_ *BPFRing, err error) {
	return attachBPF(iface, ringMB, build, hooks{})
}

// hooks says where a program runs beyond AttachBPF's default.
type hooks struct {
	// clsact: a clsact filter even where the kernel has tcx (tests).
	clsact bool
	// loIngress: on loopback, the ingress hook rather than egress. The
	// capture's timestamps then come from where the AF_PACKET ring's do
	// (its tap on loopback sees the packet coming back in, just before
	// tc ingress), not from the sender's write: an answer's last packet
	// would otherwise be stamped before the server's statement timer ends.
	loIngress bool
}

func attachBPF(iface string, ringMB int, build BPFBuild, h hooks) (_ *BPFRing, err error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", iface, err)
	}
	loopback := ifi.Flags&net.FlagLoopback != 0
	l2 := int32(0) // raw-IP devices (tun, wireguard)
	if loopback || len(ifi.HardwareAddr) == 6 {
		l2 = 14 // Ethernet, and loopback's zeroed Ethernet header
	}
	size := uint32(1) << 20
	for int(size>>20) < ringMB && size < 1<<30 {
		size <<= 1
	}
	s := &BPFRing{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.ring, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: size}); err != nil {
		return nil, fmt.Errorf("creating the BPF ring buffer: %w", err)
	}
	if s.drops, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("creating the drop counter: %w", err)
	}
	s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SchedCLS,
		License:      "GPL", // the ring buffer helpers are GPL-only
		Instructions: build(l2, s.ring.FD(), s.drops.FD()),
	})
	if err != nil {
		return nil, fmt.Errorf("loading the capture program: %w", err)
	}
	if err := s.attach(ifi.Index, loopback, h); err != nil {
		return nil, fmt.Errorf("attaching the capture program to %s (needs CAP_BPF and CAP_NET_ADMIN): %w", iface, err)
	}
	if err := s.mmap(int(size)); err != nil {
		return nil, err
	}
	s.w = newReadyWaiter(s.ring.FD())
	s.w.readable = s.pending
	s.clock()
	return s, nil
}

// attach hooks the program at tcx, or, when the kernel has none (before
// 6.6) or h.clsact, at a clsact qdisc.
func (s *BPFRing) attach(ifindex int, loopback bool, h hooks) error {
	egress, ingress := true, !loopback
	if loopback && h.loIngress {
		egress, ingress = false, true
	}
	if !h.clsact {
		var attach []ebpf.AttachType
		if egress {
			attach = append(attach, ebpf.AttachTCXEgress)
		}
		if ingress {
			attach = append(attach, ebpf.AttachTCXIngress)
		}
		var err error
		for _, a := range attach {
			var l link.Link
			if l, err = link.AttachTCX(link.TCXOptions{Interface: ifindex, Program: s.prog, Attach: a}); err != nil {
				break
			}
			s.links = append(s.links, l)
		}
		if err == nil {
			s.Hook = "tcx"
			return nil
		}
		for _, l := range s.links {
			l.Close()
		}
		s.links = nil
		if !errors.Is(err, ebpf.ErrNotSupported) {
			return err
		}
	}
	f, err := attachClsact(ifindex, s.prog.FD(), egress, ingress)
	if err != nil {
		return fmt.Errorf("no tcx hook, and a clsact filter failed: %w", err)
	}
	s.clsact, s.Hook = f, "clsact"
	return nil
}

// mmap maps the ring buffer: the consumer page read-write; the producer
// page and the data, read-only. The kernel would map the data twice in a
// row, so that a record that wraps reads as one slice, but every page
// mapped twice counts twice in the process's resident size (a 64 MiB ring
// read as 128 MiB); the data is mapped once, and the rare record that
// wraps is copied whole into wrapped.
func (s *BPFRing) mmap(size int) error {
	page := os.Getpagesize()
	var err error
	if s.consumer, err = unix.Mmap(s.ring.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mapping the ring buffer's consumer page: %w", err)
	}
	if s.producer, err = unix.Mmap(s.ring.FD(), int64(page), page+size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mapping the ring buffer: %w", err)
	}
	s.data = s.producer[page:]
	s.mask = uint64(size - 1)
	return nil
}

// record returns the size bytes of the record at pos (after its header),
// in place unless it wraps past the data's end.
func (s *BPFRing) record(pos, size uint64) []byte {
	if end := pos + size; end <= uint64(len(s.data)) {
		return s.data[pos:end]
	}
	s.wrapped = append(s.wrapped[:0], s.data[pos:]...)
	s.wrapped = append(s.wrapped, s.data[:pos+size-uint64(len(s.data))]...)
	return s.wrapped
}

// clock measures the offset from the program's clock (monotonic) to the
// wall clock gapscope's capture stamps packets with; measured again at
// every wait, so that a step of the wall clock is followed. The wall clock
// is read between two readings of the monotonic one: on a saturated host
// the thread can be descheduled between two readings for tens of
// milliseconds, and an offset measured across that gap would shift every
// packet read until the next wait by as much (seen as a 22 ms late answer
// and request that the server had already served). A measurement whose
// readings lie more than clockWindowNS apart is tried again, and if none
// is that tight the last good offset is kept.
func (s *BPFRing) clock() {
	best, off := int64(math.MaxInt64), int64(0)
	for range 3 {
		m1, real, m2 := clockReadings()
		if w := m2 - m1; w < best {
			best, off = w, real-m1-w/2
		}
		if best <= clockWindowNS {
			break
		}
	}
	if best <= clockWindowNS || s.offset == 0 {
		s.offset = off
	}
}

// clockWindowNS is the widest gap between the two monotonic readings
// around the wall clock's that clock accepts.
const clockWindowNS = 50_000

// clockReadings reads CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_MONOTONIC in
// nanoseconds (a variable: tests replace it). It reads them through the
// vDSO, as the runtime does, never through a system call: the reader
// measures the offset right after each wake, and a system call made while
// every other thread sleeps wakes the runtime's monitor thread as from a
// blocking call, which then naps in 20 µs steps for the next millisecond.
var clockReadings = func() (mono1, real, mono2 int64) {
	a := monotonicNow()
	r := time.Now().UnixNano()
	return a, r, monotonicNow()
}

// monotonicNow is CLOCK_MONOTONIC in nanoseconds, the clock of the
// program's bpf_ktime_get_ns, as the runtime reads it (vDSO).
//
//go:linkname monotonicNow runtime.nanotime
func monotonicNow() int64

// WallUS turns the program's bpf_ktime_get_ns into Unix microseconds.
func (s *BPFRing) WallUS(monoNS int64) int64 { return (monoNS + s.offset) / 1000 }

func (s *BPFRing) consumerPos() *uint64 { return (*uint64)(unsafe.Pointer(&s.consumer[0])) }
func (s *BPFRing) producerPos() *uint64 { return (*uint64)(unsafe.Pointer(&s.producer[0])) }

// Each hands every committed record of at least minSize bytes to fn in
// order, in place (fn must not keep the bytes), and gives its space back;
// it returns how many it handed over. It stops at a record still being
// written.
func (s *BPFRing) Each(minSize uint64, fn func(rec []byte)) int {
	cons := atomic.LoadUint64(s.consumerPos())
	prod := atomic.LoadUint64(s.producerPos())
	n := 0
	for cons < prod {
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&s.data[cons&s.mask])))
		if hdr&ringbufBusy != 0 {
			break
		}
		size := uint64(hdr &^ (ringbufBusy | ringbufDiscard))
		if hdr&ringbufDiscard == 0 && size >= minSize {
			// The header is 8-aligned in a ring of pages: it never wraps.
			fn(s.record((cons+ringbufHdrLen)&s.mask, size))
			n++
		}
		cons += (size + ringbufHdrLen + 7) &^ 7
		// Giving each record back at once lets the program reuse the space
		// while a long batch is still read.
		atomic.StoreUint64(s.consumerPos(), cons)
	}
	return n
}

// Wait blocks until the program wakes the reader, d passes or Interrupt
// is called.
func (s *BPFRing) Wait(d time.Duration) {
	s.w.wait(d)
	s.clock()
}

// Interrupt ends the wait in progress and every later one at once (the
// capture is stopping); safe from any goroutine.
func (s *BPFRing) Interrupt() { s.w.interrupt() }

// pending reports whether the program committed bytes the reader has not
// read, from the ring's own memory: no system call.
func (s *BPFRing) pending() bool {
	return atomic.LoadUint64(s.consumerPos()) != atomic.LoadUint64(s.producerPos())
}

// Dropped is the number of packets the program could not queue (the ring
// buffer was full), summed over CPUs; a counting program's count.
func (s *BPFRing) Dropped() int64 {
	var per []uint64
	if err := s.drops.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n int64
	for _, v := range per {
		n += int64(v)
	}
	return n
}

// Close detaches the program and releases the ring buffer.
func (s *BPFRing) Close() {
	if s.closed {
		return
	}
	s.closed = true
	for _, l := range s.links {
		l.Close()
	}
	if s.clsact != nil {
		s.clsact.close()
	}
	if s.consumer != nil {
		unix.Munmap(s.consumer)
	}
	if s.producer != nil {
		unix.Munmap(s.producer)
	}
	if s.w != nil {
		s.w.close()
	}
	s.prog.Close() // each Close takes a nil receiver (an open that failed)
	s.ring.Close()
	s.drops.Close()
}

// Be16 is v as the kernel holds a 16-bit field in network order, read as
// a host (little-endian) half word.
func Be16(v uint16) int32 { return int32(v>>8 | v<<8&0xff00) }

// BPFMatch is the programs' common head: it falls through when the packet
// is not one to keep; it jumps to fromServer when its source port is one
// of ports (the server's answer), to toServer when its destination is
// (a request), with r6 the packet, r7 the TCP header's offset, r8 the IP
// version (4 or 6), the IP header on the stack at BPFScratch (20 bytes,
// or 40 for IPv6) and the TCP header's data-offset byte at BPFTCPOffset.
// It keeps TCP over IPv4 or IPv6 (no extension headers, not a later
// fragment). Each bpf_skb_load_bytes is a helper call, a fixed cost per
// packet: an IPv4 header without options (nearly every one) comes with
// the TCP header's first 20 bytes in one load, other headers take a
// second for the TCP header's first 13 bytes.
func BPFMatch(l2 int32, ports []uint16, fromServer, toServer string) ebpfasm.Instructions {
	// load, labelled, copies n bytes of the packet from offset off (a
	// register, or offImm when off is R0) to the stack at stackOff, and
	// lets the packet pass when it is shorter.
	load := func(label string, off ebpfasm.Register, offImm int32, stackOff int16, n int32) ebpfasm.Instructions {
		ins := ebpfasm.Instructions{ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R6).WithSymbol(label)}
		if off == ebpfasm.R0 {
			ins = append(ins, ebpfasm.Mov.Imm(ebpfasm.R2, offImm))
		} else {
			ins = append(ins, ebpfasm.Mov.Reg(ebpfasm.R2, off))
		}
		return append(ins,
			ebpfasm.Mov.Reg(ebpfasm.R3, ebpfasm.RFP),
			ebpfasm.Add.Imm(ebpfasm.R3, int32(stackOff)),
			ebpfasm.Mov.Imm(ebpfasm.R4, n),
			ebpfasm.FnSkbLoadBytes.Call(),
			ebpfasm.JNE.Imm(ebpfasm.R0, 0, BPFNext),
		)
	}
	p := ebpfasm.Instructions{
		ebpfasm.Mov.Reg(ebpfasm.R6, ebpfasm.R1),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.R6, skbProtocol, ebpfasm.Word),
		ebpfasm.JEq.Imm(ebpfasm.R2, Be16(unix.ETH_P_IP), "v4"),
		ebpfasm.JEq.Imm(ebpfasm.R2, Be16(unix.ETH_P_IPV6), "v6"),
		ebpfasm.Ja.Label(BPFNext),
	}
	// IPv4: protocol TCP, no later fragment, the TCP header after IHL
	// words. IP and TCP headers are at least 40 bytes: a shorter packet is
	// not TCP over IPv4, and passes.
	p = append(p, load("v4", ebpfasm.R0, l2, BPFScratch, 40)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+9, ebpfasm.Byte),
		ebpfasm.JNE.Imm(ebpfasm.R2, unix.IPPROTO_TCP, BPFNext),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+6, ebpfasm.Half),
		ebpfasm.And.Imm(ebpfasm.R2, Be16(0x1fff)),
		ebpfasm.JNE.Imm(ebpfasm.R2, 0, BPFNext),
		ebpfasm.Mov.Imm(ebpfasm.R8, 4),
		ebpfasm.LoadMem(ebpfasm.R7, ebpfasm.RFP, BPFScratch, ebpfasm.Byte),
		ebpfasm.And.Imm(ebpfasm.R7, 0x0f),
		ebpfasm.JNE.Imm(ebpfasm.R7, 5, "v4-options"),
		// No options: the TCP header is on the stack already.
		ebpfasm.Mov.Imm(ebpfasm.R7, l2+20),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+20, ebpfasm.Half),
		ebpfasm.StoreMem(ebpfasm.RFP, -8, ebpfasm.R2, ebpfasm.Half),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+22, ebpfasm.Half),
		ebpfasm.StoreMem(ebpfasm.RFP, -6, ebpfasm.R2, ebpfasm.Half),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+32, ebpfasm.Byte),
		ebpfasm.StoreMem(ebpfasm.RFP, BPFTCPOffset, ebpfasm.R2, ebpfasm.Byte),
		ebpfasm.Ja.Label("ports"),
		ebpfasm.LSh.Imm(ebpfasm.R7, 2).WithSymbol("v4-options"),
		ebpfasm.Add.Imm(ebpfasm.R7, l2),
		ebpfasm.Ja.Label("tcp"),
	)
	// IPv6: next header TCP right after the fixed header.
	p = append(p, load("v6", ebpfasm.R0, l2, BPFScratch, 40)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, BPFScratch+6, ebpfasm.Byte),
		ebpfasm.JNE.Imm(ebpfasm.R2, unix.IPPROTO_TCP, BPFNext),
		ebpfasm.Mov.Imm(ebpfasm.R8, 6),
		ebpfasm.Mov.Imm(ebpfasm.R7, l2+40),
	)
	// TCP after an IPv6 header or IPv4 options: its first 13 bytes.
	p = append(p, load("tcp", ebpfasm.R7, 0, bpfTCPHead, 13)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, bpfTCPHead, ebpfasm.Half),
		ebpfasm.StoreMem(ebpfasm.RFP, -8, ebpfasm.R2, ebpfasm.Half),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, bpfTCPHead+2, ebpfasm.Half),
		ebpfasm.StoreMem(ebpfasm.RFP, -6, ebpfasm.R2, ebpfasm.Half),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, bpfTCPHead+12, ebpfasm.Byte),
		ebpfasm.StoreMem(ebpfasm.RFP, BPFTCPOffset, ebpfasm.R2, ebpfasm.Byte),
		// Either port one of ours.
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, -8, ebpfasm.Half).WithSymbol("ports"),
		ebpfasm.LoadMem(ebpfasm.R3, ebpfasm.RFP, -6, ebpfasm.Half),
	)
	for _, port := range ports {
		p = append(p,
			ebpfasm.JEq.Imm(ebpfasm.R2, Be16(port), fromServer),
			ebpfasm.JEq.Imm(ebpfasm.R3, Be16(port), toServer),
		)
	}
	return append(p, ebpfasm.Ja.Label(BPFNext))
}

// BPFCountAndExit is the programs' tail: BPFDrop adds one to the per-CPU
// counter, BPFNext passes the packet on.
func BPFCountAndExit(countsFD int) ebpfasm.Instructions {
	return ebpfasm.Instructions{
		ebpfasm.StoreImm(ebpfasm.RFP, -4, 0, ebpfasm.Word).WithSymbol(BPFDrop),
		ebpfasm.LoadMapPtr(ebpfasm.R1, countsFD),
		ebpfasm.Mov.Reg(ebpfasm.R2, ebpfasm.RFP),
		ebpfasm.Add.Imm(ebpfasm.R2, -4),
		ebpfasm.FnMapLookupElem.Call(),
		ebpfasm.JEq.Imm(ebpfasm.R0, 0, BPFNext),
		ebpfasm.LoadMem(ebpfasm.R1, ebpfasm.R0, 0, ebpfasm.DWord),
		ebpfasm.Add.Imm(ebpfasm.R1, 1),
		ebpfasm.StoreMem(ebpfasm.R0, 0, ebpfasm.R1, ebpfasm.DWord),
		ebpfasm.Mov.Imm(ebpfasm.R0, tcNext).WithSymbol(BPFNext),
		ebpfasm.Return(),
	}
}

// BPFReserveClass reserves in ringFD the smallest of classes (record
// sizes, ascending: the ring buffer takes only sizes known when the
// program is verified) that holds hdr + the length in lenReg, leaves the
// record in r9 and jumps to fill, with lenReg proven ≤ class − hdr on
// every path (what the verifier needs to copy lenReg bytes behind hdr). A
// length larger than the last class goes to tooBig; a full ring buffer to
// BPFDrop. The instructions start at label.
func BPFReserveClass(label string, lenReg ebpfasm.Register, classes []int32, hdr int32, ringFD int, fill, tooBig string) ebpfasm.Instructions {
	var p ebpfasm.Instructions
	for i, class := range classes {
		larger := fmt.Sprintf("%s-class%d", label, i+1)
		if i == len(classes)-1 {
			larger = tooBig
		}
		ins := ebpfasm.JGT.Imm(lenReg, class-hdr, larger)
		if i == 0 {
			ins = ins.WithSymbol(label)
		} else {
			ins = ins.WithSymbol(fmt.Sprintf("%s-class%d", label, i))
		}
		p = append(p, ins,
			ebpfasm.LoadMapPtr(ebpfasm.R1, ringFD),
			ebpfasm.Mov.Imm(ebpfasm.R2, class),
			ebpfasm.Mov.Imm(ebpfasm.R3, 0),
			ebpfasm.FnRingbufReserve.Call(),
			ebpfasm.JEq.Imm(ebpfasm.R0, 0, BPFDrop),
			ebpfasm.Mov.Reg(ebpfasm.R9, ebpfasm.R0),
			ebpfasm.Ja.Label(fill),
		)
	}
	return p
}

// BPFSubmit submits the record in r9 at label, waking the reader only
// when wake bytes wait (0: never; it reads at its timeout otherwise), and
// goes to BPFNext.
func BPFSubmit(label string, ringFD int, wake int32) ebpfasm.Instructions {
	if wake <= 0 {
		return ebpfasm.Instructions{
			ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R9).WithSymbol(label),
			ebpfasm.Mov.Imm(ebpfasm.R2, 1), // BPF_RB_NO_WAKEUP
			ebpfasm.FnRingbufSubmit.Call(),
			ebpfasm.Ja.Label(BPFNext),
		}
	}
	return ebpfasm.Instructions{
		ebpfasm.LoadMapPtr(ebpfasm.R1, ringFD).WithSymbol(label),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0), // BPF_RB_AVAIL_DATA
		ebpfasm.FnRingbufQuery.Call(),
		ebpfasm.Mov.Imm(ebpfasm.R2, 1), // BPF_RB_NO_WAKEUP
		ebpfasm.JLT.Imm(ebpfasm.R0, wake, label+"-notify"),
		ebpfasm.Mov.Imm(ebpfasm.R2, 2), // BPF_RB_FORCE_WAKEUP
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R9).WithSymbol(label + "-notify"),
		ebpfasm.FnRingbufSubmit.Call(),
		ebpfasm.Ja.Label(BPFNext),
	}
}

// BPFDiscard discards the record in r9 at label and goes to BPFNext.
func BPFDiscard(label string) ebpfasm.Instructions {
	return ebpfasm.Instructions{
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R9).WithSymbol(label),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0),
		ebpfasm.FnRingbufDiscard.Call(),
		ebpfasm.Ja.Label(BPFNext),
	}
}
