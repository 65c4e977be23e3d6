//go:build linux

package main

import (
	"context"
	"time"
	"unsafe"

	ebpfasm "github.com/cilium/ebpf/asm"
	"github.com/gapscope/gapscope/internal/capture"
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

// tcxSource is the program, its attachments and the ring buffer it fills
// (capture.BPFRing, which the header-only capture reads too).
type tcxSource struct{ *capture.BPFRing }

func (s *tcxSource) wait(d time.Duration) { s.Wait(d) }
func (s *tcxSource) dropped() int64       { return s.Dropped() }
func (s *tcxSource) close()               { s.Close() }

// openTCX loads the program for ports, attaches it to iface's egress (and
// ingress, but on loopback, where every packet leaves and comes back) and
// maps a ring buffer of ringMB MiB (a power of two).
func openTCX(iface string, ports []uint16, countOnly bool, ringMB int) (*tcxSource, error) {
	return attachTCX(iface, ringMB, func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions {
		return tcxProgram(l2, ports, countOnly, ringFD, dropsFD)
	})
}

func attachTCX(iface string, ringMB int, build capture.BPFBuild) (*tcxSource, error) {
	r, err := capture.AttachBPF(iface, ringMB, build)
	if err != nil {
		return nil, err
	}
	return &tcxSource{r}, nil
}

// read hands every committed record to fn in order, in place (fn must not
// keep the bytes), and gives their space back; it returns how many it read.
func (s *tcxSource) read(fn func(tsUS int64, wireLen int, frame []byte)) int {
	return s.Each(tcxRecordHeader, func(rec []byte) {
		ns := *(*int64)(unsafe.Pointer(&rec[0]))
		wire := *(*uint32)(unsafe.Pointer(&rec[8]))
		capLen := min(uint64(*(*uint32)(unsafe.Pointer(&rec[12]))), uint64(len(rec)-tcxRecordHeader))
		fn(s.WallUS(ns), int(wire), rec[tcxRecordHeader:tcxRecordHeader+capLen])
	})
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
	p := capture.BPFMatch(l2, ports, "keep", "keep")
	if countOnly {
		p = append(p, ebpfasm.Ja.Label(capture.BPFDrop).WithSymbol("keep"))
		return append(p, capture.BPFCountAndExit(dropsFD)...)
	}
	p = append(p,
		ebpfasm.LoadMem(ebpfasm.R7, ebpfasm.R6, capture.BPFSkbLen, ebpfasm.Word).WithSymbol("keep"),
		ebpfasm.JLT.Imm(ebpfasm.R7, 1, capture.BPFNext),
	)
	// Reserve the smallest class that holds the packet; one larger than
	// any frame is not a packet of ours.
	p = append(p, capture.BPFReserveClass("reserve", ebpfasm.R7, tcxClasses, tcxRecordHeader, ringFD, "fill", capture.BPFNext)...)
	p = append(p,
		ebpfasm.FnKtimeGetNs.Call().WithSymbol("fill"),
		ebpfasm.StoreMem(ebpfasm.R9, 0, ebpfasm.R0, ebpfasm.DWord),
		ebpfasm.LoadMem(ebpfasm.R2, ebpfasm.R6, capture.BPFSkbLen, ebpfasm.Word),
		ebpfasm.StoreMem(ebpfasm.R9, 8, ebpfasm.R2, ebpfasm.Word),
		ebpfasm.StoreMem(ebpfasm.R9, 12, ebpfasm.R7, ebpfasm.Word),
		ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R6),
		ebpfasm.Mov.Imm(ebpfasm.R2, 0),
		ebpfasm.Mov.Reg(ebpfasm.R3, ebpfasm.R9),
		ebpfasm.Add.Imm(ebpfasm.R3, tcxRecordHeader),
		ebpfasm.Mov.Reg(ebpfasm.R4, ebpfasm.R7),
		ebpfasm.FnSkbLoadBytes.Call(),
		ebpfasm.JNE.Imm(ebpfasm.R0, 0, "discard"),
	)
	p = append(p, capture.BPFSubmit("submit", ringFD, floorWakeBytes)...)
	p = append(p, capture.BPFDiscard("discard")...)
	// The ring buffer is full: count the packet.
	return append(p, capture.BPFCountAndExit(dropsFD)...)
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

// floorWakeBytes: the floors wake their reader when a megabyte waits, as
// they did when docs/performance.md measured them.
const floorWakeBytes = 1 << 20
