package capture

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
	"github.com/gapscope/gapscope/internal/sqltext"
	"github.com/gopacket/gopacket/layers"
)

// connDecoder is what a flow needs from mysqlproto.ConnDecoder; tests swap
// in a recorder to check the bytes a flow delivers.
type connDecoder interface {
	Feed(dir mysqlproto.Direction, tsUS int64, data []byte)
	Gap(dir mysqlproto.Direction, tsUS int64)
	Close(tsUS int64)
	Info() *mysqlproto.ConnInfo
	Awaiting() bool
}

// flowKey identifies a TCP connection regardless of direction: a is the
// lower endpoint. It is a comparable value, so map lookups do not allocate.
type flowKey struct{ a, b endpoint }

func less(x, y *endpoint) bool {
	if c := bytes.Compare(x.ip[:], y.ip[:]); c != 0 {
		return c < 0
	}
	return x.port < y.port
}

// keyOf returns the flow key of p and whether p's source is endpoint a.
func keyOf(p *packet) (flowKey, bool) {
	if less(&p.dst, &p.src) {
		return flowKey{p.dst, p.src}, false
	}
	return flowKey{p.src, p.dst}, true
}

// sweepEveryUS is how often (capture time) idle flows are looked for.
const sweepEveryUS = 10_000_000

// tombstoneUS is how long a closed flow is remembered, so that the last ACKs
// after a FIN do not look like a new mid-stream connection.
const tombstoneUS = 60_000_000

// Tracker turns decoded TCP segments into statements. It is not safe for
// concurrent use: one goroutine feeds it, and emit runs on that goroutine.
type Tracker struct {
	opts   Options
	emit   func(*event.Statement)
	newDec func(mysqlproto.Handler, mysqlproto.Options) connDecoder
	norm   *sqltext.Normalizer
	flows  map[flowKey]*flow
	// recent caches flows by their ports (flowSlot), so that most packets
	// find theirs without hashing the 36-byte key into the map. An entry
	// is good while its flow has the key and is still the map's (gone).
	recent [flowSlots]*flow
	stats  Stats
	notes  []string
	pkt    packet
	nowUS  int64
	sweep  int64
	sqlBuf []byte       // scratch for parameter interpolation
	slabs  *event.Slabs // where statements come from (newEvent)
	paths  pathBook
	// heads: packets come from a header-only capture, whose answers may be
	// cut (headmode.go); full, when set, puts a connection in the
	// kernel's full map (on) or takes it out.
	heads bool
	full  func(key flowKey, clientIsA, on bool)
	// portsSeen, when not nil (files only), counts connections by server
	// port (for one not MySQL: its lower port, usually the server's), so
	// that a capture with nothing on the --port given can say where its
	// traffic was.
	portsSeen map[uint16]int64
}

// NewTracker returns a tracker that calls emit for every statement. emit runs
// on the goroutine that feeds packets, so it must be fast (append to a
// slice, send on a buffered channel): a slow emit stalls decoding and, live,
// makes packets drop.
func NewTracker(opts Options, emit func(*event.Statement)) *Tracker {
	return &Tracker{
		opts:   opts.withDefaults(),
		emit:   emit,
		newDec: newMySQLDecoder,
		norm:   sqltext.NewNormalizer(10_000),
		flows:  make(map[flowKey]*flow),
		slabs:  event.NewSlabs(),
	}
}

// Packet decodes one captured frame of link type lt, taken at tsUS (Unix
// microseconds), and advances the connection it belongs to. data is only
// read during the call.
func (t *Tracker) Packet(lt layers.LinkType, tsUS int64, data []byte) {
	t.stats.Packets++
	t.stats.Bytes += int64(len(data))
	p := &t.pkt
	if !t.decoded(decodeFrame(lt, data, p)) {
		return
	}
	p.tsUS = tsUS
	t.segment(p)
}

// decoded counts what a frame or record that is not a TCP segment was,
// and reports whether it is one.
func (t *Tracker) decoded(r decodeResult) bool {
	switch r {
	case resultTCP:
		return true
	case resultFragment:
		t.stats.Fragments++
	case resultMalformed:
		t.stats.Malformed++
	}
	return false
}

// segment routes one TCP segment to its flow.
func (t *Tracker) segment(p *packet) {
	if p.tsUS > t.nowUS {
		t.nowUS = p.tsUS
	}
	if t.nowUS-t.sweep >= sweepEveryUS {
		t.sweepIdle()
	}
	key, srcIsA := keyOf(p)
	slot := &t.recent[flowSlot(&key)]
	f := *slot
	if f == nil || f.gone || f.key != key {
		f = t.flows[key]
		if f != nil {
			*slot = f
		}
	}
	if f == nil || (f.state == stateClosed && p.flags&(tcpSYN|tcpACK) == tcpSYN) {
		if f = t.newFlow(key, p); f == nil {
			return
		}
		*slot = f
	}
	f.segment(p, srcIsA)
	f.noteAwaiting()
}

// flowSlots is the size of the tracker's flow cache (a power of two).
const flowSlots = 256

