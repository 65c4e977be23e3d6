package capture

import (
	"encoding/binary"

	"github.com/gopacket/gopacket/layers"
)

// Link types we decode. The numbers are the LINKTYPE_* values of pcap files
// (layers.LinkType carries the same numbers).
const (
	linkNull     = layers.LinkTypeNull      // 0: BSD loopback, 4-byte address family
	linkEthernet = layers.LinkTypeEthernet  // 1
	linkRawOld1  = layers.LinkType(12)      // DLT_RAW on some BSDs
	linkRawOld2  = layers.LinkType(14)      // DLT_RAW on OpenBSD
	linkRaw      = layers.LinkTypeRaw       // 101: raw IPv4/IPv6
	linkLoop     = layers.LinkTypeLoop      // 108: OpenBSD loopback, big-endian family
	linkSLL      = layers.LinkTypeLinuxSLL  // 113: Linux cooked v1
	linkIPv4     = layers.LinkTypeIPv4      // 228
	linkIPv6     = layers.LinkTypeIPv6      // 229
	linkSLL2     = layers.LinkTypeLinuxSLL2 // 276: Linux cooked v2
)

// SupportedLinkType reports whether frames of link type lt can be decoded.
func SupportedLinkType(lt layers.LinkType) bool {
	switch lt {
	case linkNull, linkEthernet, linkRawOld1, linkRawOld2, linkRaw, linkLoop,
		linkSLL, linkIPv4, linkIPv6, linkSLL2:
		return true
	}
	return false
}

// EtherTypes met between the link header and IP.
const (
	etherIPv4  = 0x0800
	etherIPv6  = 0x86dd
	etherVLAN  = 0x8100 // 802.1Q
	etherQinQ  = 0x88a8 // 802.1ad
	etherQinQ2 = 0x9100 // pre-standard QinQ
)

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// decodeResult says what decodeFrame found; only resultTCP fills a packet.
type decodeResult uint8

const (
	resultTCP       decodeResult = iota
	resultNotTCP                 // another protocol (ARP, UDP, ICMP, 802.3 frame, ...)
	resultFragment               // an IPv4/IPv6 fragment: noted and skipped
	resultMalformed              // too short or inconsistent headers
)

// v4Mapped is the ::ffff:0:0/96 prefix of IPv4-mapped IPv6 addresses.
var v4Mapped = [16]byte{10: 0xff, 11: 0xff}

// endpoint is an IP address (IPv4 stored IPv4-mapped) and a port.
type endpoint struct {
	ip   [16]byte
	port uint16
}

// packet is one decoded TCP segment. payload points into the frame and is
// only valid until the next frame is read.
type packet struct {
	tsUS     int64
	src, dst endpoint
	v6       bool
	seq, ack uint32
	flags    uint8
	window   uint16
	wscale   int8   // window-scale option of a SYN; -1 when absent
	hasTS    bool   // the segment carries the timestamp option (rtt.go)
	tsVal    uint32 // its TSval and TSecr
	tsEcr    uint32
	payload  []byte
	// size is the payload's length on the wire: len(payload) but for a
	// header-only record cut short (ebpfrecord.go), whose payload holds
	// the first bytes and tail the last; the middle was not captured.
	size int
	tail []byte
}

// cut reports whether the packet's payload was captured in part.
func (p *packet) cut() bool { return p.tail != nil }

// decodeFrame parses link, IP and TCP headers by hand into p. It never
// allocates: the whole decode path is a few bounds checks and loads.
func decodeFrame(lt layers.LinkType, data []byte, p *packet) decodeResult {
	ipData, r := stripLink(lt, data)
	if r != resultTCP {
		return r
	}
	return decodeIP(ipData, p)
}

// stripLink removes the link-layer header(s) and returns the IP packet.
func stripLink(lt layers.LinkType, data []byte) ([]byte, decodeResult) {
	switch lt {
	case linkEthernet:
		if len(data) < 14 {
			return nil, resultMalformed
		}
		return stripEtherType(binary.BigEndian.Uint16(data[12:14]), data[14:])
	case linkSLL:
		if len(data) < 16 {
			return nil, resultMalformed
		}
		return stripEtherType(binary.BigEndian.Uint16(data[14:16]), data[16:])
	case linkSLL2:
		if len(data) < 20 {
			return nil, resultMalformed
		}
		return stripEtherType(binary.BigEndian.Uint16(data[0:2]), data[20:])
	case linkNull, linkLoop:
		// The 4-byte address family is in the capturing host's byte order
		// (NULL) or big-endian (LOOP), and AF_INET6 differs between BSDs:
		// the IP version nibble is the reliable signal.
		if len(data) < 4 {
			return nil, resultMalformed
		}
		return data[4:], resultTCP
	case linkRaw, linkRawOld1, linkRawOld2, linkIPv4, linkIPv6:
		return data, resultTCP
	}
	return nil, resultNotTCP
}

