package capture

import (
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// seg describes one TCP segment for the frame builders below.
type seg struct {
	src, dst netip.AddrPort
	seq, ack uint32
	flags    uint8
	win      uint16
	wscale   int // window-scale option on SYNs; -1 none
	payload  []byte
	tsUS     int64
}

// tcpBytes builds the TCP header (+ options) and payload. Checksums are left
// zero: nothing on the read path verifies them, as with offloaded captures.
func tcpBytes(s seg) []byte {
	var opts []byte
	if s.flags&tcpSYN != 0 && s.wscale >= 0 {
		opts = []byte{2, 4, 0x05, 0xb4, 1, 3, 3, byte(s.wscale)} // MSS, NOP, WS
	}
	h := make([]byte, 20+len(opts))
	binary.BigEndian.PutUint16(h[0:], s.src.Port())
	binary.BigEndian.PutUint16(h[2:], s.dst.Port())
	binary.BigEndian.PutUint32(h[4:], s.seq)
	binary.BigEndian.PutUint32(h[8:], s.ack)
	h[12] = byte(len(h)/4) << 4
	h[13] = s.flags
	binary.BigEndian.PutUint16(h[14:], s.win)
	copy(h[20:], opts)
	return append(h, s.payload...)
}

// ipBytes wraps a TCP segment in IPv4 or IPv6 according to the addresses.
func ipBytes(s seg) []byte {
	tcp := tcpBytes(s)
	if s.src.Addr().Is4() {
		h := make([]byte, 20)
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(tcp)))
		h[6] = 0x40 // DF
		h[8], h[9] = 64, 6
		a, b := s.src.Addr().As4(), s.dst.Addr().As4()
		copy(h[12:], a[:])
		copy(h[16:], b[:])
		return append(h, tcp...)
	}
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(tcp)))
	h[6], h[7] = 6, 64
	a, b := s.src.Addr().As16(), s.dst.Addr().As16()
	copy(h[8:], a[:])
	copy(h[24:], b[:])
	return append(h, tcp...)
}

func etherType(ip []byte) uint16 {
	if ip[0]>>4 == 6 {
		return etherIPv6
	}
	return etherIPv4
}

// frame builds a whole frame of link type lt around s; vlans adds 802.1Q
// (or, for several, QinQ) tags on Ethernet.
func frame(lt layers.LinkType, s seg, vlans ...uint16) []byte {
	ip := ipBytes(s)
	et := etherType(ip)
	switch lt {
	case linkEthernet:
		h := make([]byte, 12, 14+4*len(vlans))
		for i, v := range vlans {
			tpid := uint16(etherVLAN)
			if i == 0 && len(vlans) > 1 {
				tpid = etherQinQ
			}
			h = binary.BigEndian.AppendUint16(h, tpid)
			h = binary.BigEndian.AppendUint16(h, v)
		}
		h = binary.BigEndian.AppendUint16(h, et)
		return append(h, ip...)
	case linkSLL:
		h := make([]byte, 16)
		binary.BigEndian.PutUint16(h[14:], et)
		return append(h, ip...)
	case linkSLL2:
		h := make([]byte, 20)
		binary.BigEndian.PutUint16(h[0:], et)
		return append(h, ip...)
	case linkNull:
		af := uint32(2)
		if et == etherIPv6 {
			af = 30 // macOS AF_INET6
		}
		return append(binary.LittleEndian.AppendUint32(nil, af), ip...)
	case linkLoop:
		return append(binary.BigEndian.AppendUint32(nil, 2), ip...)
	}
	return ip // raw IP link types
}

// conv is a scripted TCP conversation between a client and a server.
type conv struct {
	cli, srv       netip.AddrPort
	cseq, sseq     uint32
	tsUS           int64
	cliWin, srvWin uint16
}

func newConv(cli, srv string) *conv {
	return &conv{cli: netip.MustParseAddrPort(cli), srv: netip.MustParseAddrPort(srv),
		cseq: 1000, sseq: 5000, tsUS: 1_700_000_000_000_000, cliWin: 512, srvWin: 512}
}

// step advances the conversation clock.
func (c *conv) step(us int64) int64 { c.tsUS += us; return c.tsUS }

func (c *conv) handshake(cliScale, srvScale int) []seg {
	out := []seg{
		{src: c.cli, dst: c.srv, seq: c.cseq, flags: tcpSYN, win: 65535, wscale: cliScale, tsUS: c.step(10)},
		{src: c.srv, dst: c.cli, seq: c.sseq, ack: c.cseq + 1, flags: tcpSYN | tcpACK, win: 65535, wscale: srvScale, tsUS: c.step(10)},
		{src: c.cli, dst: c.srv, seq: c.cseq + 1, ack: c.sseq + 1, flags: tcpACK, win: c.cliWin, wscale: -1, tsUS: c.step(10)},
	}
	c.cseq++
	c.sseq++
	return out
}

// fromClient / fromServer produce the next in-order data segment.
func (c *conv) fromClient(p []byte) seg {
	s := seg{src: c.cli, dst: c.srv, seq: c.cseq, ack: c.sseq, flags: tcpACK | 0x08, win: c.cliWin, wscale: -1, payload: p, tsUS: c.step(100)}
	c.cseq += uint32(len(p))
	return s
}

func (c *conv) fromServer(p []byte) seg {
	s := seg{src: c.srv, dst: c.cli, seq: c.sseq, ack: c.cseq, flags: tcpACK | 0x08, win: c.srvWin, wscale: -1, payload: p, tsUS: c.step(100)}
	c.sseq += uint32(len(p))
	return s
}

// clientAck is a bare ACK from the client advertising win.
func (c *conv) clientAck(win uint16) seg {
	return seg{src: c.cli, dst: c.srv, seq: c.cseq, ack: c.sseq, flags: tcpACK, win: win, wscale: -1, tsUS: c.step(100)}
}

func (c *conv) fin(fromClient bool) seg {
	s := seg{src: c.srv, dst: c.cli, seq: c.sseq, ack: c.cseq, flags: tcpFIN | tcpACK, win: c.srvWin, wscale: -1, tsUS: c.step(10)}
	if fromClient {
		s = seg{src: c.cli, dst: c.srv, seq: c.cseq, ack: c.sseq, flags: tcpFIN | tcpACK, win: c.cliWin, wscale: -1, tsUS: c.step(10)}
		c.cseq++
	} else {
		c.sseq++
	}
	return s
}

// mysqlPacket frames payload as one MySQL packet with sequence id seq.
func mysqlPacket(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// writePcap writes segments as a pcap file of link type lt.
func writePcap(t testing.TB, lt layers.LinkType, segs []seg) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(262144, lt); err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		data := frame(lt, s)
		ci := gopacket.CaptureInfo{Timestamp: time.UnixMicro(s.tsUS), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// writePcapNG writes segments as a pcapng file of link type lt.
func writePcapNG(t testing.TB, lt layers.LinkType, segs []seg) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pcapgo.NewNgWriter(f, lt)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		data := frame(lt, s)
		ci := gopacket.CaptureInfo{Timestamp: time.UnixMicro(s.tsUS), CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return path
}
