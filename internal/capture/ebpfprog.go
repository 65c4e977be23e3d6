//go:build linux

package capture

import (
	ebpfasm "github.com/cilium/ebpf/asm"
)

// headerProgram is the header-only capture's program (see ebpfrecord.go
// for the record it writes). Per packet of the ports:
//
//   - a request (to a server port), and an answer no longer than head+tail
//     bytes of payload, or an answer on a connection in the full map, is
//     copied whole from its IP header on, into the smallest record class
//     that holds it;
//   - a longer answer is cut: its IP and TCP headers (options included)
//     and the payload's first head bytes, then its last tail bytes, in a
//     record of one fixed size.
//
// A request that is a client's handshake response or SSL request (one
// MySQL packet of sequence id 1 whose capability flags ask for
// compression, zstd or TLS) puts its connection in the full map from the
// kernel, before the server answers: those connections' answers cannot
// be decoded from a head (compressed packets inflate only whole; TLS
// records are walked), and user space, which reads the records up to
// 100 ms later, would be too late for the first answers. User space adds
// connections whose answers it cannot follow otherwise, and removes a
// connection from the map when it closes (an LRU map besides: a
// forgotten entry is evicted, never a capture failure).
//
// Stack: BPFScratch (-64..-25) the IP header, -8..-5 the ports and
// BPFTCPOffset (-24) the TCP header's data-offset byte (BPFMatch), -16 the
// payload's length,
// -104..-69 the full map's key, -120 the payload's offset, -128 the
// direction (1: an answer), -136 the first 8 bytes of a request, -140 the
// map's value.
func headerProgram(l2 int32, ports []uint16, head, tail int32, ringFD, dropsFD, fullFD, wakeFD int) ebpfasm.Instructions {
	const (
		spPayload = -16
		spKey     = -104
		spPayOff  = -120
		spDir     = -128
		spPeek    = -136
		spValue   = -140
	)
	r0, r1, r2, r3, r4 := ebpfasm.R0, ebpfasm.R1, ebpfasm.R2, ebpfasm.R3, ebpfasm.R4
	r6, r7, r8, r9, fp := ebpfasm.R6, ebpfasm.R7, ebpfasm.R8, ebpfasm.R9, ebpfasm.RFP
	load := func(fail string) ebpfasm.Instructions { // r2 the packet offset, r3 the destination, r4 the length
		return ebpfasm.Instructions{
			ebpfasm.Mov.Reg(r1, r6),
			ebpfasm.FnSkbLoadBytes.Call(),
			ebpfasm.JNE.Imm(r0, 0, fail),
		}
	}
	// key writes the connection's full-map key on the stack: the client's
	// address, the server's, the client's port, the server's (addresses in
	// 16 bytes, IPv4 in the first 4, the rest zero; ports as sent).
	key := func(label string, clientIsSrc bool) ebpfasm.Instructions {
		cliAddr4, srvAddr4 := int16(BPFScratch+16), int16(BPFScratch+12)
		cliAddr6, srvAddr6 := int16(BPFScratch+24), int16(BPFScratch+8)
		cliPort, srvPort := int16(-6), int16(-8)
		if clientIsSrc {
			cliAddr4, srvAddr4, cliAddr6, srvAddr6, cliPort, srvPort = srvAddr4, cliAddr4, srvAddr6, cliAddr6, srvPort, cliPort
		}
		p := ebpfasm.Instructions{ebpfasm.StoreImm(fp, spKey, 0, ebpfasm.Word).WithSymbol(label)}
		for off := int16(spKey + 4); off < spKey+40; off += 4 {
			p = append(p, ebpfasm.StoreImm(fp, off, 0, ebpfasm.Word))
		}
		p = append(p,
			ebpfasm.JEq.Imm(r8, 6, label+"-v6"),
			ebpfasm.LoadMem(r2, fp, cliAddr4, ebpfasm.Word),
			ebpfasm.StoreMem(fp, spKey, r2, ebpfasm.Word),
			ebpfasm.LoadMem(r2, fp, srvAddr4, ebpfasm.Word),
			ebpfasm.StoreMem(fp, spKey+16, r2, ebpfasm.Word),
			ebpfasm.Ja.Label(label+"-ports"),
			ebpfasm.LoadMem(r2, fp, cliAddr6, ebpfasm.DWord).WithSymbol(label+"-v6"),
			ebpfasm.StoreMem(fp, spKey, r2, ebpfasm.DWord),
			ebpfasm.LoadMem(r2, fp, cliAddr6+8, ebpfasm.DWord),
			ebpfasm.StoreMem(fp, spKey+8, r2, ebpfasm.DWord),
			ebpfasm.LoadMem(r2, fp, srvAddr6, ebpfasm.DWord),
			ebpfasm.StoreMem(fp, spKey+16, r2, ebpfasm.DWord),
			ebpfasm.LoadMem(r2, fp, srvAddr6+8, ebpfasm.DWord),
			ebpfasm.StoreMem(fp, spKey+24, r2, ebpfasm.DWord),
			ebpfasm.LoadMem(r2, fp, cliPort, ebpfasm.Half).WithSymbol(label+"-ports"),
			ebpfasm.StoreMem(fp, spKey+32, r2, ebpfasm.Half),
			ebpfasm.LoadMem(r2, fp, srvPort, ebpfasm.Half),
			ebpfasm.StoreMem(fp, spKey+34, r2, ebpfasm.Half),
			ebpfasm.LoadMapPtr(r1, fullFD),
			ebpfasm.Mov.Reg(r2, fp),
			ebpfasm.Add.Imm(r2, spKey),
		)
		return p
	}
	p := BPFMatch(l2, ports, "answer", "request")
	p = append(p,
		ebpfasm.StoreImm(fp, spDir, 1, ebpfasm.Word).WithSymbol("answer"),
		ebpfasm.Ja.Label("tcp-offset"),
		ebpfasm.StoreImm(fp, spDir, 0, ebpfasm.Word).WithSymbol("request"),
		// The payload starts after the TCP header's data offset.
		ebpfasm.LoadMem(r2, fp, BPFTCPOffset, ebpfasm.Byte).WithSymbol("tcp-offset"),
		ebpfasm.RSh.Imm(r2, 4),
		ebpfasm.LSh.Imm(r2, 2),
		ebpfasm.Add.Reg(r2, r7),
		ebpfasm.StoreMem(fp, spPayOff, r2, ebpfasm.DWord),
		ebpfasm.LoadMem(r3, r6, BPFSkbLen, ebpfasm.Word),
		ebpfasm.JGT.Reg(r2, r3, BPFNext),
		ebpfasm.Sub.Reg(r3, r2),
		ebpfasm.StoreMem(fp, spPayload, r3, ebpfasm.DWord),
		ebpfasm.LoadMem(r4, fp, spDir, ebpfasm.Word),
		ebpfasm.JEq.Imm(r4, 0, "peek"),
		// An answer: whole when short, or when its connection is in the map.
		ebpfasm.JLE.Imm(r3, head+tail, "whole"),
	)
	p = append(p, key("answer-key", false)...)
	p = append(p,
		ebpfasm.FnMapLookupElem.Call(),
		ebpfasm.JNE.Imm(r0, 0, "whole"),
		ebpfasm.Ja.Label("cut"),
		// A request: a handshake response asking for compression or TLS
		// puts the connection in the map.
		ebpfasm.JLT.Imm(r3, 8, "whole").WithSymbol("peek"),
		ebpfasm.LoadMem(r2, fp, spPayOff, ebpfasm.DWord),
		ebpfasm.Mov.Reg(r3, fp),
		ebpfasm.Add.Imm(r3, spPeek),
		ebpfasm.Mov.Imm(r4, 8),
	)
	p = append(p, load("whole")...)
	p = append(p,
		ebpfasm.LoadMem(r2, fp, spPeek+3, ebpfasm.Byte),
		ebpfasm.JNE.Imm(r2, 1, "whole"),
		ebpfasm.LoadMem(r2, fp, spPeek+4, ebpfasm.Word), // little-endian hosts: the flags as the client wrote them
		ebpfasm.And.Imm(r2, int32(fullPayloadCaps)),
		ebpfasm.JEq.Imm(r2, 0, "whole"),
		ebpfasm.LoadMem(r2, fp, spPeek, ebpfasm.Word),
		ebpfasm.And.Imm(r2, 0xffffff),
		ebpfasm.LoadMem(r3, fp, spPayload, ebpfasm.DWord),
		ebpfasm.Sub.Imm(r3, 4),
		ebpfasm.JNE.Reg(r2, r3, "whole"),
	)
	p = append(p, key("request-key", true)...)
	p = append(p,
		ebpfasm.StoreImm(fp, spValue, 1, ebpfasm.Word),
		ebpfasm.Mov.Reg(r3, fp),
		ebpfasm.Add.Imm(r3, spValue),
		ebpfasm.Mov.Imm(r4, 0), // BPF_ANY
		ebpfasm.FnMapUpdateElem.Call(),
		// Whole: the IP packet from its header on.
		ebpfasm.LoadMem(r7, r6, BPFSkbLen, ebpfasm.Word).WithSymbol("whole"),
		ebpfasm.Sub.Imm(r7, l2),
		ebpfasm.JSLT.Imm(r7, 1, BPFNext),
	)
	p = append(p, BPFReserveClass("reserve", r7, recordClasses, recordHeader, ringFD, "fill", BPFDrop)...)
	// fill writes the record's header (the time, the payload's length, r7
	// bytes copied from the IP header on, tail bytes after) and copies the r7.
	fill := func(label string, tail int32) ebpfasm.Instructions {
		p := ebpfasm.Instructions{
			ebpfasm.FnKtimeGetNs.Call().WithSymbol(label),
			ebpfasm.StoreMem(r9, 0, r0, ebpfasm.DWord),
			ebpfasm.LoadMem(r2, fp, spPayload, ebpfasm.DWord),
			ebpfasm.StoreMem(r9, 8, r2, ebpfasm.Word),
			ebpfasm.StoreMem(r9, 12, r7, ebpfasm.Word),
			ebpfasm.StoreImm(r9, 16, int64(tail), ebpfasm.Word),
			ebpfasm.Mov.Imm(r2, l2),
			ebpfasm.Mov.Reg(r3, r9),
			ebpfasm.Add.Imm(r3, recordHeader),
			ebpfasm.Mov.Reg(r4, r7),
		}
		return append(p, load("discard")...)
	}
	p = append(p, fill("fill", 0)...)
	p = append(p,
		ebpfasm.Ja.Label("submit"),
		// Cut: the headers and the head, then the tail at its fixed place.
		ebpfasm.LoadMapPtr(r1, ringFD).WithSymbol("cut"),
		ebpfasm.Mov.Imm(r2, cutRecordSize(head, tail)),
		ebpfasm.Mov.Imm(r3, 0),
		ebpfasm.FnRingbufReserve.Call(),
		ebpfasm.JEq.Imm(r0, 0, BPFDrop),
		ebpfasm.Mov.Reg(r9, r0),
		ebpfasm.LoadMem(r7, fp, spPayOff, ebpfasm.DWord),
		ebpfasm.Sub.Imm(r7, l2),
		ebpfasm.Add.Imm(r7, head),
		ebpfasm.JGT.Imm(r7, recordMaxHeaders+head, "discard"),
		ebpfasm.JLT.Imm(r7, 1, "discard"),
	)
	p = append(p, fill("fill-cut", tail)...)
	p = append(p,
		ebpfasm.LoadMem(r2, r6, BPFSkbLen, ebpfasm.Word),
		ebpfasm.Sub.Imm(r2, tail),
		ebpfasm.Mov.Reg(r3, r9),
		ebpfasm.Add.Imm(r3, recordHeader+recordMaxHeaders+head),
		ebpfasm.Mov.Imm(r4, tail),
	)
	p = append(p, load("discard")...)
	p = append(p, ebpfasm.Ja.Label("submit"))
	p = append(p, BPFDiscard("discard")...)
	p = append(p, submitWaking("submit", ringFD, wakeFD, BPFWakeBytes)...)
	return append(p, BPFCountAndExit(dropsFD)...)
}

