package capture

import (
	"encoding/binary"
)

// The header-only capture's record: what the kernel program
// (ebpfprog.go) hands user space per packet, read in place.
//
//	 0 u64 CLOCK_MONOTONIC ns
//	 8 u32 the TCP payload's length on the wire
//	12 u32 A: bytes copied from the IP header on (headers, then the payload
//	       whole or its first head bytes)
//	16 u32 B: the payload's last bytes copied (0: the payload is whole in A)
//	24     A bytes: the IP header, the TCP header with its options, payload
//	24+recordMaxHeaders+head: B bytes, the payload's last B (a cut record)
//
// A record is whole (B = 0: every byte of the packet from its IP header
// on, in the smallest of recordClasses that holds it) or cut (a server's
// answer longer than head+tail bytes of payload, in a record of
// cutRecordSize). Its headers decode as a frame's do (decodeIP), so that
// sequence numbers, flags, windows, window scale and timestamp options
// reach the tracker exactly as from the AF_PACKET ring.
const (
	recordHeader = 24
	// recordMaxHeaders is the most an IP header and a TCP header take
	// (IPv4 with options, 60 + 60): the head of a cut record is copied
	// with them, the tail after the largest they can be.
	recordMaxHeaders = 120
)

// recordClasses are the sizes a whole record is reserved in (the ring
// buffer takes only sizes known when the program is verified): the
// smallest that holds the IP packet behind the record's header. A
// loopback frame with offloads is larger than 64 KiB here (BIG TCP: lo's
// tso_max_size is 512 KiB): the largest class holds 512 KiB; a larger
// packet is counted with the drops (the capture's kernel drops), never
// passed over in silence.
var recordClasses = []int32{128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 1<<16 + recordHeader,
	1<<17 + recordHeader, 1<<18 + recordHeader, 1<<19 + recordHeader}

// cutRecordSize is a cut record's size for head and tail bytes.
func cutRecordSize(head, tail int32) int32 {
	return (recordHeader + recordMaxHeaders + head + tail + 7) &^ 7
}

// Client capability flags that put a connection's answers in full
// payloads: compression (zlib, zstd) and TLS (SSL request).
const (
	capCompress     = 0x20
	capSSL          = 0x800
	capZstd         = 1 << 26
	fullPayloadCaps = capCompress | capSSL | capZstd
)

// decodeRecord fills p from one record taken at tsUS, for a program
// whose cut records hold head bytes of payload. A whole record is a
// packet like a frame's; a cut one has p.payload the head, p.tail the
// tail and p.size the payload's length on the wire. It never allocates.
func decodeRecord(rec []byte, head int, tsUS int64, p *packet) decodeResult {
	if len(rec) < recordHeader {
		return resultMalformed
	}
	size := int(binary.NativeEndian.Uint32(rec[8:]))
	a := int(binary.NativeEndian.Uint32(rec[12:]))
	b := int(binary.NativeEndian.Uint32(rec[16:]))
	if recordHeader+a > len(rec) {
		return resultMalformed
	}
	if r := decodeIP(rec[recordHeader:recordHeader+a], p); r != resultTCP {
		return r
	}
	p.tsUS = tsUS
	if b == 0 {
		return resultTCP // decodeTCP set size to the payload's length
	}
	// A cut packet is no larger than the largest class's (a larger size is
	// a broken record, and would have the tracker fill megabytes).
	at := recordHeader + recordMaxHeaders + head
	if at+b > len(rec) || len(p.payload) > head || len(p.payload)+b >= size || size > int(recordClasses[len(recordClasses)-1]) {
		return resultMalformed
	}
	p.tail, p.size = rec[at:at+b], size
	return resultTCP
}

// fullKey is a connection's key in the program's full map: the client's
// address, the server's (16 bytes each, IPv4 in the first 4), the
// client's port and the server's, in network order.
type fullKey [36]byte

func fullKeyOf(cli, srv endpoint) fullKey {
	var k fullKey
	put := func(at int, e endpoint) {
		if [12]byte(e.ip[:12]) == [12]byte(v4Mapped[:12]) {
			copy(k[at:], e.ip[12:])
		} else {
			copy(k[at:], e.ip[:])
		}
	}
	put(0, cli)
	put(16, srv)
	binary.BigEndian.PutUint16(k[32:], cli.port)
	binary.BigEndian.PutUint16(k[34:], srv.port)
	return k
}

// Record advances the tracker with one record of a header-only capture
// (head: the program's head bytes) taken at tsUS. rec is only read during
// the call.
func (t *Tracker) Record(rec []byte, head int, tsUS int64) {
	t.stats.Packets++
	t.stats.Bytes += int64(len(rec))
	p := &t.pkt
	if !t.decoded(decodeRecord(rec, head, tsUS, p)) {
		return
	}
	if p.cut() {
		t.stats.CutPackets++
	}
	t.segment(p)
}
