package netlab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options shape a link.
type Options struct {
	// Delay is added to every packet in each direction (one way); 0 gives
	// the forwarder's own latency only.
	Delay time.Duration
}

// Link is a delayed point-to-point path between a server namespace and a
// client namespace. Close removes all of it.
type Link struct {
	names
	delay   time.Duration
	tunS    int // the server end's descriptor, moved into nsServer (-1: none)
	tunC    int
	rt      atomic.Int32 // forwarder threads that got real-time scheduling
	procs   bool         // addProcs was called
	wg      sync.WaitGroup
	closing sync.Once
	closed  atomic.Bool
	fwd     [2]forwardStats
}

// New builds a link: it first removes what killed runs left, then creates
// two namespaces, two TUN devices (opened here, then moved into one
// namespace each; the open descriptors keep working across the move), gives
// them their point-to-point addresses and starts forwarding. On any error
// what was created is removed again.
func New(opts Options) (*Link, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if _, err := RemoveStale(); err != nil {
		return nil, err
	}
	l := &Link{names: namesFor(os.Getpid(), linkSeq.Add(1)), delay: max(opts.Delay, 0), tunS: -1, tunC: -1}
	if err := l.build(); err != nil {
		l.Close()
		return nil, err
	}
	addProcs()
	l.procs = true
	l.wg.Add(2)
	var started sync.WaitGroup
	started.Add(2)
	go l.forward(l.tunC, l.tunS, &l.fwd[0], started.Done)
	go l.forward(l.tunS, l.tunC, &l.fwd[1], started.Done)
	started.Wait()
	return l, nil
}

func (l *Link) build() error {
	for _, ns := range []string{l.nsServer, l.nsClient} {
		if err := ipRun("netns", "add", ns); err != nil {
			return err
		}
	}
	var err error
	if l.tunS, err = openTUN(l.tunServer); err != nil {
		return err
	}
	if l.tunC, err = openTUN(l.tunClient); err != nil {
		return err
	}
	if err := configure(l.nsServer, l.tunServer, ServerAddr, ClientAddr); err != nil {
		return err
	}
	return configure(l.nsClient, l.tunClient, ClientAddr, ServerAddr)
}

// configure moves dev into ns and brings it up with local address addr and
// peer address peer; lo comes up too (the server's socket file is not
// enough for everything: clients inside may use 127.0.0.1).
func configure(ns, dev, addr, peer string) error {
	steps := [][]string{
		{"link", "set", dev, "netns", ns},
		{"-n", ns, "addr", "add", addr, "peer", peer, "dev", dev},
		{"-n", ns, "link", "set", dev, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ipRun(s...); err != nil {
			return err
		}
	}
	return nil
}

// openTUN creates TUN device name (IP packets, no link-layer header, no
// packet-information prefix) and returns its descriptor, non-blocking: the
// forwarder polls it and reads until it is empty.
func openTUN(name string) (int, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, fmt.Errorf("opening /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("TUN name %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("creating TUN device %s: %w", name, err)
	}
	return fd, nil
}

// Realtime reports whether both forwarder threads run with real-time
// scheduling (steadier delays on a busy host).
func (l *Link) Realtime() bool { return l.rt.Load() == 2 }

// Delay is the one-way delay the forwarder adds.
func (l *Link) Delay() time.Duration { return l.delay }

// ServerNS and ClientNS name the two namespaces (for `ip netns exec`).
func (l *Link) ServerNS() string { return l.nsServer }
func (l *Link) ClientNS() string { return l.nsClient }

// ClientDevice is the TUN device in the client namespace: the capture
// point on the application's side.
func (l *Link) ClientDevice() string { return l.tunClient }

// ServerDevice is the TUN device in the server namespace: a capture
// there sees the traffic as the server's host does.
func (l *Link) ServerDevice() string { return l.tunServer }

// Forwarded returns the packets forwarded towards the server and towards
// the client so far.
func (l *Link) Forwarded() (toServer, toClient int64) {
	return l.fwd[0].packets.Load(), l.fwd[1].packets.Load()
}

// MaxLateness is the most any packet left the forwarder after its delay
// had passed (a busy host's scheduling; real-time priority keeps it small).
func (l *Link) MaxLateness() time.Duration {
	return time.Duration(max(l.fwd[0].lateNS.Load(), l.fwd[1].lateNS.Load()))
}

// Command returns a command that runs inside namespace ns.
func Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Close stops forwarding, closes the devices (which destroys them) and
// deletes the namespaces. It is safe to call more than once.
func (l *Link) Close() error {
	var errs []error
	l.closing.Do(func() {
		l.closed.Store(true)
		l.wg.Wait() // the forwarders notice within a poll slice
		if l.procs {
			releaseProcs()
		}
		for _, fd := range []int{l.tunS, l.tunC} {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
		for _, ns := range []string{l.nsServer, l.nsClient} {
			if err := ipRun("netns", "del", ns); err != nil && nsExists(ns) {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

func nsExists(ns string) bool {
	_, err := os.Stat("/var/run/netns/" + ns)
	return err == nil
}

// DialerIn returns a dial function whose sockets live in namespace ns
// (see RunIn).
func DialerIn(ns string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (c net.Conn, err error) {
		err = RunIn(ns, func() error {
			var d net.Dialer
			c, err = d.DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	}
}

// RunIn runs fn on an OS thread inside network namespace ns and waits for
// it. Sockets keep the namespace they were created in, so fn only needs to
// create them there; goroutines fn starts run in this process's namespace.
// The thread goes back to its own namespace afterwards and only then to
// other goroutines. It must not simply end: a child process started with
// Pdeathsig from that thread earlier (a sandbox's server) would be killed.
// If going back fails, the thread stays locked and ends with the goroutine.
func RunIn(ns string, fn func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- fmt.Errorf("reading this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := enterNS(ns); err != nil {
			ch <- err
			return
		}
		err = fn()
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// enterNS moves the calling OS thread into network namespace ns.
func enterNS(ns string) error {
	fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", ns, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering network namespace %s: %w", ns, err)
	}
	return nil
}