// stripEtherType follows VLAN tags (802.1Q, QinQ) to an IP payload.
func stripEtherType(et uint16, data []byte) ([]byte, decodeResult) {
	for et == etherVLAN || et == etherQinQ || et == etherQinQ2 {
		if len(data) < 4 {
			return nil, resultMalformed
		}
		et = binary.BigEndian.Uint16(data[2:4])
		data = data[4:]
	}
	if et != etherIPv4 && et != etherIPv6 {
		return nil, resultNotTCP
	}
	return data, resultTCP
}

// decodeIP dispatches on the IP version nibble.
func decodeIP(data []byte, p *packet) decodeResult {
	if len(data) < 1 {
		return resultMalformed
	}
	switch data[0] >> 4 {
	case 4:
		return decodeIPv4(data, p)
	case 6:
		return decodeIPv6(data, p)
	}
	return resultNotTCP
}

func decodeIPv4(data []byte, p *packet) decodeResult {
	if len(data) < 20 {
		return resultMalformed
	}
	ihl := int(data[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(data[2:4]))
	if ihl < 20 || total != 0 && total < ihl || len(data) < ihl {
		return resultMalformed
	}
	// total == 0 happens with TCP segmentation offload captured on the
	// sending host, and for IP packets over 64 KiB (BIG TCP: loopback's
	// offloads make them; the eBPF capture sees them whole); trust the
	// captured length then.
	if total != 0 && total < len(data) {
		data = data[:total] // drop Ethernet padding
	}
	if data[9] != 6 {
		return resultNotTCP
	}
	if frag := binary.BigEndian.Uint16(data[6:8]); frag&0x3fff != 0 { // MF or offset
		return resultFragment
	}
	p.v6 = false
	// Stored IPv4-mapped (::ffff:a.b.c.d) so that IPv4 and IPv6 flows
	// never share a key.
	p.src.ip, p.dst.ip = v4Mapped, v4Mapped
	copy(p.src.ip[12:], data[12:16])
	copy(p.dst.ip[12:], data[16:20])
	return decodeTCP(data[ihl:], p)
}

// IPv6 extension headers we walk over to reach TCP.
const (
	ip6HopByHop = 0
	ip6Routing  = 43
	ip6Fragment = 44
	ip6DestOpts = 60
	ipProtoTCP  = 6
)

func decodeIPv6(data []byte, p *packet) decodeResult {
	if len(data) < 40 {
		return resultMalformed
	}
	plen := int(binary.BigEndian.Uint16(data[4:6]))
	next := data[6]
	p.v6 = true
	copy(p.src.ip[:], data[8:24])
	copy(p.dst.ip[:], data[24:40])
	data = data[40:]
	if plen != 0 && plen < len(data) { // plen 0: jumbogram or TSO; keep what we have
		data = data[:plen]
	}
	for next != ipProtoTCP {
		switch next {
		case ip6HopByHop, ip6Routing, ip6DestOpts:
			if len(data) < 8 {
				return resultMalformed
			}
			n := (int(data[1]) + 1) * 8
			if len(data) < n {
				return resultMalformed
			}
			next, data = data[0], data[n:]
		case ip6Fragment:
			return resultFragment
		default:
			return resultNotTCP
		}
	}
	return decodeTCP(data, p)
}

func decodeTCP(data []byte, p *packet) decodeResult {
	if len(data) < 20 {
		return resultMalformed
	}
	off := int(data[12]>>4) * 4
	if off < 20 || off > len(data) {
		return resultMalformed
	}
	p.src.port = binary.BigEndian.Uint16(data[0:2])
	p.dst.port = binary.BigEndian.Uint16(data[2:4])
	p.seq = binary.BigEndian.Uint32(data[4:8])
	p.ack = binary.BigEndian.Uint32(data[8:12])
	p.flags = data[13]
	p.window = binary.BigEndian.Uint16(data[14:16])
	p.wscale = -1
	if p.flags&tcpSYN != 0 {
		p.wscale = windowScale(data[20:off])
	}
	p.hasTS = off > 20 && timestamps(data[20:off], p)
	p.payload = data[off:]
	p.size, p.tail = len(p.payload), nil
	return resultTCP
}

// windowScale finds the window-scale option (kind 3) among TCP options;
// -1 when absent. RFC 7323 caps the shift at 14.
func windowScale(opts []byte) int8 {
	for len(opts) > 0 {
		switch kind := opts[0]; kind {
		case 0: // end of options
			return -1
		case 1: // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return -1
		}
		if opts[0] == 3 && opts[1] == 3 {
			return int8(min(opts[2], 14))
		}
		opts = opts[opts[1]:]
	}
	return -1
}
