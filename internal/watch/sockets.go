package watch

import (
	"sync"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/capture"
)

// hostSockets is what watch reads of the kernel's TCP sockets on this
// host: the server's, when it runs here (socketWatch), or the
// application's to it, when it runs elsewhere (pathWatch); nothing when
// sock_diag cannot be read (noSockets).
type hostSockets interface {
	// poll is the periodic read, once a second at most; readNow the first
	// and the last.
	poll() error
	readNow() error
	// limited is each client socket's receive-window-limited time (µs),
	// nil when the server's sockets were not read.
	limited() map[string]int64
	// path is the kernel's view of the path to the server, nil when the
	// application's sockets were not read.
	path() *KernelPath
}

// watchHost follows the server's sockets when it runs on this host
// (sock_diag sees only local sockets), else the application's sockets to
// it; noSockets when the kernel cannot tell, with a note saying so on the
// server's host.
func watchHost(local bool, ports []uint16, wire *wireStage, notes *noteList) hostSockets {
	if !local {
		w := newPathWatch(ports, &wire.taken) // the application's side: its sockets' round trips
		if w.readNow() != nil {
			return noSockets{}
		}
		return w
	}
	w := newSocketWatch(ports, &wire.stalls)
	if err := w.readNow(); err != nil {
		notes.add("server sockets' TCP_INFO unreadable (%v): stalls come from the wire only", err)
		return noSockets{}
	}
	return w
}

// noSockets reads nothing.
type noSockets struct{}

func (noSockets) poll() error               { return nil }
func (noSockets) readNow() error            { return nil }
func (noSockets) limited() map[string]int64 { return nil }
func (noSockets) path() *KernelPath         { return nil }

func (*socketWatch) path() *KernelPath { return nil }

// socketWatch follows, on a server running on this host, how long each of
// its client sockets was receive-window limited (TCP_INFO, read through
// sock_diag every second and at the end). A socket already open at the
// first read counts from that read; one opened later counts from zero: its
// whole life is in the run.
type socketWatch struct {
	ports []uint16
	mu    sync.Mutex
	base  map[string]uint64 // remote "ip:port" -> reading at the first read
	last  map[string]uint64 // remote "ip:port" -> latest reading
	read  bool              // a first read happened
	// gate: the periodic poll reads only after the capture saw a receive
	// window stall begin (the only statements whose evidence these
	// readings corroborate), while the stalled socket still exists.
	gate activityGate
}

// maxSockets bounds the sockets remembered; past it, closed ones are
// forgotten at the next read.
const maxSockets = 50_000

// newSocketWatch follows the server's sockets on ports; stalls counts the
// receive-window stalls the capture saw begin (nil: poll reads every time).
func newSocketWatch(ports []uint16, stalls *atomic.Int64) *socketWatch {
	return &socketWatch{ports: ports, base: map[string]uint64{}, last: map[string]uint64{}, gate: activityGate{count: stalls}}
}

// poll is the periodic read: it reads only when a stall began since the
// last one. Sockets that first appear at a later read count from
// zero, as opened during the run, so a skipped round loses nothing but the
// last increments of a socket that closed meanwhile.
func (w *socketWatch) poll() error {
	if !w.gate.open() {
		return nil
	}
	return w.readNow()
}

// readNow reads the server's sockets (the first read, the last one); an
// error (no sock_diag, an old kernel) leaves what was read so far.
func (w *socketWatch) readNow() error {
	var socks []capture.SocketStat
	for _, p := range w.ports {
		got, err := capture.ServerSockets(p)
		if err != nil {
			return err
		}
		socks = append(socks, got...)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) > maxSockets {
		open := make(map[string]bool, len(socks))
		for _, s := range socks {
			open[s.Remote.String()] = true
		}
		for k := range w.last {
			if !open[k] {
				delete(w.last, k)
				delete(w.base, k)
			}
		}
	}
	for _, s := range socks {
		k := s.Remote.String()
		if !w.read {
			w.base[k] = s.RwndLimitedUS
		}
		w.last[k] = s.RwndLimitedUS
	}
	w.read = true
	return nil
}

// limited returns the receive-window-limited time of each client socket
// during the run, in µs (those with some); nil when nothing was read.
func (w *socketWatch) limited() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.read {
		return nil
	}
	out := map[string]int64{}
	for k, v := range w.last {
		if d := v - min(w.base[k], v); d > 0 {
			out[k] = int64(d)
		}
	}
	return out
}
