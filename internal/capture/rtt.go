package capture

import (
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// The path between the capture point and the server, measured per
// connection from TCP itself. A round trip seen at the capture point is
// capture → server → capture whatever the capture point is, which is what
// the decomposition needs: on the server's host it is the kernel's own
// delivery (µs), on the application's host the whole network round trip.
// Sources, each giving an upper bound of the path's round trip:
//   - the handshake: the client's SYN to the server's SYN-ACK (kernel to
//     kernel, the cleanest sample);
//   - a request segment to the server's first ACK covering it: the ACK may
//     be delayed or ride on the response, so a sample can include server
//     time; the minimum over the connection is the estimate.
//
// Karn's rule: a retransmitted SYN or request segment makes its sample
// ambiguous, so none is taken.

// rttRing is how many recent samples a connection keeps for its median.
const rttRing = 16

// pathRTT is one connection's round-trip tracker. It lives inside the flow
// and allocates nothing.
type pathRTT struct {
	synUS     int64  // the client's SYN was seen at; -1 after a retransmitted SYN
	probeUS   int64  // a request segment awaiting the server's ACK was seen at (0: none)
	probeEnd  uint32 // sequence number just past that segment
	sentEnd   uint32 // highest sequence end sent to the server
	sentKnown bool
	tsProbeUS int64  // a client TSval awaiting its echo was first seen at (0: none)
	tsProbe   uint32 // that TSval
	minUS     int64  // smallest sample (0: none yet)
	samples   [rttRing]int32
	n, pos    uint8
}

// segment feeds one segment in direction dir.
func (r *pathRTT) segment(dir mysqlproto.Direction, p *packet) {
	if dir == toServer {
		r.fromClient(p)
		return
	}
	r.fromServer(p)
}

func (r *pathRTT) fromClient(p *packet) {
	if p.hasTS && r.tsProbeUS == 0 {
		r.tsProbeUS, r.tsProbe = p.tsUS, p.tsVal
	}
	if p.flags&(tcpSYN|tcpACK) == tcpSYN {
		if r.synUS != 0 {
			r.synUS = -1 // retransmitted SYN: ambiguous
		} else {
			r.synUS = p.tsUS
		}
		return
	}
	if p.size == 0 {
		return
	}
	end := p.seq + uint32(p.size)
	if r.sentKnown && seqDiff(p.seq, r.sentEnd) < 0 {
		r.probeUS = 0 // bytes sent before: a retransmission, no sample
		return
	}
	r.sentEnd, r.sentKnown = end, true
	if r.probeUS == 0 {
		r.probeUS, r.probeEnd = p.tsUS, end
	}
}

func (r *pathRTT) fromServer(p *packet) {
	if p.hasTS && r.tsProbeUS != 0 && p.flags&tcpACK != 0 && seqDiff(p.tsEcr, r.tsProbe) >= 0 {
		r.add(p.tsUS - r.tsProbeUS)
		r.tsProbeUS = 0
	}
	if p.flags&(tcpSYN|tcpACK) == tcpSYN|tcpACK {
		if r.synUS > 0 {
			r.add(p.tsUS - r.synUS)
		}
		r.synUS = -1
		return
	}
	if r.probeUS != 0 && p.flags&tcpACK != 0 && seqDiff(p.ack, r.probeEnd) >= 0 {
		r.add(p.tsUS - r.probeUS)
		r.probeUS = 0
	}
}

func (r *pathRTT) add(us int64) {
	if us < 0 {
		return // capture timestamps went backwards
	}
	if r.minUS == 0 || us < r.minUS {
		r.minUS = max(us, 1)
	}
	r.samples[r.pos] = int32(min(us, 1<<31-1))
	r.pos = (r.pos + 1) % rttRing
	r.n = min(r.n+1, rttRing)
}

// timestamps reads the TCP timestamp option (kind 8, length 10) into p and
// reports whether it was there. Linux puts it first after two no-ops, so
// that layout is checked before a scan of the options.
func timestamps(opts []byte, p *packet) bool {
	if len(opts) >= 12 && opts[0] == 1 && opts[1] == 1 && opts[2] == 8 && opts[3] == 10 {
		p.tsVal, p.tsEcr = binary.BigEndian.Uint32(opts[4:]), binary.BigEndian.Uint32(opts[8:])
		return true
	}
	for len(opts) > 0 {
		switch opts[0] {
		case 0: // end of options
			return false
		case 1: // no-op
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || int(opts[1]) < 2 || int(opts[1]) > len(opts) {
			return false
		}
		if opts[0] == 8 && opts[1] == 10 {
			p.tsVal, p.tsEcr = binary.BigEndian.Uint32(opts[2:]), binary.BigEndian.Uint32(opts[6:])
			return true
		}
		opts = opts[opts[1]:]
	}
	return false
}

// medianUS returns the median of the recent samples (0: none).
func (r *pathRTT) medianUS() int64 {
	if r.n == 0 {
		return 0
	}
	var buf [rttRing]int32
	s := buf[:r.n]
	copy(s, r.samples[:r.n])
	slices.Sort(s)
	return int64(s[len(s)/2])
}

// transitUS is the one-way transit between the capture point and the
// server: half the smallest round trip, assuming both directions take the
// same time (a path's asymmetry cannot be seen from one point).
func (r *pathRTT) transitUS() int64 { return r.minUS / 2 }

// Capture points: where the capture runs relative to the connection.
const (
	PointUnknown = ""        // no local addresses known (a file)
	PointServer  = "server"  // on the server's host: the server's address is local
	PointClient  = "client"  // on the application's host: the client's address is local
	PointBetween = "between" // neither end is local: a tap or mirror port
	PointAuto    = "auto"    // Options.CapturePoint: detect per connection
)

// ValidCapturePoint reports whether p may be given as Options.CapturePoint.
func ValidCapturePoint(p string) bool {
	switch p {
	case PointUnknown, PointAuto, PointServer, PointClient, PointBetween:
		return true
	}
	return false
}

// pointOf decides a connection's capture point from the local addresses:
// the forced one when set, else server when the server's address is local
// (checked first: a client on the server's host is local too), client when
// the client's is, between when the addresses are known and neither is.
func pointOf(forced string, local []netip.Addr, cli, srv endpoint) string {
	if forced != PointUnknown && forced != PointAuto {
		return forced
	}
	if len(local) == 0 {
		return PointUnknown
	}
	switch {
	case slices.Contains(local, addrOf(srv)):
		return PointServer
	case slices.Contains(local, addrOf(cli)):
		return PointClient
	}
	return PointBetween
}

func addrOf(e endpoint) netip.Addr { return netip.AddrFrom16(e.ip).Unmap() }

// crossesLink reports whether statements of a connection seen at point
// carry a network transit to the server that the decomposition must move
// out of queue and exec.
func crossesLink(point string) bool { return point == PointClient || point == PointBetween }

// PathStats summarise the capture point and the path to the server over
// the connections of a capture.
type PathStats struct {
	// Point is the capture point of the connections: one of the Point*
	// values, or "mixed" when connections disagree.
	Point string
	// Conns is how many connections measured their round trip.
	Conns int64
	// RTTMinUS, RTTMedianUS and RTTMaxUS are over connections, of each
	// connection's smallest round trip to the server.
	RTTMinUS, RTTMedianUS, RTTMaxUS int64
	// SpreadUS is the median over connections of their samples' median
	// minus their minimum: how far a single sample strays.
	SpreadUS int64
}

// maxPathRecords bounds the closed connections remembered for PathStats.
const maxPathRecords = 4096

// pathRecord is what PathStats keeps of a connection.
type pathRecord struct{ minUS, spreadUS int64 }

// pathBook collects the tracker's path records.
type pathBook struct {
	points  map[string]int64
	records []pathRecord
}

// noteFlow records a connection that started being decoded at point.
func (b *pathBook) noteFlow(point string) {
	if b.points == nil {
		b.points = map[string]int64{}
	}
	b.points[point]++
}

// keep records a finished connection's path.
func (b *pathBook) keep(r *pathRTT) {
	if r.minUS > 0 && len(b.records) < maxPathRecords {
		b.records = append(b.records, pathRecord{r.minUS, r.medianUS() - r.minUS})
	}
}

// summary merges the finished connections with the open ones.
func (b *pathBook) summary(open []pathRecord) PathStats {
	var st PathStats
	for p := range b.points {
		if st.Point == "" || st.Point == p {
			st.Point = p
		} else {
			st.Point = "mixed"
		}
	}
	all := append(slices.Clone(b.records), open...)
	if len(all) == 0 {
		return st
	}
	mins := make([]int64, len(all))
	spreads := make([]int64, len(all))
	for i, r := range all {
		mins[i], spreads[i] = r.minUS, r.spreadUS
	}
	slices.Sort(mins)
	slices.Sort(spreads)
	st.Conns = int64(len(all))
	st.RTTMinUS, st.RTTMedianUS, st.RTTMaxUS = mins[0], mins[len(mins)/2], mins[len(mins)-1]
	st.SpreadUS = spreads[len(spreads)/2]
	return st
}
