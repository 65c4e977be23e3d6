package watch

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

// The ring's pace. events_statements_history_long is a ring of the whole
// server's last N statements (MariaDB's default: 1,000), so it turns over
// in N / rate seconds whatever watch's timer says: ~1,500 statements a
// second of connect-per-request clients turn the default ring over in
// 0.67 s, less than the regular pace's second, and a burst that short was
// read once, after it, its first fifth lost (docs/performance.md). The
// rows entering the ring are what the wire sees (every client's
// statements, a COM_QUIT included) and watch's own statements, both
// counted as they happen: once they fill ringShare of the ring since the
// last read began, the wire wakes the poller, which reads then if
//
//   - the regular pace's floor (MinPollInterval) has passed since the
//     last read, or
//   - the share filled no faster than a read of the ring may come
//     (ringScanRate: a read scans the whole ring on the server), and no
//     faster at the server's statement rate over the last status read
//     (a second), so that reads that often keep the ring from turning
//     over between them.
//
// A ring that fills its share faster than that turns over between any
// two reads: it is left to the regular pace, read at the floor as before
// (the second's rate keeps a saturated server's dips from buying reads at
// the fast pace), since reading it more often would cost the server and
// watch on every read and still lose rows between two. So an idle server
// is read as before, and a saturated one too (the wire wakes the poller
// once more per read, for nothing); only the reads between come sooner,
// when the ring would turn over before them.
//
// What the wire cannot count (a unix-socket client's statements) is read
// at the regular pace, which halves while the ring fills (nextInterval).

// ringShare is the share of the ring that may fill before a read: the
// rest covers the capture's lag (the wire counts a statement up to 25 ms
// after it ran, 100 ms at a light load) and the read's own delay.
const ringShare = 0.5

// ringScanRate bounds how often the ring is read below the regular
// floor: a read scans every row of the ring on the server, so at most
// this many rows a second (the default 1,000-row ring every 50 ms; a ring
// of 5,000 rows or more never below the default floor, 250 ms).
const ringScanRate = 20_000

// ringPace is the history reader's side of the ring's pace: the wire's
// count and watch's own at the last read's start, and the mark at which
// the wire wakes the poller (wireStage.ringMark).
type ringPace struct {
	// mark is the wire's statement count at which it wakes the poller
	// (math.MaxInt64: not armed); taken is the wire's count, own watch's
	// pool, which counts its own statements.
	mark  *atomic.Int64
	taken *atomic.Int64
	own   *ownAddrs
	// budget is ringShare of the ring, in rows (0: the pace is off: no
	// wire, or a table that is not the server-wide ring); fastest is the
	// shortest interval between reads (ringScanRate).
	budget  int64
	fastest time.Duration
	// taken0 and own0 are the wire's statements and watch's own when the
	// last read began.
	taken0, own0 int64
}

// newRingPace is the ring's pace of a reader of c: on for the server-wide
// ring beside a wire, off (a zero budget) otherwise.
func newRingPace(w *wireStage, c *collect.StatementCursor, info collect.ServerInfo, noWire bool) ringPace {
	if noWire || c.Table() != "events_statements_history_long" {
		return ringPace{}
	}
	ring := info.HistoryLongSize
	if ring <= 0 {
		ring = 1000
	}
	return ringPace{mark: &w.ringMark, taken: &w.taken, own: w.own, budget: max(int64(float64(ring)*ringShare), 1),
		fastest: time.Duration(ring) * time.Second / ringScanRate}
}

// noteRingRead records the counts as a read of history_long begins: the
// rows that ended before are in it.
func (h *historyReader) noteRingRead() {
	r := &h.ring
	if r.budget == 0 {
		return
	}
	r.taken0, r.own0 = r.taken.Load(), r.own.pool.Statements()
	h.rearmRing()
}

// fill is how many rows entered the ring since the last read began.
func (r *ringPace) fill() int64 {
	return (r.taken.Load() - r.taken0) + (r.own.pool.Statements() - r.own0)
}

// rearmRing sets the wire's mark to the count at which the ring will have
// filled its share, watch's own statements since the read counted. A ring
// already due keeps the mark the wire cleared: the read arms it again, and
// until then the wire does not wake the poller for every statement.
func (h *historyReader) rearmRing() {
	r := &h.ring
	if r.budget == 0 || r.fill() >= r.budget {
		return
	}
	own := r.own.pool.Statements() - r.own0
	r.mark.Store(r.taken0 + r.budget - own)
}

// ringDue says whether history_long is to be read now: the ring filled
// its share since the last read, and either the regular floor has passed
// or the share filled no faster than the ring may be read. A ring filling
// faster turns over between any two reads: it is left to the regular
// pace, whose timer reads it as before (at the floor while it loses
// rows), so a saturated server is read no more often than it was.
func (h *historyReader) ringDue(now time.Time) bool {
	r := &h.ring
	if r.budget == 0 || h.link.down {
		return false
	}
	fill := r.fill()
	if fill < r.budget {
		return false
	}
	elapsed := now.Sub(time.UnixMicro(h.lastPollAt))
	if elapsed >= h.minPollEvery {
		return true
	}
	// How long the share took to fill at the rate since the last read;
	// the server's rate over the last status read must allow the fast
	// pace too, so that a saturated server's dips do not buy it reads.
	filled := time.Duration(float64(elapsed) * float64(r.budget) / float64(fill))
	return filled >= r.fastest && h.known.queryRate*r.fastest.Seconds() < float64(r.budget)
}

// noteRingTaken is the wire's side: called with the count after each
// statement it takes, it wakes the poller once the count reaches the mark
// (once: the poller arms it again).
func (w *wireStage) noteRingTaken(n int64) {
	if m := w.ringMark.Load(); n >= m && w.ringMark.CompareAndSwap(m, math.MaxInt64) {
		signal(w.pollerWake)
	}
}
