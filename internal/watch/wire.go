package watch

import (
	"math"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/txn"
)

// wireStage is the wire statements stage. It runs on the capture's
// goroutine, which calls take for every statement the capture decodes, and
// must never block it: watch's own connections are dropped, the outlier
// rule marks the slow statements and hands each one's identity to the
// poller at once (its thread's history turns over within milliseconds on
// a busy connection), a connection seen for the first time is signalled
// to the poller (which reads its thread while it lives), and every
// statement is queued for the join. A full queue costs a statement, never
// the capture's time.
//
// Its state (the rule, the connections seen) is touched by take alone.
// What it hands on goes out through its three channels, and what it loses
// or drops is counted in atomics that the other stages read.
type wireStage struct {
	own  *ownAddrs
	rule *outlierRule
	// toPoller: the poller reads threads (a statement cursor opened), so
	// outliers and new connections are handed to it; without one (P_S off,
	// consumers off) each hand-off would only wake it for nothing.
	toPoller bool
	known    map[uint64]struct{} // connections seen (a cache: cleared when full)
	// ledger follows each connection's transactions and the releases
	// others may wait for, in the wire's order (its own lock).
	ledger *txn.Ledger

	out  chan *event.Statement // every statement, to the loop and the join
	work chan struct{}         // wakes the loop when out was empty
	slow chan target           // each outlier's identity, to the poller
	// pollerWake wakes the poller: an outlier in slow, a connection seen
	// first, or taken reaching ringMark (the server's statement ring has
	// filled its share since the last read, ringpace.go).
	pollerWake chan struct{}
	ringMark   atomic.Int64

	queueDrops atomic.Int64 // statements out had no room for
	connsSeen  atomic.Int64 // connections seen for the first time (the poller compares the server's count)
	ownHits    atomic.Int64 // watch's own statements dropped
	slowDrops  atomic.Int64 // outliers slow had no room for
	// taken counts the application's statements, stalls the receive
	// window stalls the capture saw begin (capture.Options.Stalls): the
	// kernel socket reads wait for them.
	taken, stalls atomic.Int64
	// inFlight counts the connections with a command the capture saw sent
	// and not answered yet (capture.Options.InFlight); down is set once
	// the capture stopped, its count then meaning nothing.
	inFlight atomic.Int64
	down     atomic.Bool
}

// maxKnownConns bounds the connections the stage remembers: past it, it
// forgets them all, and at worst a thread is read again.
const maxKnownConns = 100_000

// newWireStage makes the wire stage; work wakes the loop, pollerWake the
// poller (handed to the poller only when toPoller).
func newWireStage(own *ownAddrs, queueLen int, toPoller bool, ledger *txn.Ledger, work, pollerWake chan struct{}) *wireStage {
	w := &wireStage{own: own, toPoller: toPoller, ledger: ledger, rule: newOutlierRule(), known: map[uint64]struct{}{},
		out: make(chan *event.Statement, queueLen), work: work, slow: make(chan target, slowQueue), pollerWake: pollerWake}
	w.ringMark.Store(math.MaxInt64) // armed by the poller's first read
	return w
}

// take is the capture's callback: one statement, on the capture's
// goroutine.
func (w *wireStage) take(s *event.Statement) {
	if w.own.isOwn(s.Conn) {
		w.ownHits.Add(1)
		s.Release()
		return
	}
	w.noteRingTaken(w.taken.Add(1))
	w.ledger.Wire(s)
	if s.ConnID != 0 && w.toPoller {
		w.noteConn(s.ConnID)
	}
	if s.Why != event.ReplicaStream && w.rule.observe(s) { // a replica's stream is no statement
		s.Outlier = true
		if w.toPoller {
			w.handOutlier(s)
		}
	}
	select {
	case w.out <- s:
		if len(w.out) == 1 {
			signal(w.work) // the queue was empty: the loop may be waiting for work
		}
	default:
		w.queueDrops.Add(1)
		s.Release()
	}
}

// signal wakes whoever waits on c, unless a wake is pending already (or c
// is nil).
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// handOutlier gives the poller an outlier's identity, counting it dropped
// when the poller's queue is full.
func (w *wireStage) handOutlier(s *event.Statement) {
	select {
	case w.slow <- targetOf(s):
		signal(w.pollerWake)
	default:
		w.slowDrops.Add(1)
	}
}

// noteConn signals the poller the first time a connection is seen.
func (w *wireStage) noteConn(id uint64) {
	if _, ok := w.known[id]; ok {
		return
	}
	if len(w.known) >= maxKnownConns {
		clear(w.known)
	}
	w.known[id] = struct{}{}
	w.connsSeen.Add(1)
	signal(w.pollerWake) // one pending wake covers every connection
}
