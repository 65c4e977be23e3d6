package watch

import (
	"io"
	"net"
	"testing"
	"time"
)

// A client socket that stops reading shows up with its receive-window
// limited time; a socket open at the first read counts from that read.
func TestSocketWatchCountsFromTheFirstRead(t *testing.T) {
	var off *socketWatch
	if off.poll() != nil || off.limited() != nil {
		t.Fatal("a nil socketWatch reads or reports something")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := server.Write(chunk); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // limited before watch starts: not counted
	w := newSocketWatch([]uint16{uint16(ln.Addr().(*net.TCPAddr).Port)})
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
