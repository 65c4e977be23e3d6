//go:build linux

package capture

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readyWaiter on any pollable descriptor (a socket pair here): it reports
// readability, times out, and a stop interrupts a wait in progress and
// every later one.
func TestReadyWaiter(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	w := newReadyWaiter(fds[0])
	defer w.close()
	if w.rc == nil {
		t.Fatal("a socket did not get a poller descriptor")
	}
	if w.wait(10 * time.Millisecond) {
		t.Error("readable with nothing sent")
	}
	if _, err := unix.Write(fds[1], []byte("x")); err != nil {
		t.Fatal(err)
	}
	if !w.wait(10 * time.Second) {
		t.Error("not readable after a write")
	}
	// Consume the byte, then wait with nothing to come: a stop ends it.
	if _, err := unix.Read(fds[0], make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	got := make(chan bool)
	go func() { got <- w.wait(time.Hour) }()
	time.Sleep(20 * time.Millisecond)
	w.interrupt()
	select {
	case ready := <-got:
		if ready {
			t.Error("an interrupted wait reported readiness")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("interrupt did not end the wait")
	}
	if w.wait(time.Hour) {
		t.Error("a wait after the stop reported readiness")
	}
}
