package watch

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// A client socket that stops reading shows up with its receive-window
// limited time; a socket open at the first read counts from that read.
func TestSocketWatchCountsFromTheFirstRead(t *testing.T) {
	port, client, server := socketPair(t)
	go flood(server)
	time.Sleep(200 * time.Millisecond) // limited before watch starts: not counted
	w := newSocketWatch([]uint16{port}, nil)
	if got := w.limited(); got != nil {
		t.Fatalf("limited before any read: %v", got)
	}
	start := time.Now()
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	got := w.limited()[client.LocalAddr().String()]
	t.Logf("limited %d µs over %s of watching", got, elapsed)
	if got <= 0 || got > (elapsed+8*time.Millisecond).Microseconds() {
		t.Errorf("limited %d µs over %s: want the time since the first read only", got, elapsed)
	}
	go io.Copy(io.Discard, client)
}

// The periodic poll reads the kernel only while the capture sees a
// receive-window stall: a stalled socket's limited time does not move between polls the
// gate keeps shut, and shows at the first poll after the counter moved.
func TestSocketWatchPollWaitsForAStall(t *testing.T) {
	port, client, server := socketPair(t)
	var stalls atomic.Int64
	w := newSocketWatch([]uint16{port}, &stalls)
	if err := w.readNow(); err != nil {
		t.Fatal(err)
	}
	go flood(server)
	key := client.LocalAddr().String()
	time.Sleep(300 * time.Millisecond) // the client never reads: limited
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	if got := w.limited()[key]; got != 0 {
		t.Fatalf("poll read the kernel with no stall on the wire: limited %d µs", got)
	}
	stalls.Add(1)
	if err := w.poll(); err != nil {
		t.Fatal(err)
	}
	if got := w.limited()[key]; got <= 0 {
		t.Fatalf("poll during a stall: limited %d µs, want the stall", got)
	}
	go io.Copy(io.Discard, client)
}

// socketPair is a loopback connection (closed with the test) and its
// listening port.
func socketPair(t *testing.T) (port uint16, client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return uint16(ln.Addr().(*net.TCPAddr).Port), client, server
}

// flood writes to c until it fails: a client that never reads closes its
// receive window.
func flood(c net.Conn) {
	chunk := make([]byte, 64<<10)
	for {
		if _, err := c.Write(chunk); err != nil {
			return
		}
	}
}
