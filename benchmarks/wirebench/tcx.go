//go:build linux

package main

import (
	"context"
	"fmt"
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

// The tcx floors (-mode tcx-tap, tcx-count): another way to tap the wire,
// measured against the AF_PACKET ring the capture uses. An eBPF program at
// the interface's tcx hook (Linux 6.6+) keeps the packets of the port and
// either copies each, whole, into a BPF ring buffer that this process reads
// in place and throws away (tcx-tap: what a capture through eBPF would cost
// before decoding), or only counts them (tcx-count: the hook and the port
// check alone, the least any in-kernel design could cost). The reader is
// woken only when a megabyte waits, or at its timeout, as the AF_PACKET
// ring hands over a block when it is full or old.

// tcxRecordHeader is what the program writes before each packet: the
// monotonic clock in ns, the packet's length and the bytes copied.
const tcxRecordHeader = 16

// tcxClasses are the record sizes the program reserves (the ring buffer
// takes only sizes known when the program is verified): the smallest that
// holds the packet. The largest holds a 64 KiB frame of lo's offloads.
var tcxClasses = []int32{128, 512, 2048, 8192, 32768, 1<<16 + tcxRecordHeader}

// tcxWakeBytes: a record submitted while this much waits wakes the reader.
const tcxWakeBytes = 1 << 20

// Ring buffer header bits (include/uapi/linux/bpf.h).
const (
	ringbufBusy    = 1 << 31
	ringbufDiscard = 1 << 30
	ringbufHdrLen  = 8
)

// Returns of a tcx program: pass the packet on to the next program.
const tcxNext = -1

// tcxSource is the program, its attachments and the ring buffer it fills.
type tcxSource struct {
	ring, drops *ebpf.Map
	prog        *ebpf.Program
	links       []link.Link
	consumer    []byte // the consumer position's page (read-write)
	producer    []byte // the producer position's page, then the data twice
	data        []byte
	mask        uint64
	offset      int64 // CLOCK_REALTIME − CLOCK_MONOTONIC, ns
	closed      bool
}

// openTCX loads the program for ports, attaches it to iface's egress (and
// ingress, but on loopback, where every packet leaves and comes back) and
// maps a ring buffer of ringMB MiB (a power of two).
func openTCX(iface string, ports []uint16, countOnly bool, ringMB int) (*tcxSource, error) {
	return attachTCX(iface, ringMB, func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions {
		return tcxProgram(l2, ports, countOnly, ringFD, dropsFD)
	})
}

// attachTCX loads the program build makes for the interface's link header
// length, the ring buffer and the counter, and attaches and maps them as
// openTCX says.
func attachTCX(iface string, ringMB int, build func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions) (_ *tcxSource, err error) {
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
	s := &tcxSource{}
	defer func() {
		if err != nil {
			s.close()
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
	attach := []ebpf.AttachType{ebpf.AttachTCXEgress}
	if !loopback {
		attach = append(attach, ebpf.AttachTCXIngress)
	}
	for _, a := range attach {
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: s.prog, Attach: a})
		if err != nil {
			return nil, fmt.Errorf("attaching the capture program to %s (needs Linux 6.6+ and CAP_BPF, CAP_NET_ADMIN): %w", iface, err)
		}
		s.links = append(s.links, l)
	}
	if err := s.mmap(int(size)); err != nil {
		return nil, err
	}
	s.clock()
	return s, nil
}

// mmap maps the ring buffer: the consumer page read-write; the producer
// page and the data, which the kernel maps twice in a row so that a record
// that wraps reads as one slice, read-only.
func (s *tcxSource) mmap(size int) error {
	page := os.Getpagesize()
	var err error
	if s.consumer, err = unix.Mmap(s.ring.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mapping the ring buffer's consumer page: %w", err)
	}
	if s.producer, err = unix.Mmap(s.ring.FD(), int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mapping the ring buffer: %w", err)
	}
	s.data = s.producer[page:]
	s.mask = uint64(size - 1)
	return nil
}

// clock measures the offset from the program's clock (monotonic) to the
// wall clock gapscope's capture stamps packets with; measured again at
// every wait, so that a step of the wall clock is followed.
func (s *tcxSource) clock() {
	var mono, real unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	s.offset = real.Nano() - mono.Nano()
}

func (s *tcxSource) consumerPos() *uint64 { return (*uint64)(unsafe.Pointer(&s.consumer[0])) }
func (s *tcxSource) producerPos() *uint64 { return (*uint64)(unsafe.Pointer(&s.producer[0])) }

// read hands every committed record to fn in order, in place (fn must not
// keep the bytes), and gives their space back; it returns how many it read.
func (s *tcxSource) read(fn func(tsUS int64, wireLen int, frame []byte)) int {
	off := s.offset
	return s.each(tcxRecordHeader, func(rec []byte) {
		ns := *(*int64)(unsafe.Pointer(&rec[0]))
		wire := *(*uint32)(unsafe.Pointer(&rec[8]))
		capLen := min(uint64(*(*uint32)(unsafe.Pointer(&rec[12]))), uint64(len(rec)-tcxRecordHeader))
		fn((ns+off)/1000, int(wire), rec[tcxRecordHeader:tcxRecordHeader+capLen])
	})
}

// each hands every committed record of at least minSize bytes to fn in
// order, in place, and gives its space back; it returns how many it handed
// over. It stops at a record still being written.
func (s *tcxSource) each(minSize uint64, fn func(rec []byte)) int {
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
			fn(s.data[cons&s.mask+ringbufHdrLen:][:size])
			n++
		}
		cons += (size + ringbufHdrLen + 7) &^ 7
		// Giving each record back at once lets the program reuse the space
		// while a long batch is still read.
		atomic.StoreUint64(s.consumerPos(), cons)
	}
	return n
}

