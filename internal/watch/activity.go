package watch

import (
	"strconv"
	"time"
)

// activity tells the poller whether anyone but watch uses the server, so
// that an idle server costs one status read a second. Each read of the
// server is a round trip that wakes both processes and crosses the
// capture's own tap, and waking an idle Go process costs more than the
// read: ten running scans a second made an idle watch several times its
// idle cost (docs/performance.md, "An idle watch's reads"). While the
// server is idle the running scans stop,
// and history_long, the thread-pool groups and the processlist are read
// every idleEvery only; the first sign of activity brings them all back at
// once, for activeFor.
//
// The signs: a statement or a connection on the wire; an outlier; rows in
// history_long; and, for the clients the wire cannot see (unix sockets,
// another port), the server's Questions and Connections counters grown
// beyond the statements and connections watch itself sent and opened
// (ownAddrs counts them), read with the status once a second. Watch's own
// statements run on other goroutines too (the clock's recalibration, once
// a minute), and the server counts a statement when it takes it, watch
// when it is answered: the counters are judged against all that watch
// began, so that one under way is never taken for someone else's, and
// from the last read that ran alone (quietAround), the only kind whose
// counts match watch's exactly. A statement counts from its start, so a
// unix-socket client's statement running at a status read is read
// running, and its thread while it lives. What this
// costs: the first client after a quiet minute whose statements start and
// end between two status reads, on a connection that closes before the
// next, has its statements read from history_long without its thread (the
// connection's type unknown). A run starts active (startActiveFor), as
// labs start watch and then their clients.
//
// Its state belongs to the poller's goroutine.
type activity struct {
	until time.Time // active until then
	// The counters at the last status read that ran alone, and watch's
	// own then.
	known              bool
	queriesAt, connsAt int64
	sentAt, dialsAt    int64
	wireAt             int64
}

const (
	// activeFor: how long one sign keeps the poller at its busy pace.
	activeFor = time.Minute
	// startActiveFor: a run's start counts as a sign, for this long.
	startActiveFor = 10 * time.Second
	// idleEvery: an idle server's history, pool groups and processlist
	// are still read this often (a statement the counters could not
	// show, such as one of an event the scheduler ran).
	idleEvery = 30 * time.Second
)

func (a *activity) active(now time.Time) bool { return now.Before(a.until) }

// mark records a sign of activity.
func (a *activity) mark(now time.Time) { a.until = now.Add(activeFor) }

// noteWire marks activity when the wire took statements since the last
// look (taken: the wire stage's count).
func (a *activity) noteWire(now time.Time, taken int64) {
	if taken != a.wireAt {
		a.mark(now)
	}
	a.wireAt = taken
}

// noteStatus marks activity when the server counted statements or
// connections beyond watch's own (own: its counts after the read) since
// the last read that ran alone, and reports whether connections were (a
// client the wire may not see: its thread is worth reading while it
// lives). Watch's own are all it began, those under way included: the
// server may have counted them. A read that ran alone (nothing else of
// watch's under way around it, quietAround) is the base of the next
// verdicts; one that did not is judged against the older base, so a client
// beside it is seen then or at the next read alone. A status without the
// counters counts as activity: unknown is not idle.
func (a *activity) noteStatus(now time.Time, status map[string]string, own ownCounts, alone bool) (conns bool) {
	// Questions, not Queries: MariaDB's Queries counts a prepared
	// statement's prepare and close too, which watch's count does not.
	q, okQ := statusInt(status, "Questions", "Queries")
	c, okC := statusInt(status, "Connections")
	if !okQ || !okC {
		a.mark(now)
		a.known = false
		return false
	}
	if a.known {
		conns = c-a.connsAt > own.dialsBegun-a.dialsAt
		if conns || q-a.queriesAt > own.begun-a.sentAt {
			a.mark(now)
		}
	}
	if alone {
		a.known = true
		a.queriesAt, a.connsAt, a.sentAt, a.dialsAt = q, c, own.sent, own.dials
	}
	return conns
}

// statusInt is the first of names the status holds as an integer.
func statusInt(status map[string]string, names ...string) (int64, bool) {
	for _, n := range names {
		if v, err := strconv.ParseInt(status[n], 10, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}
