package watch

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/capture"
)

// KernelPath is the kernel's own view of the path to the server, from the
// application's sockets on this host (tcpi_min_rtt, tcpi_rtt, tcpi_rttvar
// through sock_diag): a cross-check of the round trip the capture measured
// from the wire. Medians over sockets, in µs.
type KernelPath struct {
	Sockets  int   `json:"sockets"`
	MinRTTUS int64 `json:"min_rtt_us"`
	RTTUS    int64 `json:"rtt_us"`
	RTTVarUS int64 `json:"rttvar_us"`
}

// pathWatch follows the round trips of this host's connections to the
// server when the server runs elsewhere.
type pathWatch struct {
	ports []uint16
	mu    sync.Mutex
	socks map[string]capture.SocketStat // local "ip:port" -> latest, MinRTTUS the smallest seen
	// gate: the periodic poll reads only after the wire saw statements (an
	// idle application's round trips do not change).
	gate activityGate
}

// newPathWatch follows this host's sockets to the server's ports;
// statements counts the wire's statements (nil: poll reads every time).
func newPathWatch(ports []uint16, statements *atomic.Int64) *pathWatch {
	return &pathWatch{ports: ports, socks: map[string]capture.SocketStat{}, gate: activityGate{count: statements}}
}

// poll is the periodic read: only when the wire saw statements since the
// last one.
func (w *pathWatch) poll() error {
	if !w.gate.open() {
		return nil
	}
	return w.readNow()
}

// readNow reads the sockets connected to the server's ports; an error
// keeps what was read before.
func (w *pathWatch) readNow() error {
	var got []capture.SocketStat
	for _, p := range w.ports {
		s, err := capture.PeerSockets(p)
		if err != nil {
			return err
		}
		got = append(got, s...)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range got {
		k := s.Local.String()
		if old, ok := w.socks[k]; ok && old.MinRTTUS > 0 && (s.MinRTTUS == 0 || old.MinRTTUS < s.MinRTTUS) {
			s.MinRTTUS = old.MinRTTUS
		}
		if len(w.socks) < maxSockets {
			w.socks[k] = s
		}
	}
	return nil
}

func (*pathWatch) limited() map[string]int64 { return nil }

// path returns the medians over the sockets read (nil: none).
func (w *pathWatch) path() *KernelPath {
	w.mu.Lock()
	defer w.mu.Unlock()
	var mins, rtts, vars []int64
	for _, s := range w.socks {
		if s.MinRTTUS == 0 {
			continue
		}
		mins, rtts, vars = append(mins, int64(s.MinRTTUS)), append(rtts, int64(s.RTTUS)), append(vars, int64(s.RTTVarUS))
	}
	if len(mins) == 0 {
		return nil
	}
	return &KernelPath{Sockets: len(mins), MinRTTUS: medianOf(mins), RTTUS: medianOf(rtts), RTTVarUS: medianOf(vars)}
}

func medianOf(v []int64) int64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// pathNote says, when the capture ran off the server's host, what the
// decomposition did with the network: the transit measured from TCP went
// to request and delivery, and a queue within the clock's error stayed in
// request. "" on the server's host.
func pathNote(p capture.PathStats, clockErrUS int64) string {
	if p.Point != capture.PointClient && p.Point != capture.PointBetween && p.Point != "mixed" {
		return ""
	}
	return fmt.Sprintf("capture point %s: the network transit to the server (half the measured round trip, median %d us over %d connections; both ways assumed equal) counts in request and delivery, not queue; a queue within the clock's ±%d us stays in request",
		p.Point, p.RTTMedianUS, p.Conns, clockErrUS)
}