// wait blocks until the program wakes the reader or d passes.
func (s *tcxSource) wait(d time.Duration) {
	fds := []unix.PollFd{{Fd: int32(s.ring.FD()), Events: unix.POLLIN}}
	_, _ = unix.Poll(fds, int(d/time.Millisecond))
	s.clock()
}

// dropped is the number of packets the program could not queue (the ring
// buffer was full), summed over CPUs; with countOnly, the packets counted.
func (s *tcxSource) dropped() int64 {
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

// close detaches the program and releases the ring buffer.
func (s *tcxSource) close() {
	if s.closed {
		return
	}
	s.closed = true
	for _, l := range s.links {
		l.Close()
	}
	if s.consumer != nil {
		unix.Munmap(s.consumer)
	}
	if s.producer != nil {
		unix.Munmap(s.producer)
	}
	s.prog.Close() // each Close takes a nil receiver (an open that failed)
	s.ring.Close()
	s.drops.Close()
}

// tcxProgram is the capture program. l2 is the link header's length (14 on
// Ethernet and loopback, 0 on raw-IP devices); a packet is kept when it is
// TCP over IPv4 or IPv6 (no extension headers, not a later fragment) with
// one of ports on either side. A kept packet is copied whole, behind its
// header, into a record of the smallest class that holds it; when the ring
// buffer is full it is counted in drops instead. With countOnly, every
// kept packet is counted there and nothing is copied.
//
// Registers: r6 the packet (__sk_buff), r7 the TCP header's offset then the
// packet's length, r9 the record.
func tcxProgram(l2 int32, ports []uint16, countOnly bool, ringFD, dropsFD int) ebpfasm.Instructions {
	p := tcxMatch(l2, ports)
	if countOnly {
		p = append(p, ebpfasm.Ja.Label("next"), ebpfasm.Ja.Label("drop").WithSymbol("keep"))
		return append(p, countAndExit(dropsFD)...)
	}
	p = append(p,
		ebpfasm.Ja.Label("next"),
		ebpfasm.LoadMem(ebpfasm.R7, ebpfasm.R6, skbLen, ebpfasm.Word).WithSymbol("keep"),
		ebpfasm.JLT.Imm(ebpfasm.R7, 1, "next"),
	)
	// Reserve the smallest class that holds the packet.
	for i, class := range tcxClasses {
		larger := fmt.Sprintf("class%d", i+1)
		if i == len(tcxClasses)-1 {
			larger = "next" // larger than any frame: not a packet of ours
		}
		ins := ebpfasm.JGT.Imm(ebpfasm.R7, class-tcxRecordHeader, larger)
		if i > 0 {
			ins = ins.WithSymbol(fmt.Sprintf("class%d", i))
		}
		p = append(p, ins,
			ebpfasm.LoadMapPtr(ebpfasm.R1, ringFD),
			ebpfasm.Mov.Imm(ebpfasm.R2, class),
			ebpfasm.Mov.Imm(ebpfasm.R3, 0),
			ebpfasm.FnRingbufReserve.Call(),
			ebpfasm.JEq.Imm(ebpfasm.R0, 0, "drop"),
			ebpfasm.Mov.Reg(ebpfasm.R9, ebpfasm.R0),
			ebpfasm.Ja.Label("fill"),
		)
	}
	p = append(p,
		ebpfasm.FnKtimeGetNs.Call().WithSymbol("fill"),
		ebpfasm.StoreMem(ebpfasm.R9, 0, ebpfasm.R0, ebpfasm.DWord),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.R6, skbLen, ebpfasm.Word),
		ebpfasm.StoreMem(ebpfasm.R9, 8, ebpfasm.R2, ebpfasm.Word),
		ebpfasm.StoreMem(ebpfasm.R9, 12, ebpfasm.R7, ebpfasm.Word),
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R6),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0),
		ebpfasm.Mov.Reg(ebpfasm.R3, ebpfasm.R9),
		ebpfasm.Add.Imm(ebpfasm.R3, tcxRecordHeader),
		ebpfasm.Mov.Reg(ebpfasm.R4, ebpfasm.R7),
		ebpfasm.FnSkbLoadBytes.Call(),
		ebpfasm.JEq.Imm(ebpfasm.R0, 0, "submit"),
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R9),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0),
		ebpfasm.FnRingbufDiscard.Call(),
		ebpfasm.Ja.Label("next"),
		// Wake the reader only when a megabyte waits: it reads at its
		// timeout otherwise.
		ebpfasm.LoadMapPtr(ebpfasm.R1, ringFD).WithSymbol("submit"),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0), // BPF_RB_AVAIL_DATA
		ebpfasm.FnRingbufQuery.Call(),
		ebpfasm.Mov.Imm(ebpfasm.R2, 1), // BPF_RB_NO_WAKEUP
		ebpfasm.JLT.Imm(ebpfasm.R0, tcxWakeBytes, "notify"),
		ebpfasm.Mov.Imm(ebpfasm.R2, 2), // BPF_RB_FORCE_WAKEUP
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R9).WithSymbol("notify"),
		ebpfasm.FnRingbufSubmit.Call(),
		ebpfasm.Ja.Label("next"),
	)
	// The ring buffer is full: count the packet.
	return append(p, countAndExit(dropsFD)...)
}

