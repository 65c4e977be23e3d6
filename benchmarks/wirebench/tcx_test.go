//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestTCXSourceCopiesThePortsPackets: the program keeps the packets of
// the watched port, whole, and no other; the reader hands them over with
// wall-clock times. Counting only, it counts the same packets.
func TestTCXSourceCopiesThePortsPackets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF and tcx)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	src, err := openTCX("lo", []uint16{port}, false, 4)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("this kernel has no tcx hook (Linux 6.6+): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	counter, err := openTCX("lo", []uint16{port}, true, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer counter.close()
	echo := func(l net.Listener) {
		c, err := l.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}
	go echo(ln)
	go echo(other)
	before := time.Now()
	payload := make([]byte, 3000)
	for i := range payload {
		payload[i] = byte(i)
	}
	for _, l := range []net.Listener{other, ln} {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(payload)
		io.ReadFull(c, make([]byte, len(payload)))
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	after := time.Now()
	src.wait(10 * time.Millisecond)
	var frames, bigs int
	src.read(func(tsUS int64, wire int, frame []byte) {
		frames++
		if tsUS < before.UnixMicro() || tsUS > after.UnixMicro() {
			t.Errorf("frame time %d outside [%d, %d]", tsUS, before.UnixMicro(), after.UnixMicro())
		}
		if len(frame) != wire {
			t.Errorf("frame of %d bytes holds %d", wire, len(frame))
		}
		ihl := int(frame[14]&0x0f) * 4
		sp, dp := binary.BigEndian.Uint16(frame[14+ihl:]), binary.BigEndian.Uint16(frame[14+ihl+2:])
		if sp != port && dp != port {
			t.Errorf("frame of ports %d -> %d kept", sp, dp)
		}
		if len(frame) > 3000 {
			bigs++
		}
	})
	if frames < 6 || bigs != 2 {
		t.Errorf("%d frames, %d with the payload; want the handshake, both payloads and the close", frames, bigs)
	}
	if d := src.dropped(); d != 0 {
		t.Errorf("%d dropped", d)
	}
	if n := counter.dropped(); n != int64(frames) {
		t.Errorf("counting only: %d packets, copying: %d", n, frames)
	}
}
