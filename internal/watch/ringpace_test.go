package watch

import (
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/txn"
)

// ringReader is a history reader of a ring of size rows, its wire stage.
func ringReader(size int, table string, noWire bool) (*historyReader, *wireStage) {
	w := newWireStage(newOwnAddrs(), 16, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1))
	h := &historyReader{historyDeps: historyDeps{own: w.own, minPollEvery: 250 * time.Millisecond,
		known: &known{info: collect.ServerInfo{HistoryLongSize: size}}}}
	h.ring = newRingPace(w, collect.NewJoinCursor(table), h.known.info, noWire)
	h.noteRingRead()
	return h, w
}

func ringPoller(size int) (*historyReader, *wireStage) {
	return ringReader(size, "events_statements_history_long", false)
}

func ringTake(w *wireStage, n int) {
	for range n {
		w.noteRingTaken(w.taken.Add(1))
	}
}

func ringWoken(w *wireStage) bool {
	select {
	case <-w.pollerWake:
		return true
	default:
		return false
	}
}

// The wire wakes the poller once the statements it took and watch's own
// fill half the server-wide ring since the last read began, once until a
// read arms it again; the poller reads then, unless the ring filled so
// fast that it turns over between any two reads: that is left to the
// regular pace.
func TestRingPace(t *testing.T) {
	p, w := ringPoller(1000)
	now := time.UnixMicro(time.Now().UnixMicro()) // lastPollAt is in µs
	p.lastPollAt = now.Add(-time.Second).UnixMicro()
	ringTake(w, 498)
	p.own.pool.AddStatements(1) // one of watch's own statements: the ring holds it too
	p.rearmRing()
	if ringWoken(w) || p.ringDue(now) {
		t.Fatal("woken or due before the ring filled half")
	}
	ringTake(w, 1)
	if !ringWoken(w) {
		t.Fatal("not woken with half the ring filled (499 statements and one of watch's)")
	}
	ringTake(w, 100)
	p.rearmRing() // due: the mark stays cleared, no wake per statement
	ringTake(w, 100)
	if ringWoken(w) {
		t.Error("woken again before a read")
	}
	if !p.ringDue(now) {
		t.Error("not due a second after the last read with half the ring filled")
	}
	// 700 rows in 100 ms: half the ring filled in 71 ms, no faster than a
	// 1,000-row ring may be read (50 ms): reading now keeps it from
	// turning over.
	p.lastPollAt = now.Add(-100 * time.Millisecond).UnixMicro()
	if !p.ringDue(now) {
		t.Error("not due with 700 rows 100 ms after a read")
	}
	// The same, the server at 12,000 statements a second over the last
	// status read: saturated, left to the regular pace.
	p.known.queryRate = 12_000
	if p.ringDue(now) {
		t.Error("due at 12,000 statements a second")
	}
	p.known.queryRate = 3_000
	// 700 rows in 20 ms: the ring turns over between any two reads.
	p.lastPollAt = now.Add(-20 * time.Millisecond).UnixMicro()
	if p.ringDue(now) {
		t.Error("due with 700 rows 20 ms after a read")
	}
	p.tickAt = now.Add(time.Second)
	if wait, _ := p.next(now); wait < time.Second {
		t.Errorf("next = %s: a saturated ring woke the poller before the regular pace", wait)
	}
	// A read arms it again from the counts at its start.
	p.noteRingRead()
	if p.ringDue(now.Add(time.Second)) {
		t.Error("due right after a read")
	}
	ringTake(w, 499)
	if ringWoken(w) {
		t.Error("woken before half the ring filled again")
	}
	ringTake(w, 1)
	if !ringWoken(w) {
		t.Error("not woken after the read armed it")
	}
}

// A large ring is never read below the regular floor: a read scans all of
// it on the server. The pace is off where the wire cannot count what fills
// the ring: no capture, or the per-thread history read instead.
func TestRingPaceOff(t *testing.T) {
	big, w := ringPoller(10_000)
	now := time.UnixMicro(time.Now().UnixMicro())
	big.lastPollAt = now.Add(-200 * time.Millisecond).UnixMicro()
	w.taken.Add(5_000) // half the ring in 200 ms: a scan of 10,000 rows every 200 ms is more than ringScanRate
	if big.ringDue(now) {
		t.Error("a 10,000-row ring half filled in 200 ms is due before the floor")
	}
	if !big.ringDue(now.Add(50 * time.Millisecond)) {
		t.Error("a 10,000-row ring half filled is not due at the floor")
	}
	for name, table := range map[string]string{
		"no wire":    "events_statements_history_long",
		"per thread": "events_statements_history",
	} {
		p, w := ringReader(1000, table, name == "no wire")
		ringTake(w, 10_000)
		if ringWoken(w) {
			t.Errorf("%s: the wire woke the poller", name)
		}
		if p.ringDue(time.Now()) {
			t.Errorf("%s: due", name)
		}
	}
}
