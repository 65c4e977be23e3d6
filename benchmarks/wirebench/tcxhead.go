//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	ebpfasm "github.com/cilium/ebpf/asm"
	"github.com/gapscope/gapscope/internal/capture"
)

// The header-only floor (-mode tcx-head): the tcx program of tcx.go, but
// instead of each packet it writes one record of fixed size: the TCP/IP
// header's fields, the payload's length, a timestamp, the first -head and
// the last -tail bytes of the payload. What a capture would cost that
// hands user space only what the decoder needs of each packet (a request's
// statement text up to a limit, a response's first packet headers, the
// terminating OK/EOF/ERR packet), never a whole 64 KiB loopback frame.
//
// The record (headFixed bytes, then the head, then the tail, padded to 8):
//
//	 0 u64 CLOCK_MONOTONIC ns
//	 8 u32 skb length (the frame, link header included)
//	12 u32 TCP payload length
//	16 u8  IP version (4 or 6)
//	18 u16 head bytes copied, 20 u16 tail bytes copied, 22 u16 -head
//	24 [16] source address, 40 [16] destination address (IPv4: the first 4)
//	56 [20] the TCP header as sent: ports, seq, ack, offset and flags, window
//	80 the head (up to -head bytes), then the tail (up to -tail bytes)
//
// The tail is the payload's last bytes after the head: a payload no longer
// than head+tail is whole in the two, in order.
const (
	headFixed   = 80
	headTCP     = 56
	headMaxHead = 4096 // the head and tail flags' bound (the record is one reservation)
)

// headRecord is one record's fields, read in place: Src, Dst, Head and
// Tail alias the ring buffer and are valid only during the callback.
type headRecord struct {
	TSUS             int64 // wall clock, µs
	Wire, Payload    uint32
	Version          uint8
	Src, Dst         []byte
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Window           uint16
	Head, Tail       []byte
}

// headRecordSize is the record's size for head and tail bytes.
func headRecordSize(head, tail int) int32 { return int32((headFixed + head + tail + 7) &^ 7) }

// openTCXHead attaches the header-only program for ports (see openTCX).
// wakeKB: a record submitted while this many KiB wait wakes the reader;
// 0: never (the reader polls on its timer alone).
func openTCXHead(iface string, ports []uint16, head, tail, wakeKB, ringMB int) (*tcxSource, error) {
	if head < 0 || tail < 0 || head > headMaxHead || tail > headMaxHead {
		return nil, fmt.Errorf("head and tail must be 0..%d bytes", headMaxHead)
	}
	return attachTCX(iface, ringMB, func(l2 int32, ringFD, dropsFD int) ebpfasm.Instructions {
		return headProgram(l2, ports, int32(head), int32(tail), int32(wakeKB)<<10, ringFD, dropsFD)
	})
}

