//go:build linux

package capture

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// frameTally records what a live capture handed to its tracker, to check the
// kernel filter: only the server port, and each loopback packet once.
type frameTally struct {
	port    uint16
	frames  int
	foreign int            // frames on other ports
	seen    map[string]int // frame bytes -> copies
	dups    int            // byte-identical second copies (loopback duplicates)
	resent  int            // payload segments repeating a (direction, seq) already seen, bytes differing
	segs    map[[2]uint64]bool
	echoed  chan struct{} // signalled when the echo reply is seen
}

func newFrameTally(port uint16) *frameTally {
	return &frameTally{port: port, seen: map[string]int{}, segs: map[[2]uint64]bool{}, echoed: make(chan struct{}, 1)}
}

// add runs on the tracker goroutine.
func (f *frameTally) add(_ int64, frame []byte) {
	f.frames++
	f.seen[string(frame)]++
	if f.seen[string(frame)] > 1 {
		f.dups++
	}
	var p packet
	if decodeFrame(linkEthernet, frame, &p) != resultTCP {
		f.foreign++
		return
	}
	if p.src.port != f.port && p.dst.port != f.port {
		f.foreign++
	}
	if len(p.payload) == 0 || f.seen[string(frame)] > 1 {
		return
	}
	if p.src.port == f.port && string(p.payload) == echoMsg {
		select { // the tap runs on the tracker goroutine: never block
		case f.echoed <- struct{}{}:
		default:
		}
	}
	k := [2]uint64{uint64(p.src.port)<<16 | uint64(p.dst.port), uint64(p.seq)}
	if f.segs[k] {
		f.resent++ // a real retransmission: same bytes, new IP id / TCP timestamp
	}
	f.segs[k] = true
}

// loopTraffic keeps TCP ping-pong running on lo between connections the
// capture must never see, until stop is called; it returns the round trips.
func loopTraffic(t *testing.T) (stop func() int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var trips atomic.Int64
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 64)
			for {
				if _, err := c.Write(b); err != nil {
					return
				}
				if _, err := io.ReadFull(c, b); err != nil {
					return
				}
				trips.Add(1)
			}
		}()
	}
	return func() int64 {
		ln.Close()
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
		return trips.Load()
	}
}

// liveListener skips without root (and, for tests, under -short) and
// returns a listener on lo, closed at the end, with its port.
func liveListener(tb testing.TB) (net.Listener, uint16) {
	tb.Helper()
	if _, bench := tb.(*testing.B); !bench && testing.Short() {
		tb.Skip("live capture test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		tb.Skip("live capture needs root")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln, uint16(ln.Addr().(*net.TCPAddr).Port)
}

// dialEcho opens a connection to ln, whose other end echoes what it reads.
func dialEcho(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const echoMsg = "only this connection may be captured\n"

// echoOnce opens a connection to ln, sends a line and reads it back.
func echoOnce(t *testing.T, ln net.Listener) { echo(t, ln, []byte(echoMsg)) }

// echo opens a connection to ln, sends msg and reads it back. It reads
// while it writes: a message larger than what the socket buffers hold
// (8 MiB, where the host leaves them small) would otherwise block both
// ends for good.
func echo(t *testing.T, ln net.Listener, msg []byte) {
	t.Helper()
	c := dialEcho(t, ln)
	defer c.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		wrote <- err
	}()
	if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// TestLiveFilterFromTheFirstFrame: with other TCP traffic busy on lo while
// the ring is opened, a live capture reads only its port's packets, each
// once. Before attachFilter, frames queued between ring setup and SetBPF
// reached the tracker: both loopback copies of other connections' packets.
func TestLiveFilterFromTheFirstFrame(t *testing.T) {
	ln, port := liveListener(t)
	stopTraffic := loopTraffic(t)
	live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{port}}})
	if err != nil {
		stopTraffic()
		t.Fatal(err)
	}
	tally := newFrameTally(port)
	live.tap = tally.add
	stop := runLive(t, live)
	echoOnce(t, ln)
	select { // the ring hands a block over up to blockTimeout after its last frame
	case <-tally.echoed:
	case <-time.After(10 * time.Second):
		t.Error("echo reply not captured within 10 s")
	}
	trips := stopTraffic()
	st := stop()
	t.Logf("%d round trips on lo beside the capture; %d frames discarded at open; %d captured", trips, live.discarded, tally.frames)
	if trips == 0 {
		t.Fatal("no background traffic: the test proves nothing")
	}
	if tally.frames == 0 {
		t.Fatal("the echo connection was not captured: filter not attached")
	}
	if !live.ignoresOutgoing {
		t.Error("the kernel still hands outgoing loopback packets to the socket (PACKET_IGNORE_OUTGOING not set)")
	}
	if tally.foreign != 0 || tally.dups != 0 {
		t.Errorf("%d of %d frames on other ports, %d loopback duplicates", tally.foreign, tally.frames, tally.dups)
	}
	if st.MidStreamFlows != 0 || st.Retransmits > int64(tally.resent) {
		t.Errorf("stats %+v, %d real retransmissions", st, tally.resent)
	}
}

// runLive runs live until stop, which returns its counts.
func runLive(t *testing.T, live *Live) (stop func() Stats) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats)
	go func() {
		st, err := live.Run(ctx, func(*event.Statement) {})
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	return func() Stats { cancel(); return <-done }
}

// BenchmarkIdleCaptureCPU: what a live capture costs while its filter lets
// nothing through (its port idle, other traffic busy on lo): the process's
// CPU (user + system, getrusage) and context switches per second, waiting
// for the ring through Go's poller ("poller", what Run does) or in a
// blocking poll(2) of 50 ms as before ("blocking-poll"). A goroutine
// blocked in a system call for more than 10 ms has its P taken back by the
// runtime's monitor thread, which then wakes every 20 µs for a while:
// those wakeups, not the poll, were the cost. Each iteration captures 1 s.
func BenchmarkIdleCaptureCPU(b *testing.B) {
	for _, mode := range []string{"poller", "blocking-poll"} {
		b.Run(mode, func(b *testing.B) {
			_, port := liveListener(b)
			live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{port}}})
			if err != nil {
				b.Fatal(err)
			}
			if mode == "blocking-poll" {
				live.ready.close()
				live.ready = &readyWaiter{fd: socketFD(live.tp), pollMS: 50}
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = live.Run(ctx, func(*event.Statement) {})
			}()
			var cpu time.Duration
			var switches int64
			for b.Loop() {
				c0, s0 := processCPU(), contextSwitches()
				time.Sleep(time.Second)
				cpu += processCPU() - c0
				switches += contextSwitches() - s0
			}
			cancel()
			<-done
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/s")
			b.ReportMetric(float64(switches)/float64(b.N), "ctxsw/s")
		})
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// contextSwitches sums the voluntary and involuntary switches of every
// thread of this process.
func contextSwitches() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Nvcsw + ru.Nivcsw
}
