package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

var allLinks = []layers.LinkType{linkEthernet, linkSLL, linkSLL2, linkNull, linkLoop, linkRaw, linkRawOld1, linkRawOld2, linkIPv4, linkIPv6}

func testSeg(v6 bool) seg {
	src, dst := "10.1.2.3:51234", "10.9.8.7:3306"
	if v6 {
		src, dst = "[2001:db8::1]:51234", "[2001:db8::2]:3306"
	}
	return seg{src: netip.MustParseAddrPort(src), dst: netip.MustParseAddrPort(dst), seq: 0xfffffff0, ack: 77,
		flags: tcpSYN | tcpACK, win: 1234, wscale: 7, payload: []byte("hello")}
}

func TestDecodeFrameLinkTypes(t *testing.T) {
	for _, lt := range allLinks {
		for _, v6 := range []bool{false, true} {
			if (lt == linkIPv4 && v6) || (lt == linkIPv6 && !v6) {
				continue
			}
			t.Run(fmt.Sprintf("%v/v6=%v", lt, v6), func(t *testing.T) {
				s := testSeg(v6)
				checkDecoded(t, lt, frame(lt, s), s)
			})
		}
	}
}

func TestDecodeFrameVLAN(t *testing.T) {
	for _, tags := range [][]uint16{{10}, {10, 20}, {1, 2, 3}} {
		s := testSeg(false)
		checkDecoded(t, linkEthernet, frame(linkEthernet, s, tags...), s)
	}
}

func checkDecoded(t *testing.T, lt layers.LinkType, data []byte, s seg) {
	t.Helper()
	var p packet
	if r := decodeFrame(lt, data, &p); r != resultTCP {
		t.Fatalf("decodeFrame = %v, want TCP", r)
	}
	if got := netip.AddrPortFrom(netip.AddrFrom16(p.src.ip).Unmap(), p.src.port); got != s.src {
		t.Errorf("src = %v, want %v", got, s.src)
	}
	if got := netip.AddrPortFrom(netip.AddrFrom16(p.dst.ip).Unmap(), p.dst.port); got != s.dst {
		t.Errorf("dst = %v, want %v", got, s.dst)
	}
	if p.seq != s.seq || p.ack != s.ack || p.flags != s.flags || p.window != s.win || int(p.wscale) != s.wscale {
		t.Errorf("tcp fields = seq %d ack %d flags %x win %d ws %d", p.seq, p.ack, p.flags, p.window, p.wscale)
	}
	if !bytes.Equal(p.payload, s.payload) {
		t.Errorf("payload = %q, want %q", p.payload, s.payload)
	}
}

func TestDecodeFrameTrimsEthernetPadding(t *testing.T) {
	s := testSeg(false)
	s.payload = nil
	data := append(frame(linkEthernet, s), 0, 0, 0, 0, 0, 0) // padded to the 60-byte minimum
	var p packet
	if decodeFrame(linkEthernet, data, &p) != resultTCP || len(p.payload) != 0 {
		t.Fatalf("padding leaked into the payload: %q", p.payload)
	}
}

func TestDecodeFrameFragments(t *testing.T) {
	s := testSeg(false)
	v4 := frame(linkRaw, s)
	binary.BigEndian.PutUint16(v4[6:], 0x2000) // MF
	var p packet
	if r := decodeFrame(linkRaw, v4, &p); r != resultFragment {
		t.Errorf("IPv4 MF: %v, want fragment", r)
	}
	binary.BigEndian.PutUint16(v4[6:], 0x0010) // offset, no MF
	if r := decodeFrame(linkRaw, v4, &p); r != resultFragment {
		t.Errorf("IPv4 last fragment: %v, want fragment", r)
	}
	// IPv6 with a fragment header in front of TCP.
	v6 := frame(linkRaw, testSeg(true))
	ext := append([]byte{6, 0, 0, 0, 0, 0, 0, 1}, v6[40:]...)
	v6 = append(v6[:40:40], ext...)
	v6[6] = ip6Fragment
	binary.BigEndian.PutUint16(v6[4:], uint16(len(ext)))
	if r := decodeFrame(linkRaw, v6, &p); r != resultFragment {
		t.Errorf("IPv6 fragment: %v, want fragment", r)
	}
}