// headProgram is the header-only program: tcxMatch, then a record of
// headRecordSize reserved in the ring buffer (or the packet counted in
// drops when it is full), filled and submitted without waking the reader
// unless wake bytes wait (wake 0: never).
//
// The verifier takes a variable length for bpf_skb_load_bytes only when it
// can prove it within the destination: a scalar bounded [1, head] by
// comparisons on the register itself just before the call (JGT/JLE to
// clamp to the bound, JLT 1 to skip an empty copy: the helper takes no
// zero length), and the destination a fixed offset into the reserved
// record. The offsets into the packet are checked by the helper at run
// time (it fails on a short packet, and the record is discarded).
//
// Registers: r6 the packet, r7 the TCP header's offset then the payload's,
// r8 the IP version, r9 the record. Stack: fp-16 the payload length,
// fp-24 the head copied (below the IP header's capture.BPFScratch, above the ports').
func headProgram(l2 int32, ports []uint16, head, tail, wake int32, ringFD, dropsFD int) ebpfasm.Instructions {
	const (
		spPayload = -16
		spHead    = -24 // the IP header's capture.BPFScratch ends at -24 (IPv6: 40 bytes from -64)
	)
	r0, r1, r2, r3, r4 := ebpfasm.R0, ebpfasm.R1, ebpfasm.R2, ebpfasm.R3, ebpfasm.R4
	r6, r7, r8, r9, fp := ebpfasm.R6, ebpfasm.R7, ebpfasm.R8, ebpfasm.R9, ebpfasm.RFP
	loadBytes := func(recOff int32) ebpfasm.Instructions { // r2 the packet offset, r4 the length
		return ebpfasm.Instructions{
			ebpfasm.Mov.Reg(r1, r6),
			ebpfasm.Mov.Reg(r3, r9),
			ebpfasm.Add.Imm(r3, recOff),
			ebpfasm.FnSkbLoadBytes.Call(),
			ebpfasm.JNE.Imm(r0, 0, "discard"),
		}
	}
	p := capture.BPFMatch(l2, ports, "keep", "keep")
	p = append(p,
		ebpfasm.LoadMapPtr(r1, ringFD).WithSymbol("keep"),
		ebpfasm.Mov.Imm(r2, headRecordSize(int(head), int(tail))),
		ebpfasm.Mov.Imm(r3, 0),
		ebpfasm.FnRingbufReserve.Call(),
		ebpfasm.JEq.Imm(r0, 0, "drop"),
		ebpfasm.Mov.Reg(r9, r0),
		// The TCP header, into the record.
		ebpfasm.Mov.Reg(r2, r7),
		ebpfasm.Mov.Imm(r4, 20),
	)
	p = append(p, loadBytes(headTCP)...)
	// The addresses, from the IP header on the stack.
	p = append(p,
		ebpfasm.StoreMem(r9, 16, r8, ebpfasm.Byte),
		ebpfasm.StoreImm(r9, 22, int64(head), ebpfasm.Half),
		ebpfasm.JEq.Imm(r8, 6, "addr6"),
		ebpfasm.LoadMem(r2, fp, capture.BPFScratch+12, ebpfasm.Word),
		ebpfasm.StoreMem(r9, 24, r2, ebpfasm.Word),
		ebpfasm.LoadMem(r2, fp, capture.BPFScratch+16, ebpfasm.Word),
		ebpfasm.StoreMem(r9, 40, r2, ebpfasm.Word),
		ebpfasm.Ja.Label("addrs"),
	)
	for i := int16(0); i < 4; i++ {
		ld := ebpfasm.LoadMem(r2, fp, capture.BPFScratch+8+8*i, ebpfasm.DWord)
		if i == 0 {
			ld = ld.WithSymbol("addr6")
		}
		p = append(p, ld, ebpfasm.StoreMem(r9, 24+8*i, r2, ebpfasm.DWord))
	}
	p = append(p,
		ebpfasm.FnKtimeGetNs.Call().WithSymbol("addrs"),
		ebpfasm.StoreMem(r9, 0, r0, ebpfasm.DWord),
		// The payload: from r7 = the TCP header + its data offset to the
		// packet's end.
		ebpfasm.LoadMem(r2, r9, headTCP+12, ebpfasm.Byte),
		ebpfasm.RSh.Imm(r2, 4),
		ebpfasm.LSh.Imm(r2, 2),
		ebpfasm.Add.Reg(r7, r2),
		ebpfasm.LoadMem(r2, r6, capture.BPFSkbLen, ebpfasm.Word),
		ebpfasm.StoreMem(r9, 8, r2, ebpfasm.Word),
		ebpfasm.JGT.Reg(r7, r2, "discard"),
		ebpfasm.Sub.Reg(r2, r7),
		ebpfasm.StoreMem(r9, 12, r2, ebpfasm.Word),
		ebpfasm.StoreMem(fp, spPayload, r2, ebpfasm.DWord),
		// The head: min(payload, head) bytes.
		ebpfasm.Mov.Reg(r4, r2),
		ebpfasm.JLE.Imm(r4, head, "headlen"),
		ebpfasm.Mov.Imm(r4, head),
		ebpfasm.StoreMem(r9, 18, r4, ebpfasm.Half).WithSymbol("headlen"),
		ebpfasm.StoreMem(fp, spHead, r4, ebpfasm.DWord),
		ebpfasm.StoreImm(r9, 20, 0, ebpfasm.Half),
		ebpfasm.JLT.Imm(r4, 1, "submit"),
		ebpfasm.Mov.Reg(r2, r7),
	)
	p = append(p, loadBytes(headFixed)...)
	// The tail: min(payload - head, tail) bytes, ending at the payload's end.
	p = append(p,
		ebpfasm.LoadMem(r2, fp, spPayload, ebpfasm.DWord),
		ebpfasm.LoadMem(r4, fp, spHead, ebpfasm.DWord),
		ebpfasm.Sub.Reg(r2, r4),
		ebpfasm.Mov.Reg(r4, r2),
		ebpfasm.JLE.Imm(r4, tail, "taillen"),
		ebpfasm.Mov.Imm(r4, tail),
		ebpfasm.StoreMem(r9, 20, r4, ebpfasm.Half).WithSymbol("taillen"),
		ebpfasm.JLT.Imm(r4, 1, "submit"),
		ebpfasm.LoadMem(r2, fp, spPayload, ebpfasm.DWord),
		ebpfasm.Add.Reg(r2, r7),
		ebpfasm.Sub.Reg(r2, r4),
	)
	p = append(p, loadBytes(headFixed+head)...)
	p = append(p, ebpfasm.Ja.Label("submit"))
	p = append(p, capture.BPFDiscard("discard")...)
	p = append(p, capture.BPFSubmit("submit", ringFD, wake)...)
	return append(p, capture.BPFCountAndExit(dropsFD)...)
}

