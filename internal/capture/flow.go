package capture

import (
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

type flowState uint8

const (
	stateProbe   flowState = iota // not yet known to be MySQL
	stateMySQL                    // decoding
	stateIgnored                  // not MySQL: packets dropped cheaply
	stateClosed                   // FIN/RST seen: a tombstone until reopened by a SYN
)

// Directions index flow.half; they equal mysqlproto's.
const (
	toServer = mysqlproto.ClientToServer
	toClient = mysqlproto.ServerToClient
)

// flow is one TCP connection.
type flow struct {
	t         *Tracker
	key       flowKey
	state     flowState
	sideKnown bool
	clientIsA bool
	synSeen   bool // a SYN was captured: we see the handshake
	midStream bool
	fins      uint8 // bit per direction
	lastUS    int64
	conn      string // "cli_ip:port>srv_ip:port", built once
	dec       connDecoder
	half      [2]halfFlow
	retrans   int // retransmitted segments since the last statement
	win       windowTracker
	tls       tlsFlights
	inTLS     bool
	path      pathRTT // round trips to the server (rtt.go)
	point     string  // capture point of this connection
	// ans frames the answers of a header-only capture (headmode.go);
	// fullAsked: the connection's whole answers were asked of the kernel.
	ans       answerFramer
	fullAsked bool
	// gone: the tracker dropped the flow from its table (tracker.drop).
	gone bool
	// awaiting: the flow counts in Options.InFlight (noteAwaiting); own:
	// the connection sent a statement of gapscope's own (sqltext.IsOwn),
	// and never counts there.
	awaiting, own bool
	// txn follows the connection's transactions (txn.go).
	txn txnTrack
}

// noteAwaiting updates whether the connection has a command awaiting its
// answer, after a segment: the decoder's queue says so.
func (f *flow) noteAwaiting() {
	if f.t.opts.InFlight == nil {
		return
	}
	f.setAwaiting(f.state == stateMySQL && !f.inTLS && !f.own && f.dec != nil && f.dec.Awaiting())
}

// setAwaiting moves the flow in or out of Options.InFlight.
func (f *flow) setAwaiting(on bool) {
	if on == f.awaiting || f.t.opts.InFlight == nil {
		return
	}
	f.awaiting = on
	if on {
		f.t.opts.InFlight.Add(1)
	} else {
		f.t.opts.InFlight.Add(-1)
	}
}

// segment advances the flow with one TCP segment.
func (f *flow) segment(p *packet, srcIsA bool) {
	f.lastUS = p.tsUS
	switch f.state {
	case stateIgnored:
		if p.flags&(tcpFIN|tcpRST) != 0 {
			f.state = stateClosed
		}
		return
	case stateClosed:
		return
	}
	if p.flags&tcpSYN != 0 {
		f.syn(p, srcIsA)
	}
	// The path sees every segment once the sides are known: from the SYN
	// (which a probing flow without payload would not pass on), or from
	// the segment that told them.
	known := f.sideKnown
	if known {
		f.path.segment(f.dirOf(srcIsA), p)
	}
	if f.state == stateProbe && !f.probe(p, srcIsA) {
		return
	}
	if !known && f.sideKnown {
		f.path.segment(f.dirOf(srcIsA), p)
	}
	dir := f.dirOf(srcIsA)
	if f.state == stateMySQL {
		f.window(dir, p)
		f.data(dir, p)
	}
	f.finish(dir, p)
}

// dirOf maps "source is endpoint a" to a direction.
func (f *flow) dirOf(srcIsA bool) mysqlproto.Direction {
	if srcIsA == f.clientIsA {
		return toServer
	}
	return toClient
}

// syn learns the sides, initial sequence numbers and window scales.
func (f *flow) syn(p *packet, srcIsA bool) {
	clientSends := p.flags&tcpACK == 0 // a bare SYN comes from the client
	f.clientIsA = srcIsA == clientSends
	f.sideKnown = true
	f.synSeen = true // either SYN: the greeting and handshake follow
	h := &f.half[f.dirOf(srcIsA)]
	h.init, h.sawSYN, h.next, h.wscale = true, true, p.seq+1, p.wscale
	if f.state == stateMySQL {
		f.win.reset(&f.half[toServer], &f.half[toClient]) // the SYN-ACK completes the scale
	}
}

// probe decides whether the flow is MySQL and which side is the server. It
// returns false when the segment should not be processed further.
func (f *flow) probe(p *packet, srcIsA bool) bool {
	srcSrv, dstSrv := f.t.isServerPort(p.src.port), f.t.isServerPort(p.dst.port)
	if !f.sideKnown && srcSrv != dstSrv {
		f.sideKnown, f.clientIsA = true, srcIsA == dstSrv
	}
	if f.sideKnown && (srcSrv || dstSrv) {
		f.becomeMySQL()
		return true
	}
	if p.size == 0 {
		return false // wait for bytes to tell
	}
	switch {
	case looksLikeGreeting(p.payload) && (!f.sideKnown || f.dirOf(srcIsA) == toClient):
		f.sideKnown, f.clientIsA = true, !srcIsA
	case !f.synSeen && !f.sideKnown && looksLikeCommand(p.payload):
		f.sideKnown, f.clientIsA = true, srcIsA
	default:
		f.state = stateIgnored
		f.t.countPort(min(f.key.a.port, f.key.b.port))
		f.t.stats.NonMySQLFlows++
		return false
	}
	f.becomeMySQL()
	return true
}

// becomeMySQL starts decoding the flow.
func (f *flow) becomeMySQL() {
	f.state = stateMySQL
	f.midStream = !f.synSeen
	f.t.stats.Flows++
	if f.midStream {
		f.t.stats.MidStreamFlows++
	}
	cli, srv := f.key.a, f.key.b
	if !f.clientIsA {
		cli, srv = srv, cli
	}
	f.conn = formatEndpoint(cli) + ">" + formatEndpoint(srv)
	f.point = pointOf(f.t.opts.CapturePoint, f.t.opts.LocalAddrs, cli, srv)
	f.t.paths.noteFlow(f.point)
	f.t.countPort(srv.port)
	f.win.reset(&f.half[toServer], &f.half[toClient])
	f.dec = f.t.newDec(f, mysqlproto.Options{MidStream: f.midStream, SkipParams: !f.t.opts.KeepLiterals})
}

// finish handles FIN and RST: both FINs or one RST end the connection.
func (f *flow) finish(dir mysqlproto.Direction, p *packet) {
	if p.flags&tcpFIN != 0 {
		f.fins |= 1 << dir
	}
	if p.flags&tcpRST != 0 || f.fins == 3 {
		f.close(p.tsUS)
	}
}

// close ends the flow: buffered segments are delivered after a gap, the
// decoder emits what is pending, and the flow becomes a tombstone.
func (f *flow) close(tsUS int64) {
	if f.state == stateMySQL {
		f.t.paths.keep(&f.path)
		for d := range f.half {
			f.flushHole(mysqlproto.Direction(d))
		}
		if f.inTLS {
			f.tls.close(f, tsUS)
		} else {
			f.dec.Close(tsUS)
		}
	}
	if f.fullAsked || f.t.full != nil && f.state == stateMySQL && (f.inTLS || f.dec.Info().Compressed) {
		f.t.full(f.key, f.clientIsA, false) // the kernel may have put it in the map itself
	}
	f.fullAsked = false
	f.state = stateClosed
	f.dec = nil
	f.half[0].release()
	f.half[1].release()
}