// The program's stack and the __sk_buff fields it reads.
const (
	skbLen      = 0  // __sk_buff.len
	skbProtocol = 16 // __sk_buff.protocol (network order)
	scratch     = -64
)

func be16(v uint16) int32 { return int32(v>>8 | v<<8&0xff00) }

// tcxMatch is the programs' common head: it falls through when the packet
// is not one to keep and jumps to "keep" when it is, with r6 the packet,
// r7 the TCP header's offset, r8 the IP version (4 or 6) and the IP header
// on the stack at scratch (20 bytes, or 40 for IPv6).
func tcxMatch(l2 int32, ports []uint16) ebpfasm.Instructions {
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
			ebpfasm.JNE.Imm(ebpfasm.R0, 0, "next"),
		)
	}
	p := ebpfasm.Instructions{
		ebpfasm.Mov.Reg(ebpfasm.R6, ebpfasm.R1),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.R6, skbProtocol, ebpfasm.Word),
		ebpfasm.JEq.Imm(ebpfasm.R2, be16(unix.ETH_P_IP), "v4"),
		ebpfasm.JEq.Imm(ebpfasm.R2, be16(unix.ETH_P_IPV6), "v6"),
		ebpfasm.Ja.Label("next"),
	}
	// IPv4: protocol TCP, no later fragment, the TCP header after IHL words.
	p = append(p, load("v4", ebpfasm.R0, l2, scratch, 20)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, scratch+9, ebpfasm.Byte),
		ebpfasm.JNE.Imm(ebpfasm.R2, unix.IPPROTO_TCP, "next"),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, scratch+6, ebpfasm.Half),
		ebpfasm.And.Imm(ebpfasm.R2, be16(0x1fff)),
		ebpfasm.JNE.Imm(ebpfasm.R2, 0, "next"),
		ebpfasm.Mov.Imm(ebpfasm.R8, 4),
		ebpfasm.LoadMem(ebpfasm.R7, ebpfasm.RFP, scratch, ebpfasm.Byte),
		ebpfasm.And.Imm(ebpfasm.R7, 0x0f),
		ebpfasm.LSh.Imm(ebpfasm.R7, 2),
		ebpfasm.Add.Imm(ebpfasm.R7, l2),
		ebpfasm.Ja.Label("tcp"),
	)
	// IPv6: next header TCP right after the fixed header.
	p = append(p, load("v6", ebpfasm.R0, l2, scratch, 40)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, scratch+6, ebpfasm.Byte),
		ebpfasm.JNE.Imm(ebpfasm.R2, unix.IPPROTO_TCP, "next"),
		ebpfasm.Mov.Imm(ebpfasm.R8, 6),
		ebpfasm.Mov.Imm(ebpfasm.R7, l2+40),
	)
	// TCP: either port one of ours.
	p = append(p, load("tcp", ebpfasm.R7, 0, -8, 4)...)
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.RFP, -8, ebpfasm.Half),
		ebpfasm.LoadMem(ebpfasm.R3, ebpfasm.RFP, -6, ebpfasm.Half),
	)
	for _, port := range ports {
		p = append(p,
			ebpfasm.JEq.Imm(ebpfasm.R2, be16(port), "keep"),
			ebpfasm.JEq.Imm(ebpfasm.R3, be16(port), "keep"),
		)
	}
	return p
}

