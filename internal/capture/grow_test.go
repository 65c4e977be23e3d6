//go:build linux

package capture

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRingGrowsOnDrops: a ring of 2 MiB whose reader stalls while 8 MB
// arrive drops packets; the capture then opens a bigger ring and moves to
// it while a ping-pong connection runs, and that connection's every
// segment reaches the tracker exactly once (nothing lost or doubled by
// the move), the drops counted across both rings and the growth noted.
//
// A host that starves the reader long enough makes a small ring drop the
// pings too (a ring of few blocks fills with them in blocks ×
// blockTimeout): those losses are the kernel's, counted as drops, and the
// test then asserts only that no more were lost than the kernel dropped
// during the pings. A loss with no drop to account for it is the move's.
func TestRingGrowsOnDrops(t *testing.T) {
	ln, port := liveListener(t)
	live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 2, MaxRingMB: 8, BlockKB: 256})
	if err != nil {
		t.Fatal(err)
	}
	var pingPort atomic.Uint32
	var stalled atomic.Bool
	segs := map[[2]uint64]int{} // ping connection's (direction, seq) -> copies; on the tracker goroutine
	var pingBytes int
	dropsAtPings := int64(-1)                // the kernel's drops when the first ping arrived
	live.tap = func(_ int64, frame []byte) { // on the decoding goroutine, which owns the rings
		if !stalled.Swap(true) {
			time.Sleep(1500 * time.Millisecond) // the reader stalls: the ring fills and the kernel drops
		}
		var p packet
		if decodeFrame(linkEthernet, frame, &p) != resultTCP || len(p.payload) == 0 {
			return
		}
		pp := uint16(pingPort.Load())
		if pp == 0 || (p.src.port != pp && p.dst.port != pp) {
			return
		}
		if dropsAtPings < 0 {
			dropsAtPings = liveDrops(live)
		}
		k := [2]uint64{uint64(p.src.port), uint64(p.seq)}
		if segs[k]++; segs[k] == 1 && p.src.port == pp {
			pingBytes += len(p.payload)
		}
	}
	stop := runLive(t, live)
	echo(t, ln, bytes.Repeat([]byte("x"), 8<<20)) // arrives during the stall
	time.Sleep(2 * time.Second)
	// Ping until the ring has moved (on a loaded host opening it can take
	// a while), and 1,000 round trips more.
	const size = 64
	deadline, movedAt := time.Now().Add(15*time.Second), -1
	trips := pingPong(t, ln, &pingPort, size, func(i int) bool {
		if movedAt < 0 && live.grow.moves.Load() > 0 {
			movedAt = i
		}
		return i < 3000 || (movedAt < 0 && time.Now().Before(deadline)) || (movedAt >= 0 && i < movedAt+1000)
	})
	time.Sleep(3 * blockTimeout) // the last block is handed over
	st := stop()
	t.Logf("kernel drops %d, notes %q, %d round trips (the ring moved at %d), ping segments %d", st.KernelDrops, st.Notes, trips, movedAt, len(segs))
	if st.KernelDrops == 0 {
		t.Fatal("no kernel drops: the test proves nothing")
	}
	if !strings.Contains(strings.Join(st.Notes, "\n"), "grew from 2 to 4 MiB") {
		t.Errorf("the ring did not grow: notes %q", st.Notes)
	}
	for k, n := range segs {
		if n != 1 {
			t.Errorf("segment %v captured %d times", k, n)
		}
	}
	if movedAt < 0 {
		t.Fatal("the ring did not move within 15 s of pings")
	}
	lost := (trips*size - pingBytes) / size
	pingDrops := st.KernelDrops - dropsAtPings
	switch {
	case pingBytes > trips*size:
		t.Errorf("the ping connection's requests: %d bytes captured, %d sent", pingBytes, trips*size)
	case lost > 0 && int64(lost) > pingDrops:
		t.Errorf("the ping connection's requests: %d bytes captured, %d sent: %d lost, the kernel dropped %d packets during the pings", pingBytes, trips*size, lost, pingDrops)
	case lost > 0:
		t.Logf("the host starved the reader: the kernel dropped %d packets during the pings, %d of them requests", pingDrops, lost)
	}
}

// liveDrops is what the kernel dropped so far, across the rings; on the
// decoding goroutine only.
func liveDrops(l *Live) int64 {
	_, v3, err := l.tp.SocketStats()
	if err != nil {
		return 0
	}
	return int64(v3.Drops()) + l.grow.dropsBefore()
}

// pingPong opens a connection to ln (its client port stored in port) and
// makes round trips of size bytes while more says so; it returns how many.
func pingPong(t *testing.T, ln net.Listener, port *atomic.Uint32, size int, more func(trip int) bool) int {
	t.Helper()
	c := dialEcho(t, ln)
	defer c.Close()
	port.Store(uint32(c.LocalAddr().(*net.TCPAddr).Port))
	msg, back := bytes.Repeat([]byte("p"), size), make([]byte, size)
	i := 0
	for ; more(i); i++ {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatal(err)
		}
	}
	return i
}

// TestDefaultRingHoldsLargeRequest: a 20 MB request (the field lab's
// INSERT) sent while the reader gets no CPU at all fits in a ring of the
// default size: no packet dropped. A smaller default would need the
// decoder to keep up with a request that arrives in tens of milliseconds.
func TestDefaultRingHoldsLargeRequest(t *testing.T) {
	ln, port := liveListener(t)
	live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{port}}})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan struct{})
	var stalled atomic.Bool
	live.tap = func(int64, []byte) {
		if !stalled.Swap(true) {
			<-sent // the reader stalls until the whole request is in the ring
		}
	}
	stop := runLive(t, live)
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Write(bytes.Repeat([]byte("r"), 20<<20))
	c.Close()
	time.Sleep(200 * time.Millisecond) // the last segments and their ACKs
	close(sent)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * blockTimeout)
	st := stop()
	t.Logf("%d packets, %d kernel drops in a %d MiB ring", st.Packets, st.KernelDrops, DefaultRingMB)
	if st.KernelDrops != 0 {
		t.Errorf("a 20 MB request lost %d packets in a stalled %d MiB ring", st.KernelDrops, DefaultRingMB)
	}
}