// readHead hands every committed header-only record to fn in order, in
// place, and gives its space back; it returns how many it read.
func (s *tcxSource) readHead(fn func(*headRecord)) int {
	var r headRecord
	return s.Each(headFixed, func(rec []byte) {
		size := uint64(len(rec))
		r.TSUS = s.WallUS(*(*int64)(unsafe.Pointer(&rec[0])))
		r.Wire = *(*uint32)(unsafe.Pointer(&rec[8]))
		r.Payload = *(*uint32)(unsafe.Pointer(&rec[12]))
		r.Version = rec[16]
		alen := 4
		if r.Version == 6 {
			alen = 16
		}
		r.Src, r.Dst = rec[24:24+alen], rec[40:40+alen]
		t := rec[headTCP:]
		r.SrcPort, r.DstPort = binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:])
		r.Seq, r.Ack = binary.BigEndian.Uint32(t[4:]), binary.BigEndian.Uint32(t[8:])
		r.Flags, r.Window = t[13], binary.BigEndian.Uint16(t[14:])
		h := min(uint64(*(*uint16)(unsafe.Pointer(&rec[18]))), size-headFixed)
		tl := min(uint64(*(*uint16)(unsafe.Pointer(&rec[20]))), size-headFixed-h)
		r.Head = rec[headFixed : headFixed+h]
		// The tail sits after the largest head (-head), not after this one.
		at := min(headFixed+uint64(*(*uint16)(unsafe.Pointer(&rec[22]))), size-tl)
		r.Tail = rec[at : at+tl]
		fn(&r)
	})
}

// runTCXHead attaches the header-only program for the port and reads its
// records for dur, touching each one's fields as a decoder would (the
// ports, sequence numbers, flags, lengths and the head's first bytes).
func runTCXHead(ctx context.Context, iface string, port uint16, head, tail, wakeKB, ringMB int, poll, dur time.Duration, start func()) (result, error) {
	src, err := openTCXHead(iface, []uint16{port}, head, tail, wakeKB, max(ringMB, 64))
	if err != nil {
		return result{}, err
	}
	defer src.close()
	var frames int64
	var sum uint64
	touch := func(r *headRecord) {
		frames++
		sum += uint64(r.SrcPort) + uint64(r.Seq) + uint64(r.Ack) + uint64(r.Flags) + uint64(r.Payload)
		if len(r.Head) >= 5 {
			sum += uint64(r.Head[3]) + uint64(r.Head[4]) // the sequence id, the command
		}
		if len(r.Tail) > 0 {
			sum += uint64(r.Tail[len(r.Tail)-1])
		}
	}
	src.drain(ctx, dur, poll, start, func() int { return src.readHead(touch) })
	_ = sum
	return result{Mode: "tcx-head", Packets: frames, KernelDrops: src.dropped()}, nil
}