// submitWaking submits the record in r9 at label as BPFSubmit does (the
// reader woken when wake bytes wait), unless the wake map's flag says
// otherwise. A flag of 1 wakes the reader at this record and is cleared:
// the reader sets it before a long sleep, so that the first record after
// a quiet spell reaches it at once rather than at the end of its sleep. A
// larger flag is a smaller wake threshold in bytes, kept: the reader sets
// it while it sleeps longer between looks at a light load, so that a burst
// still reaches it within a few milliseconds. Under load (the flag clear)
// records wait for its pace as before. Past a threshold only the first
// record wakes the reader: it sets the map's second entry, a latch the
// reader clears before it waits again. Every wake asked for costs the
// sending process microseconds (BenchmarkHeaderProgram), and a reader
// that fell behind would otherwise be asked for one by every record until
// it runs. Stack: -144 the map's key, -152 the threshold across the query.
func submitWaking(label string, ringFD, wakeFD int, wake int32) ebpfasm.Instructions {
	const spWakeKey, spWakeAt = -144, -152
	r0, r1, r2, r3, fp := ebpfasm.R0, ebpfasm.R1, ebpfasm.R2, ebpfasm.R3, ebpfasm.RFP
	return ebpfasm.Instructions{
		ebpfasm.StoreImm(fp, spWakeKey, 0, ebpfasm.Word).WithSymbol(label),
		ebpfasm.LoadMapPtr(r1, wakeFD),
		ebpfasm.Mov.Reg(r2, fp),
		ebpfasm.Add.Imm(r2, spWakeKey),
		ebpfasm.FnMapLookupElem.Call(),
		ebpfasm.JEq.Imm(r0, 0, label+"-query"),
		ebpfasm.LoadMem(r3, r0, 0, ebpfasm.Word),
		ebpfasm.JEq.Imm(r3, 0, label+"-query"),
		ebpfasm.JGT.Imm(r3, 1, label+"-below"),
		ebpfasm.StoreImm(r0, 0, 0, ebpfasm.Word),
		ebpfasm.Mov.Imm(r2, 2), // BPF_RB_FORCE_WAKEUP
		ebpfasm.Ja.Label(label + "-notify"),
		ebpfasm.StoreMem(fp, spWakeAt, r3, ebpfasm.DWord).WithSymbol(label + "-below"),
		ebpfasm.LoadMapPtr(r1, ringFD),
		ebpfasm.Mov.Imm(r2, 0), // BPF_RB_AVAIL_DATA
		ebpfasm.FnRingbufQuery.Call(),
		ebpfasm.LoadMem(r3, fp, spWakeAt, ebpfasm.DWord),
		ebpfasm.Mov.Imm(r2, 1), // BPF_RB_NO_WAKEUP
		ebpfasm.JLT.Reg(r0, r3, label+"-notify"),
		ebpfasm.Ja.Label(label + "-latch"),
		ebpfasm.LoadMapPtr(r1, ringFD).WithSymbol(label + "-query"),
		ebpfasm.Mov.Imm(r2, 0), // BPF_RB_AVAIL_DATA
		ebpfasm.FnRingbufQuery.Call(),
		ebpfasm.Mov.Imm(r2, 1), // BPF_RB_NO_WAKEUP
		ebpfasm.JLT.Imm(r0, wake, label+"-notify"),
		// Past the threshold: wake the reader unless a record did since
		// it last read (the latch, the map's second entry).
		ebpfasm.StoreImm(fp, spWakeKey, 1, ebpfasm.Word).WithSymbol(label + "-latch"),
		ebpfasm.LoadMapPtr(r1, wakeFD),
		ebpfasm.Mov.Reg(r2, fp),
		ebpfasm.Add.Imm(r2, spWakeKey),
		ebpfasm.FnMapLookupElem.Call(),
		ebpfasm.Mov.Imm(r2, 2), // BPF_RB_FORCE_WAKEUP
		ebpfasm.JEq.Imm(r0, 0, label+"-notify"),
		ebpfasm.LoadMem(r3, r0, 0, ebpfasm.Word),
		ebpfasm.Mov.Imm(r2, 1), // BPF_RB_NO_WAKEUP
		ebpfasm.JNE.Imm(r3, 0, label+"-notify"),
		ebpfasm.StoreImm(r0, 0, 1, ebpfasm.Word),
		ebpfasm.Mov.Imm(r2, 2), // BPF_RB_FORCE_WAKEUP
		ebpfasm.Mov.Reg(r1, ebpfasm.R9).WithSymbol(label + "-notify"),
		ebpfasm.FnRingbufSubmit.Call(),
		ebpfasm.Ja.Label(BPFNext),
	}
}