// flowSlot picks a key's place in the flow cache from its ports: the
// client's differs between the connections of one server.
func flowSlot(k *flowKey) int {
	return int((k.a.port ^ k.b.port*31) & (flowSlots - 1))
}

// drop takes a flow out of the table (and so out of the cache).
func (t *Tracker) drop(k flowKey, f *flow) {
	f.setAwaiting(false)
	f.gone = true
	delete(t.flows, k)
}

// newFlow starts tracking a connection, unless p cannot open one or the
// table is full.
func (t *Tracker) newFlow(key flowKey, p *packet) *flow {
	if p.flags&tcpRST != 0 || (p.flags&tcpFIN != 0 && p.size == 0) {
		return nil // the tail of a connection we never saw
	}
	if old := t.flows[key]; old == nil && len(t.flows) >= t.opts.MaxFlows {
		t.sweepIdle()
		if len(t.flows) >= t.opts.MaxFlows {
			t.stats.UntrackedPackets++
			return nil
		}
	}
	f := &flow{t: t, key: key}
	f.half[0].wscale, f.half[1].wscale = -1, -1
	if old := t.flows[key]; old != nil {
		old.setAwaiting(false)
		old.gone = true // a tombstone reopened: the cache must not find it
	}
	t.flows[key] = f
	return f
}

// countPort counts a connection on a server port, when reading files.
func (t *Tracker) countPort(port uint16) {
	if t.portsSeen != nil {
		t.portsSeen[port]++
	}
}

// sweepIdle closes connections idle longer than IdleTimeout and forgets old
// tombstones.
func (t *Tracker) sweepIdle() {
	t.sweep = t.nowUS
	idle := t.opts.IdleTimeout.Microseconds()
	for k, f := range t.flows {
		age := t.nowUS - f.lastUS
		switch {
		case f.state == stateClosed && age > tombstoneUS:
			t.drop(k, f)
		case f.state != stateClosed && age > idle:
			if f.state == stateMySQL {
				t.stats.EvictedFlows++
			}
			f.close(t.nowUS)
			t.drop(k, f)
		}
	}
}

// Close ends every open connection at tsUS (end of file, end of capture):
// pending exchanges are emitted as incomplete.
func (t *Tracker) Close(tsUS int64) {
	if tsUS < t.nowUS {
		tsUS = t.nowUS
	}
	keys := make([]flowKey, 0, len(t.flows))
	for k := range t.flows {
		keys = append(keys, k)
	}
	// Deterministic order so that emitted statements do not depend on map
	// iteration.
	slices.SortFunc(keys, func(x, y flowKey) int {
		if less(&x.a, &y.a) || (x.a == y.a && less(&x.b, &y.b)) {
			return -1
		}
		return 1
	})
	for _, k := range keys {
		f := t.flows[k]
		f.close(tsUS)
		t.drop(k, f)
	}
}

// AddNote records a note that Stats returns.
func (t *Tracker) AddNote(format string, a ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, a...))
}

// Stats returns the counters so far, with notes explaining anything unusual.
func (t *Tracker) Stats() Stats {
	s := t.stats
	s.Path = t.pathStats()
	s.Notes = append(slices.Clone(t.notes), summaryNotes(&s)...)
	return s
}

// summaryNotes turns unusual counters into sentences for the user.
func summaryNotes(s *Stats) []string {
	var n []string
	add := func(c int64, format string) {
		if c > 0 {
			n = append(n, fmt.Sprintf(format, c))
		}
	}
	add(s.MidStreamFlows, "%d connection(s) started before the capture: user, db and prepared statement texts may be unknown")
	add(s.TLSFlows, "%d TLS connection(s): request/response timings only, no SQL text")
	add(s.NonMySQLFlows, "%d TCP connection(s) ignored: not MySQL")
	add(s.Fragments, "%d IP fragment(s) skipped")
	add(s.Malformed, "%d malformed frame(s) skipped")
	add(s.Gaps, "%d gap(s) in TCP streams (bytes not captured): decoder resynchronised")
	add(s.UntrackedPackets, "%d packet(s) of untracked connections skipped: MaxFlows reached")
	add(s.EvictedFlows, "%d idle connection(s) evicted")
	add(s.KernelDrops, "%d packet(s) dropped during live capture")
	add(s.RowsUnknown, "%d statement(s) with rows unknown: the header-only capture did not see their whole answer (their bytes and times are exact)")
	add(s.FullFlows, "%d connection(s) captured with whole answers (compressed, TLS, or answers the header-only capture could not follow)")
	return n
}

func (t *Tracker) isServerPort(port uint16) bool {
	return slices.Contains(t.opts.Ports, port)
}

// pathStats summarises the path of every connection seen so far.
func (t *Tracker) pathStats() PathStats {
	var open []pathRecord
	for _, f := range t.flows {
		if f.state == stateMySQL && f.path.minUS > 0 {
			open = append(open, pathRecord{f.path.minUS, f.path.medianUS() - f.path.minUS})
		}
	}
	return t.paths.summary(open)
}
