//go:build linux

package capture

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/gapscope/gapscope/internal/event"
)

// Source is a live capture: Run until its context ends, then the counts.
type Source interface {
	Run(ctx context.Context, emit func(*event.Statement)) (Stats, error)
	Close() error
	// Describe says which capture runs, for the report.
	Describe() string
	// RingBytes is the size of the kernel ring the source mapped into the
	// process when it opened: resident once the ring has wrapped, outside
	// the Go runtime's heap.
	RingBytes() int64
}

// Live capture sources (LiveOptions.Source, GAPSCOPE_CAPTURE).
const (
	// SourcePacket is the AF_PACKET ring: every byte of every packet.
	SourcePacket = "packet"
	// SourceEBPF is the header-only eBPF capture (ebpfsource.go); opening
	// it fails where the kernel or the capabilities do not allow it.
	SourceEBPF = "ebpf"
	// SourceAuto is eBPF where it opens on a loopback interface and the
	// run reads the server's statement rows (LiveOptions.ServerRows), the
	// AF_PACKET ring otherwise (the report says which and why).
	SourceAuto = "auto"
	// DefaultSource is the source when neither the option nor the
	// environment names one.
	DefaultSource = SourceAuto
	// SourceEnv names the source when LiveOptions.Source is empty, so that
	// test suites can run each.
	SourceEnv = "GAPSCOPE_CAPTURE"
)

// SourceOf is the source name: s, else GAPSCOPE_CAPTURE, else the default.
func SourceOf(s string) string {
	if s == "" {
		s = os.Getenv(SourceEnv)
	}
	if s == "" {
		s = DefaultSource
	}
	return s
}

// OpenSource opens the live capture opts.Source names on iface.
func OpenSource(iface string, opts LiveOptions) (Source, error) {
	switch src := SourceOf(opts.Source); src {
	case SourcePacket:
		return OpenLive(iface, opts)
	case SourceEBPF:
		e, err := OpenEBPF(iface, opts)
		if err != nil {
			return nil, err
		}
		if !stampsAsTheRing(iface) {
			e.egressNote = egressNote(iface)
		}
		return e, nil
	case SourceAuto:
		why := autoKeepsTheRing(iface, opts.ServerRows)
		if why == "" {
			e, err := OpenEBPF(iface, opts)
			if err == nil {
				return e, nil
			}
			why = fmt.Sprintf("auto: the eBPF capture is unavailable: %v", err)
		}
		l, lerr := OpenLive(iface, opts)
		if lerr != nil {
			return nil, lerr
		}
		l.fallback = why
		return l, nil
	default:
		return nil, fmt.Errorf("capture source %q: want auto, ebpf or packet", src)
	}
}

// stampsAsTheRing reports whether the eBPF capture stamps iface's packets
// where the AF_PACKET ring does: on loopback, where its program runs at
// the ingress hook. On another interface a leaving packet is stamped at
// tc's egress hook, before the interface's queue, where the ring's tap
// sees it after: the time a request waits in a backlogged queue on the
// application's host would read as the server's queue.
func stampsAsTheRing(iface string) bool {
	ifc, err := net.InterfaceByName(iface)
	return err == nil && isLoopback(ifc.Flags)
}

func isLoopback(f net.Flags) bool { return f&net.FlagLoopback != 0 }

// autoKeepsTheRing says why auto keeps the ring rather than the
// header-only capture ("": it need not). Off loopback eBPF stamps where
// the ring does not (stampsAsTheRing). Without the server's statement rows
// (performance_schema off, its consumers off, or no server read at all) a
// cut answer's rows could come from nowhere: every multi-row answer longer
// than the program's head and tail would read "rows unknown", where the
// ring counts them.
func autoKeepsTheRing(iface string, serverRows bool) string {
	switch {
	case !stampsAsTheRing(iface):
		return fmt.Sprintf("auto: eBPF only on loopback (leaving %s it would stamp packets before the interface's queue)", iface)
	case !serverRows:
		return "auto: eBPF only where the server's statement rows are read (they give a cut answer its rows; performance_schema's statement history is not read here)"
	}
	return ""
}

// egressNote says what an explicit eBPF capture on iface may count as
// queue.
func egressNote(iface string) string {
	return fmt.Sprintf("eBPF stamps packets leaving %s before the interface's queue: a request's wait in a backlogged queue on this host would read as server queue (auto uses eBPF on loopback only)", iface)
}