// countAndExit is the program's tail: "drop" adds one to the per-CPU
// counter, "next" passes the packet on.
func countAndExit(countsFD int) ebpfasm.Instructions {
	return ebpfasm.Instructions{
		ebpfasm.StoreImm(ebpfasm.RFP, -4, 0, ebpfasm.Word).WithSymbol("drop"),
		ebpfasm.LoadMapPtr(ebpfasm.R1, countsFD),
		ebpfasm.Mov.Reg(ebpfasm.R2, ebpfasm.RFP),
		ebpfasm.Add.Imm(ebpfasm.R2, -4),
		ebpfasm.FnMapLookupElem.Call(),
		ebpfasm.JEq.Imm(ebpfasm.R0, 0, "next"),
		ebpfasm.LoadMem(ebpfasm.R1, ebpfasm.R0, 0, ebpfasm.DWord),
		ebpfasm.Add.Imm(ebpfasm.R1, 1),
		ebpfasm.StoreMem(ebpfasm.R0, 0, ebpfasm.R1, ebpfasm.DWord),
		ebpfasm.Mov.Imm(ebpfasm.R0, tcxNext).WithSymbol("next"),
		ebpfasm.Return(),
	}
}

// runTCX attaches the program for the port and reads (tcx-tap) or only
// counts (tcx-count) the port's packets for dur.
func runTCX(ctx context.Context, iface string, port uint16, countOnly bool, ringMB int, dur time.Duration, start func()) (result, error) {
	mode := "tcx-tap"
	if countOnly {
		mode = "tcx-count"
	}
	src, err := openTCX(iface, []uint16{port}, countOnly, max(ringMB, 64))
	if err != nil {
		return result{}, err
	}
	defer src.close()
	var frames int64
	count := func(int64, int, []byte) { frames++ }
	src.drain(ctx, dur, 100*time.Millisecond, start, func() int { return src.read(count) })
	r := result{Mode: mode, Packets: frames, KernelDrops: src.dropped()}
	if countOnly {
		r.Packets, r.KernelDrops = r.KernelDrops, 0
	}
	return r, nil
}

// drain calls start, then read until dur has passed, waiting up to poll
// (or the program's wake-up) whenever read found nothing.
func (s *tcxSource) drain(ctx context.Context, dur, poll time.Duration, start func(), read func() int) {
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start()
	for ctx.Err() == nil {
		if read() == 0 {
			s.wait(poll)
		}
	}
}
