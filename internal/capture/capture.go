// Package capture turns packets into statements: it reads pcap/pcapng files
// (plain or gzip) and live AF_PACKET rings, decodes link/IP/TCP headers
// without allocating, tracks each TCP connection (server side, sequence
// numbers, retransmissions, reordering, the client's receive window) and
// drives a mysqlproto.ConnDecoder per connection. Every decoded exchange
// becomes one event.Statement handed to the caller's emit function.
//
// It is a per-flow tracker, not a generic TCP reassembler: the MySQL protocol
// is half duplex, so a hole in one direction is declared lost as soon as the
// other direction speaks.
package capture

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
)

// Options tune how packets become statements.
type Options struct {
	// Ports are the server ports; a flow with one end on one of them is
	// decoded as MySQL from its first packet. Flows on other ports are
	// decoded when their first bytes look like a server greeting (or, when
	// the capture started mid-connection, like a client command).
	// Default: 3306.
	Ports []uint16
	// KeepLiterals keeps SQL literals in Statement.SQL (and interpolates
	// COM_STMT_EXECUTE parameters); by default SQL is the digest text.
	KeepLiterals bool
	// MaxFlows bounds the connections tracked at once (default 100000);
	// packets of connections beyond it are counted in Stats.UntrackedPackets.
	MaxFlows int
	// IdleTimeout evicts a connection that sent nothing for this long in
	// capture time (default 15 minutes). Evicting forgets its prepared
	// statements, so it is long by default.
	IdleTimeout time.Duration
	// MaxOutOfOrder bounds the bytes buffered per direction while waiting
	// for a missing segment (default 1 MiB); above it the hole is declared
	// lost and the decoder resynchronises.
	MaxOutOfOrder int
	// Progress, when set, is called now and then with the bytes read so far
	// and the total (file sizes; 0 when unknown).
	Progress func(done, total int64)
	// CapturePoint forces where the capture runs relative to the
	// connections (PointServer, PointClient, PointBetween); "" or PointAuto
	// decides per connection from LocalAddrs (unknown without them). Off
	// the server's host each statement carries the measured one-way
	// transit to the server (Statement.TransitUS).
	CapturePoint string
	// LocalAddrs are the capturing host's addresses.
	LocalAddrs []netip.Addr
	// Stalls, when set, counts the segments of connections stalled on
	// their receive window, the segments that begin and end a stall
	// included (the window probes keep coming while it lasts); a
	// statement reports its stalls only when it ends. A live watch reads
	// the server's sockets' TCP_INFO only while this moves, when the
	// stalled socket still exists.
	Stalls *atomic.Int64
	// InFlight, when set, counts the connections with a command the
	// capture saw sent and not yet answered in full (a TLS connection's
	// are not known). A live watch reads the server's running statements
	// only while this is above zero, or when clients the capture cannot
	// see are connected.
	InFlight *atomic.Int64
}

func (o Options) withDefaults() Options {
	if len(o.Ports) == 0 {
		o.Ports = []uint16{3306}
	}
	if o.MaxFlows <= 0 {
		o.MaxFlows = 100_000
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 15 * time.Minute
	}
	if o.MaxOutOfOrder <= 0 {
		o.MaxOutOfOrder = 1 << 20
	}
	return o
}

// Stats counts what a capture contained and what the tracker did with it.
type Stats struct {
	Packets          int64 // frames read
	Bytes            int64 // frame bytes read (captured length)
	Flows            int64 // MySQL connections tracked
	Statements       int64 // statements emitted (own statements excluded)
	Retransmits      int64 // TCP segments carrying only bytes already seen
	OutOfOrder       int64 // segments that arrived ahead of a hole
	Gaps             int64 // holes declared lost (decoder resynchronised)
	NonMySQLFlows    int64 // TCP connections ignored as not MySQL
	TLSFlows         int64 // connections that switched to TLS (timings only)
	MidStreamFlows   int64 // connections whose handshake was not captured
	Fragments        int64 // IP fragments skipped
	Malformed        int64 // frames with broken headers
	UntrackedPackets int64 // packets of connections refused because MaxFlows was reached
	EvictedFlows     int64 // connections evicted after IdleTimeout
	OwnStatements    int64 // gapscope's own statements dropped
	KernelDrops      int64 // live: packets the kernel dropped (ring full)
	// Source is the live capture that ran: "ebpf" (header-only, with its
	// hook: "ebpf (tcx)") or "packet" (the AF_PACKET ring); "" for files.
	Source string
	// Header-only capture: answer packets the kernel cut to their first
	// and last bytes; statements whose rows are unknown because a cut
	// answer's middle held packet boundaries; connections switched to
	// whole answers (compressed, TLS, or answers the head could not follow).
	CutPackets  int64
	RowsUnknown int64
	FullFlows   int64
	Path        PathStats
	Notes       []string
	// PortsSeen counts a capture file's connections by server port (for
	// TCP connections that are not MySQL: their lower port); files only.
	PortsSeen map[uint16]int64 `json:"-"`
}

// Errors callers may branch on.
var (
	// ErrEmptyFile: the file has no bytes (or only a gzip wrapper around none).
	ErrEmptyFile = errors.New("capture file is empty")
	// ErrNotCapture: the file does not start like a pcap or pcapng file.
	ErrNotCapture = errors.New("not a pcap or pcapng capture file")
)

// UnsupportedLinkTypeError reports a capture whose link layer we cannot decode.
type UnsupportedLinkTypeError struct{ LinkType uint32 }

func (e *UnsupportedLinkTypeError) Error() string {
	return fmt.Sprintf("unsupported link type %d (want Ethernet, Linux cooked SLL/SLL2, loopback/NULL or raw IP)", e.LinkType)
}
