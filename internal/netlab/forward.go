package netlab

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// forwardStats counts one direction's packets.
type forwardStats struct {
	packets atomic.Int64
	dropped atomic.Int64
	lateNS  atomic.Int64 // the most a packet left after it was due
}

// late records that a packet left lateNS after it was due.
func (st *forwardStats) late(lateNS int64) {
	for {
		cur := st.lateNS.Load()
		if lateNS <= cur || st.lateNS.CompareAndSwap(cur, lateNS) {
			return
		}
	}
}

// heldPacket is a packet waiting for its delay to pass.
type heldPacket struct {
	dueNS int64 // CLOCK_MONOTONIC
	data  []byte
}

// maxHeld bounds the packets in flight in one direction; past it packets
// are dropped, as a router's full queue would.
const maxHeld = 8192

// pollSlice bounds one wait, so that a closed link is noticed.
const pollSlice = 20 * time.Millisecond

// forward moves packets read from src to dst, each after l.delay, until
// the link closes. One OS thread per direction does it all with plain
// system calls (poll, read, write): on a busy host, goroutines woken by
// Go's timers came late by milliseconds, which made the link's delay vary
// far more than a real network's. The thread asks for real-time
// scheduling; where that is refused it runs at normal priority.
func (l *Link) forward(sfd, dfd int, st *forwardStats, started func()) {
	defer l.wg.Done()
	// The thread goes back to normal scheduling before it runs other
	// goroutines; it must not end either (see RunIn). If it cannot, it
	// stays locked and ends with this goroutine.
	runtime.LockOSThread()
	if realtime() == nil {
		l.rt.Add(1)
		defer func() {
			if normal() == nil {
				runtime.UnlockOSThread()
			}
		}()
	} else {
		defer runtime.UnlockOSThread()
	}
	started()
	var held []heldPacket
	buf := make([]byte, 65536)
	fds := []unix.PollFd{{Fd: int32(sfd), Events: unix.POLLIN}}
	for !l.closed.Load() {
		held = release(dfd, held, st)
		wait := pollSlice
		if len(held) > 0 {
			wait = min(wait, time.Duration(held[0].dueNS-monotonicNS()))
		}
		n, err := unix.Poll(fds, max(int(wait/time.Millisecond), 0))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return // the device is gone: never spin at real-time priority
		}
		if n > 0 && fds[0].Revents&unix.POLLIN != 0 {
			held = readAll(sfd, buf, held, l.delay, st)
		}
		if len(held) > 0 && time.Duration(held[0].dueNS-monotonicNS()) > 0 && wait < time.Millisecond {
			sleepUntil(held[0].dueNS) // below poll's millisecond resolution
		}
	}
}

// readAll reads every packet waiting on fd and holds it for delay.
func readAll(fd int, buf []byte, held []heldPacket, delay time.Duration, st *forwardStats) []heldPacket {
	for {
		n, err := unix.Read(fd, buf)
		if err != nil || n <= 0 {
			return held
		}
		if len(held) >= maxHeld {
			st.dropped.Add(1)
			continue
		}
		held = append(held, heldPacket{dueNS: monotonicNS() + int64(delay), data: append([]byte(nil), buf[:n]...)})
	}
}

// release writes the packets that are due. A constant delay keeps the
// order, so the held packets are a FIFO.
func release(fd int, held []heldPacket, st *forwardStats) []heldPacket {
	now := monotonicNS()
	i := 0
	for ; i < len(held) && held[i].dueNS <= now; i++ {
		if _, err := unix.Write(fd, held[i].data); err == nil {
			st.packets.Add(1)
		}
		st.late(now - held[i].dueNS)
	}
	if i == 0 {
		return held
	}
	return append(held[:0], held[i:]...)
}

func monotonicNS() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// sleepUntil sleeps the thread until the monotonic time dueNS (a system
// call on this thread, not a Go timer).
func sleepUntil(dueNS int64) {
	ts := unix.NsecToTimespec(dueNS)
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}

// The forwarder threads run Go code between their system calls, so each
// needs one of the runtime's Ps when a call returns. If the process's
// other goroutines hold every P, the thread waits for threads of normal
// priority to let one go — on a busy host for milliseconds, during which
// packets sit in the device. Each link therefore adds a P per forwarder
// for its lifetime.
var procs struct {
	sync.Mutex
	links int
	base  int
}

func addProcs() {
	procs.Lock()
	defer procs.Unlock()
	if procs.links == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.links++
	runtime.GOMAXPROCS(procs.base + 2*procs.links)
}

func releaseProcs() {
	procs.Lock()
	defer procs.Unlock()
	procs.links--
	runtime.GOMAXPROCS(procs.base + 2*procs.links)
}

// normal puts the calling thread back to SCHED_OTHER.
func normal() error {
	return unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}, 0)
}

// realtime asks for SCHED_FIFO for the calling thread (root may; a
// container may still refuse).
func realtime() error {
	return unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: 10}, 0)
}