func TestDecodeFrameIPv6ExtensionHeaders(t *testing.T) {
	s := testSeg(true)
	v6 := frame(linkRaw, s)
	ext := append([]byte{6, 0, 1, 4, 0, 0, 0, 0}, v6[40:]...) // hop-by-hop, 8 bytes
	v6 = append(v6[:40:40], ext...)
	v6[6] = ip6HopByHop
	binary.BigEndian.PutUint16(v6[4:], uint16(len(ext)))
	checkDecoded(t, linkRaw, v6, s)
}

func TestDecodeFrameNotTCP(t *testing.T) {
	var p packet
	arp := make([]byte, 42)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	if r := decodeFrame(linkEthernet, arp, &p); r != resultNotTCP {
		t.Errorf("ARP: %v", r)
	}
	udp := frame(linkRaw, testSeg(false))
	udp[9] = 17
	if r := decodeFrame(linkRaw, udp, &p); r != resultNotTCP {
		t.Errorf("UDP: %v", r)
	}
	if r := decodeFrame(layers.LinkType(147), udp, &p); r != resultNotTCP {
		t.Errorf("unknown link type: %v", r)
	}
}

// Every prefix of a valid frame, and every single-byte corruption of its
// headers, must decode without panicking or reading out of bounds.
func TestDecodeFrameTruncatedAndCorrupt(t *testing.T) {
	for _, lt := range allLinks {
		for _, v6 := range []bool{false, true} {
			full := frame(lt, testSeg(v6), 7)
			var p packet
			for n := range len(full) {
				if r := decodeFrame(lt, full[:n], &p); r == resultTCP && len(p.payload) > n {
					t.Fatalf("%v: prefix %d gave payload of %d", lt, n, len(p.payload))
				}
			}
			for i := range min(len(full), 80) {
				c := bytes.Clone(full)
				for _, v := range []byte{0, 0xff, 0x0f, 0x50} {
					c[i] = v
					decodeFrame(lt, c, &p)
				}
			}
		}
	}
}

func TestWindowScaleOption(t *testing.T) {
	cases := []struct {
		opts []byte
		want int8
	}{
		{[]byte{1, 3, 3, 7}, 7},
		{[]byte{2, 4, 5, 0xb4, 1, 3, 3, 9}, 9},
		{[]byte{3, 3, 20}, 14}, // capped
		{[]byte{2, 4, 5, 0xb4}, -1},
		{[]byte{0, 3, 3, 7}, -1}, // end of options first
		{[]byte{3, 9, 1}, -1},    // length past the end
		{[]byte{8, 1, 3, 3}, -1}, // bogus length
		{[]byte{1, 1, 1, 1}, -1}, // padding only
		{[]byte{3, 3}, -1},       // truncated
	}
	for _, c := range cases {
		if got := windowScale(c.opts); got != c.want {
			t.Errorf("windowScale(% x) = %d, want %d", c.opts, got, c.want)
		}
	}
}

func TestDecodeFrameAllocs(t *testing.T) {
	frames := map[layers.LinkType][]byte{}
	for _, lt := range []layers.LinkType{linkEthernet, linkSLL2, linkNull} {
		frames[lt] = frame(lt, testSeg(lt == linkSLL2), 5)
	}
	var p packet
	allocs := testing.AllocsPerRun(1000, func() {
		for lt, f := range frames {
			decodeFrame(lt, f, &p)
		}
	})
	if allocs != 0 {
		t.Fatalf("decodeFrame allocates %.1f times per run", allocs)
	}
}

// A typical MySQL packet on the wire: Ethernet + IPv4 + TCP (timestamps
// option) + a 60-byte payload.
func benchFrame() []byte {
	s := testSeg(false)
	s.flags = tcpACK
	s.payload = make([]byte, 60)
	return frame(linkEthernet, s)
}

func BenchmarkDecodeFrame(b *testing.B) {
	data := benchFrame()
	var p packet
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if decodeFrame(linkEthernet, data, &p) != resultTCP {
			b.Fatal("not decoded")
		}
	}
}

// BenchmarkDecodingLayerParser is the gopacket alternative on the same frame,
// measured to choose between them (see decode.go).
func BenchmarkDecodingLayerParser(b *testing.B) {
	data := benchFrame()
	var eth layers.Ethernet
	var ip4 layers.IPv4
	var ip6 layers.IPv6
	var tcp layers.TCP
	var payload gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &tcp, &payload)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 8)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := parser.DecodeLayers(data, &decoded); err != nil {
			b.Fatal(err)
		}
	}
}
