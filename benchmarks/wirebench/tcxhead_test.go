//go:build linux

package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestTCXHeadRecords: the header-only program writes one record per packet
// of the port: its addresses, ports, flags and payload length, the
// payload's first head bytes and the tail after them (the whole of a
// payload no longer than head+tail), and the sequence numbers follow.
func TestTCXHeadRecords(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF and tcx)")
	}
	t.Run("IPv4", func(t *testing.T) { testTCXHead(t, "127.0.0.1", 4, net.IPv4(127, 0, 0, 1).To4()) })
	t.Run("IPv6", func(t *testing.T) { testTCXHead(t, "[::1]", 6, net.IPv6loopback) })
}

func testTCXHead(t *testing.T, host string, version uint8, addr net.IP) {
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Skipf("no %s: %v", host, err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	const head, tail = 64, 16
	src, err := openTCXHead("lo", []uint16{port}, head, tail, 0, 4)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("this kernel has no tcx hook (Linux 6.6+): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	before := time.Now()
	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	small := big[:70] // head 64 + a tail of the 6 bytes after it
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client := uint16(c.LocalAddr().(*net.TCPAddr).Port)
	for _, b := range [][]byte{big, small} {
		c.Write(b)
		io.ReadFull(c, make([]byte, len(b)))
	}
	c.Close()
	time.Sleep(50 * time.Millisecond)
	after := time.Now()
	var recs, syns, bigs, smalls int
	nextSeq := map[uint16]uint32{} // by source port: the next data byte's sequence
	src.readHead(func(r *headRecord) {
		recs++
		if r.TSUS < before.UnixMicro() || r.TSUS > after.UnixMicro() {
			t.Errorf("record time %d outside [%d, %d]", r.TSUS, before.UnixMicro(), after.UnixMicro())
		}
		if r.Version != version || !bytes.Equal(r.Src, addr) || !bytes.Equal(r.Dst, addr) {
			t.Errorf("version %d, %v -> %v", r.Version, r.Src, r.Dst)
		}
		if !(r.SrcPort == port && r.DstPort == client) && !(r.SrcPort == client && r.DstPort == port) {
			t.Errorf("record of ports %d -> %d", r.SrcPort, r.DstPort)
		}
		if r.Flags&0x02 != 0 { // SYN
			syns++
			nextSeq[r.SrcPort] = r.Seq + 1
		}
		if r.Window == 0 {
			t.Errorf("window 0 on %d -> %d", r.SrcPort, r.DstPort)
		}
		if r.Payload == 0 {
			if len(r.Head)+len(r.Tail) != 0 {
				t.Errorf("empty packet with %d + %d bytes", len(r.Head), len(r.Tail))
			}
			return
		}
		if want, ok := nextSeq[r.SrcPort]; ok && r.Seq != want {
			t.Errorf("%d -> %d seq %d, want %d", r.SrcPort, r.DstPort, r.Seq, want)
		}
		nextSeq[r.SrcPort] = r.Seq + r.Payload
		switch r.Payload {
		case uint32(len(big)):
			bigs++
			if !bytes.Equal(r.Head, big[:head]) || !bytes.Equal(r.Tail, big[len(big)-tail:]) {
				t.Errorf("big payload: head %x tail %x", r.Head, r.Tail)
			}
		case uint32(len(small)):
			smalls++
			if got := append(append([]byte{}, r.Head...), r.Tail...); !bytes.Equal(got, small) {
				t.Errorf("small payload: head+tail %x, want %x", got, small)
			}
		default:
			t.Errorf("payload of %d bytes", r.Payload)
		}
		if ip := map[uint8]uint32{4: 20, 6: 40}[version]; r.Wire != r.Payload+14+ip+32 { // Ethernet, IP, TCP with timestamps
			t.Errorf("frame %d for payload %d", r.Wire, r.Payload)
		}
	})
	if syns != 2 || bigs != 2 || smalls != 2 || recs < 10 {
		t.Errorf("%d records: %d SYN, %d big, %d small payloads; want the handshake, both payloads each way and the close", recs, syns, bigs, smalls)
	}
	if d := src.dropped(); d != 0 {
		t.Errorf("%d dropped", d)
	}
}
