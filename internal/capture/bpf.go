package capture

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// The kernel filter keeps TCP segments to or from the server ports, so the
// capture goroutine never sees the rest of the host's traffic. It is built
// here, without libpcap: "tcp port P or tcp port Q" for IPv4 (unfragmented
// or first fragment) and IPv6 (TCP as the first next header).

// filterLink says where the IP header starts in a captured frame.
type filterLink int

const (
	filterEthernet filterLink = iota // 14-byte Ethernet header (also lo)
	filterRawIP                      // no link header (tun, wireguard)
)

// snapAccept is the byte count the filter keeps of a matching packet: all.
const snapAccept = 0x40000

// packetOutgoing is the PACKET_OUTGOING skb type.
const packetOutgoing = 4

// asm is a tiny assembler with forward labels for conditional jumps.
type asm struct {
	ins    []bpf.Instruction
	labels map[string]int
	fixups []fixup
}

type fixup struct {
	at            int
	ifTrue, ifNot string // labels; "" = next instruction
}

func (a *asm) emit(i bpf.Instruction) { a.ins = append(a.ins, i) }
func (a *asm) label(l string)         { a.labels[l] = len(a.ins) }

// jump adds a conditional jump to labels (ifTrue when the condition holds).
func (a *asm) jump(cond bpf.JumpTest, val uint32, ifTrue, ifNot string) {
	a.fixups = append(a.fixups, fixup{at: len(a.ins), ifTrue: ifTrue, ifNot: ifNot})
	a.emit(bpf.JumpIf{Cond: cond, Val: val})
}

func (a *asm) resolve() ([]bpf.RawInstruction, error) {
	for _, f := range a.fixups {
		j := a.ins[f.at].(bpf.JumpIf)
		var err error
		if j.SkipTrue, err = a.skip(f.at, f.ifTrue); err != nil {
			return nil, err
		}
		if j.SkipFalse, err = a.skip(f.at, f.ifNot); err != nil {
			return nil, err
		}
		a.ins[f.at] = j
	}
	return bpf.Assemble(a.ins)
}

func (a *asm) skip(at int, label string) (uint8, error) {
	if label == "" {
		return 0, nil
	}
	to, ok := a.labels[label]
	if !ok {
		return 0, fmt.Errorf("bpf: undefined label %q", label)
	}
	d := to - at - 1
	if d < 0 || d > 255 {
		return 0, fmt.Errorf("bpf: jump to %q out of range (%d)", label, d)
	}
	return uint8(d), nil
}

// buildFilter returns the classic BPF program for ports. dropOutgoing drops
// the PACKET_OUTGOING copy of each packet, which loopback delivers twice.
func buildFilter(ports []uint16, link filterLink, dropOutgoing bool) ([]bpf.RawInstruction, error) {
	return buildFilterSnap(ports, link, dropOutgoing, snapAccept)
}

