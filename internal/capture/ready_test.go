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

// An empty ring hands a batch over only once its first packet has waited
// flushAfter; until then the capture waits for more packets only as long
// as that leaves (waking the tracker at every retired block cost more than
// decoding at a trickle).
func TestHandoverWaitsForABatchToAge(t *testing.T) {
	flushed := 0
	flush := func() { flushed++ }
	if d := handover(nil, time.Now(), flush); d != idleWait || flushed != 0 {
		t.Fatalf("no batch: wait %v, %d flushes; want %v, none", d, flushed, idleWait)
	}
	young := &batch{pkts: []batchPkt{{}}}
	if d := handover(young, time.Now(), flush); d <= 0 || d > flushAfter || flushed != 0 {
		t.Fatalf("young batch: wait %v, %d flushes; want at most %v, none", d, flushed, flushAfter)
	}
	if d := handover(young, time.Now().Add(-flushAfter), flush); d != idleWait || flushed != 1 {
		t.Fatalf("batch %v old: wait %v, %d flushes; want %v, one", flushAfter, d, flushed, idleWait)
	}
	if d := handover(&batch{}, time.Now().Add(-time.Hour), flush); d != idleWait || flushed != 1 {
		t.Fatalf("empty batch: wait %v, %d flushes; want %v, no new one", d, flushed, idleWait)
	}
}
