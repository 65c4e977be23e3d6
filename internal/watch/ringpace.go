package watch

import (
	"math"
	"sync/atomic"
	"time"
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

// ringPace is the poller's side of the ring's pace: the wire's count and
// watch's own at the last read's start, and the mark at which the wire
// wakes it (wireStage.ringMark).
type ringPace struct {
	// mark is the wire's statement count at which it wakes the poller
	// (math.MaxInt64: not armed); wake is where it does.
	mark *atomic.Int64
	wake <-chan struct{}
	// budget is ringShare of the ring, in rows (0: the pace is off: no
	// wire, or a table that is not the server-wide ring); fastest is the
	// shortest interval between reads (ringScanRate).
	budget  int64
	fastest time.Duration
	// taken0 and own0 are the wire's statements and watch's own when the
	// last read began.
	taken0, own0 int64
}

// startRingPace turns the ring's pace on for a poller that reads the
// server-wide ring and sees the wire.
func (p *poller) startRingPace(w *wireStage) {
	if p.cursor == nil || p.noWire || p.cursor.Table() != "events_statements_history_long" {
		return
	}
	ring := p.info.HistoryLongSize
	if ring <= 0 {
		ring = 1000
	}
	p.ring = ringPace{mark: &w.ringMark, wake: w.ringFill, budget: max(int64(float64(ring)*ringShare), 1),
		fastest: time.Duration(ring) * time.Second / ringScanRate}
	p.noteRingRead()
}

// noteRingRead records the counts as a read of history_long begins: the
// rows that ended before are in it.
func (p *poller) noteRingRead() {
	if p.ring.budget == 0 {
		return
	}
	p.ring.taken0, p.ring.own0 = p.wireTaken.Load(), p.own.pool.Statements()
	p.rearmRing()
}

// ringFill is how many rows entered the ring since the last read began.
func (p *poller) ringFill() int64 {
	return (p.wireTaken.Load() - p.ring.taken0) + (p.own.pool.Statements() - p.ring.own0)
}

// rearmRing sets the wire's mark to the count at which the ring will have
// filled its share, watch's own statements since the read counted. A ring
// already due keeps the mark the wire cleared: the read arms it again, and
// until then the wire does not wake the poller for every statement.
func (p *poller) rearmRing() {
	if p.ring.budget == 0 || p.ringFill() >= p.ring.budget {
		return
	}
	own := p.own.pool.Statements() - p.ring.own0
	p.ring.mark.Store(p.ring.taken0 + p.ring.budget - own)
}

// ringDue says whether history_long is to be read now: the ring filled
// its share since the last read, and either the regular floor has passed
// or the share filled no faster than the ring may be read. A ring filling
// faster turns over between any two reads: it is left to the regular
// pace, whose timer reads it as before (at the floor while it loses
// rows), so a saturated server is read no more often than it was.
func (p *poller) ringDue(now time.Time) bool {
	if p.ring.budget == 0 || p.link.down {
		return false
	}
	fill := p.ringFill()
	if fill < p.ring.budget {
		return false
	}
	elapsed := now.Sub(time.UnixMicro(p.lastPollAt))
	if elapsed >= p.minPollEvery {
		return true
	}
	// How long the share took to fill at the rate since the last read;
	// the server's rate over the last status read must allow the fast
	// pace too, so that a saturated server's dips do not buy it reads.
	filled := time.Duration(float64(elapsed) * float64(p.ring.budget) / float64(fill))
	return filled >= p.ring.fastest && p.queryRate*p.ring.fastest.Seconds() < float64(p.ring.budget)
}

// noteRingTaken is the wire's side: called with the count after each
// statement it takes, it wakes the poller once the count reaches the mark
// (once: the poller arms it again).
func (w *wireStage) noteRingTaken(n int64) {
	if m := w.ringMark.Load(); n >= m && w.ringMark.CompareAndSwap(m, math.MaxInt64) {
		signal(w.ringFill)
	}
}