// buildFilterSnap is buildFilter whose accepted answers (segments from a
// server port) are cut to respSnap bytes of frame; requests are kept whole.
// The filter's return value is the kernel's snap length, so a short one
// spares the copy into the ring. Only the tap measurement uses a short one:
// the decoder needs every byte of an answer to frame its packets.
func buildFilterSnap(ports []uint16, link filterLink, dropOutgoing bool, respSnap uint32) ([]bpf.RawInstruction, error) {
	if len(ports) == 0 || len(ports) > 32 {
		return nil, errors.New("bpf: need between 1 and 32 ports")
	}
	a := &asm{labels: map[string]int{}}
	if dropOutgoing {
		a.emit(bpf.LoadExtension{Num: bpf.ExtType})
		a.jump(bpf.JumpEqual, packetOutgoing, "drop", "")
	}
	l := uint32(0)
	switch link {
	case filterEthernet:
		l = 14
		a.emit(bpf.LoadAbsolute{Off: 12, Size: 2})
		a.jump(bpf.JumpEqual, etherIPv4, "v4", "")
		a.jump(bpf.JumpEqual, etherIPv6, "v6", "drop")
	case filterRawIP:
		a.emit(bpf.LoadAbsolute{Off: 0, Size: 1})
		a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: 0xf0})
		a.jump(bpf.JumpEqual, 0x40, "v4", "")
		a.jump(bpf.JumpEqual, 0x60, "v6", "drop")
	}
	cut := respSnap < snapAccept
	a.label("v4")
	a.emit(bpf.LoadAbsolute{Off: l + 9, Size: 1})
	a.jump(bpf.JumpEqual, ipProtoTCP, "", "drop")
	a.emit(bpf.LoadAbsolute{Off: l + 6, Size: 2})
	a.jump(bpf.JumpBitsSet, 0x1fff, "drop", "") // later fragments carry no TCP header
	a.emit(bpf.LoadMemShift{Off: l})
	portFields(a, "v4", ports, cut, l, func(off uint32) bpf.Instruction { return bpf.LoadIndirect{Off: off, Size: 2} })
	a.label("v6")
	a.emit(bpf.LoadAbsolute{Off: l + 6, Size: 1})
	a.jump(bpf.JumpEqual, ipProtoTCP, "", "drop")
	portFields(a, "v6", ports, cut, l+40, func(off uint32) bpf.Instruction { return bpf.LoadAbsolute{Off: off, Size: 2} })
	a.label("drop")
	a.emit(bpf.RetConstant{Val: 0})
	a.label("accept")
	a.emit(bpf.RetConstant{Val: snapAccept})
	a.label("accept-answer")
	if respSnap < snapAccept {
		a.emit(bpf.RetConstant{Val: respSnap})
	}
	return a.resolve()
}

// portFields checks one IP family's TCP ports, load(off) reading the
// 16-bit field at off (source port at src, destination at src+2): a
// server port on either side accepts (an answer cut short when cut).
func portFields(a *asm, family string, ports []uint16, cut bool, src uint32, load func(off uint32) bpf.Instruction) {
	for _, server := range []uint32{src, src + 2} { // an answer, then a request
		match := "accept"
		if server == src && cut {
			match = "accept-answer"
		}
		a.emit(load(server))
		portChecks(a, ports, match)
	}
	a.goTo("drop")
}

// goTo jumps to label whatever A holds.
func (a *asm) goTo(label string) { a.jump(bpf.JumpEqual, 0, label, label) }

func portChecks(a *asm, ports []uint16, match string) {
	for _, p := range ports {
		a.jump(bpf.JumpEqual, uint32(p), match, "")
	}
}

// Sample says which connections watch joins (its join sample; every
// connection is captured): those whose client port hashes to Key modulo N
// (N ≤ 1: all). The port is hashed first:
// Linux hands connect() even ports (odd ones are left for bind), so port % 2
// is always 0 and port % 4 splits in halves. With N a power of two and one
// Key, 1 in 2N follows a subset of 1 in N. Key = PortKey(p) makes every N
// follow the connection from port p: a sample that follows at least one
// connection whatever the few connections' ports hash to.
type Sample struct {
	N   uint16
	Key uint32
	// Paused follows no connection at all: the off part of a duty cycle
	// (a CPU budget that following one connection all the time exceeds).
	// N and Key say what the sample is when it resumes.
	Paused bool
}

// All follows every connection.
var All = Sample{N: 1}

// Follows reports whether the connection from client port is in the sample.
func (s Sample) Follows(port uint16) bool {
	return !s.Paused && (s.N <= 1 || portHash(port)%uint32(s.N) == s.Key%uint32(s.N))
}

// On reports whether the sample leaves connections out.
func (s Sample) On() bool { return s.N > 1 || s.Paused }

// PortKey is the Key of samples that follow the connection from port.
func PortKey(port uint16) uint32 { return portHash(port) }

func portHash(port uint16) uint32 { return uint32(port) * portHashMul >> portHashShift }

// A multiplicative hash (Knuth's golden-ratio constant, 32-bit): adjacent
// ports land in different buckets.
const (
	portHashMul   = 0x9E3779B1
	portHashShift = 16
)
