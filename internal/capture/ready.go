//go:build linux

package capture

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readyWaiter waits for the ring's socket to become readable (the kernel
// handed over a block) through Go's network poller, so that the capture
// goroutine never sits in a blocking poll(2): the runtime's monitor thread
// takes the P back from a goroutine blocked in a system call for over
// 10 ms and then wakes every 20 µs for a while. With the ring polled every
// 50 ms those wakeups cost more than the capture of a quiet port
// (BenchmarkIdleCaptureCPU). The socket is dup'ed so that the poller's
// descriptor and afpacket's close independently.
type readyWaiter struct {
	f  *os.File
	rc syscall.RawConn
	fd int // fallback: poll(2) on the ring's own descriptor
	// pollMS, when set, caps one fallback poll(2) (benchmarks compare
	// the old blocking wait).
	pollMS int
	// stopped: interrupt was called; waits return at once from then on.
	stopped atomic.Bool
	// readable, when set, says whether the ring holds a block from the
	// ring's own memory (v3Ring.ready): the test after waking then makes
	// no system call. Unset (before the reader exists), poll(2) says.
	readable func() bool
}

func newReadyWaiter(fd int) *readyWaiter {
	w := &readyWaiter{fd: fd}
	if fd < 0 {
		return w
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return w
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return w
	}
	f := os.NewFile(uintptr(dup), "afpacket")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil {
		f.Close() // not pollable here: fall back to poll(2)
		return w
	}
	w.f, w.rc = f, rc
	return w
}

// wait returns once the socket is readable or d has passed; it reports
// whether it became readable (or already was).
func (w *readyWaiter) wait(d time.Duration) bool {
	switch {
	case w.rc == nil && w.fd < 0: // no descriptor to wait on: look again soon
		time.Sleep(min(d, 5*time.Millisecond))
		return true
	case w.readable != nil && w.readable():
		return true
	case w.rc == nil:
		ms := int(d / time.Millisecond)
		if w.pollMS > 0 {
			ms = min(ms, w.pollMS)
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(fds, ms)
		return n > 0
	}
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil || w.stopped.Load() {
		return false
	}
	asked := false
	err := w.rc.Read(func(fd uintptr) bool {
		if asked {
			return true // the poller saw the socket become readable
		}
		asked = true
		// Read starts by forgetting readiness the poller saw before it
		// (edge-triggered): a block handed over since the ring was last
		// looked at would wait for the next one. Look now, without blocking.
		if w.readable != nil {
			return w.readable()
		}
		return readableNow(int(fd))
	})
	return err == nil
}

// interrupt ends the wait in progress, and every later one, at once (the
// capture is stopping). A fallback poll(2) still runs out its timeout.
func (w *readyWaiter) interrupt() {
	w.stopped.Store(true)
	if w.f != nil {
		_ = w.f.SetReadDeadline(time.Now())
	}
}

// readableNow polls fd without waiting.
func readableNow(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0 && fds[0].Revents&unix.POLLIN != 0
}

func (w *readyWaiter) close() {
	if w.f != nil {
		w.f.Close()
	}
}
