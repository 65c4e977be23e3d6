package watch

import (
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

// The wire wakes the poller once the statements it took and watch's own
// fill half the server-wide ring since the last read began, once until a
// read arms it again; the poller reads then, unless the ring filled so
// fast that it turns over between any two reads: then at the regular
// pace's floor.
func TestRingPace(t *testing.T) {
	w := newWireStage(newOwnAddrs(), 16, true, nil)
	p := &poller{wireTaken: &w.taken, own: w.own, cursor: collect.NewJoinCursor("events_statements_history_long"),
		minPollEvery: 250 * time.Millisecond, info: collect.ServerInfo{HistoryLongSize: 1000}, targets: newTargets(false, false)}
	p.startRingPace(w)
	take := func(n int) {
		for range n {
			w.noteRingTaken(w.taken.Add(1))
		}
	}
	woken := func() bool {
		select {
		case <-w.ringFill:
			return true
		default:
			return false
		}
	}
	now := time.UnixMicro(time.Now().UnixMicro()) // lastPollAt is in µs
	p.lastPollAt = now.Add(-time.Second).UnixMicro()
	take(498)
	p.own.sent.Add(1) // one of watch's own statements: the ring holds it too
	p.rearmRing()
	if woken() {
		t.Fatal("woken before the ring filled half")
	}
	if due, _ := p.ringDue(now); due {
		t.Fatal("due before the ring filled half")
	}
	take(1)
	if !woken() {
		t.Fatal("not woken with half the ring filled (499 statements and one of watch's)")
	}
	take(100)
	p.rearmRing() // due: the mark stays cleared, no wake per statement
	take(100)
	if woken() {
		t.Error("woken again before a read")
	}
	if due, _ := p.ringDue(now); !due {
		t.Error("not due a second after the last read with half the ring filled")
	}
	// 700 rows in 100 ms: half the ring filled in 71 ms, no faster than a
	// 1,000-row ring may be read (50 ms): reading now keeps it from
	// turning over.
	p.lastPollAt = now.Add(-100 * time.Millisecond).UnixMicro()
	if due, wait := p.ringDue(now); !due || wait != 0 {
		t.Errorf("ringDue, 700 rows 100 ms after a read = %v, %s; want true", due, wait)
	}
	// 700 rows in 20 ms: the ring turns over between any two reads, which
	// keep the regular floor (250 ms after the last).
	p.lastPollAt = now.Add(-20 * time.Millisecond).UnixMicro()
	if due, wait := p.ringDue(now); due || wait != 230*time.Millisecond {
		t.Errorf("ringDue, 700 rows 20 ms after a read = %v, %s; want false, 230ms", due, wait)
	}
	if wait, ok := p.nextWake(now); !ok || wait != 230*time.Millisecond {
		t.Errorf("nextWake = %s, %v; want 230ms, true", wait, ok)
	}
	// A read arms it again from the counts at its start.
	p.noteRingRead()
	if due, _ := p.ringDue(now.Add(time.Second)); due {
		t.Error("due right after a read")
	}
	take(499)
	if woken() {
		t.Error("woken before half the ring filled again")
	}
	take(1)
	if !woken() {
		t.Error("not woken after the read armed it")
	}
}

// The pace is off where the wire cannot count what fills the ring: no
// capture, or the per-thread history read instead of the server's ring.
func TestRingPaceOff(t *testing.T) {
	// A large ring is never read below the regular floor: scanning it
	// costs the server every row.
	w := newWireStage(newOwnAddrs(), 16, true, nil)
	big := &poller{wireTaken: &w.taken, own: w.own, cursor: collect.NewJoinCursor("events_statements_history_long"),
		minPollEvery: 250 * time.Millisecond, info: collect.ServerInfo{HistoryLongSize: 10_000}, targets: newTargets(false, false)}
	big.startRingPace(w)
	now := time.UnixMicro(time.Now().UnixMicro())
	big.lastPollAt = now.Add(-200 * time.Millisecond).UnixMicro()
	w.taken.Add(5_000) // half the ring in 200 ms: a scan of 10,000 rows every 200 ms is more than ringScanRate
	if due, wait := big.ringDue(now); due || wait != 50*time.Millisecond {
		t.Errorf("10,000-row ring half filled in 200 ms: ringDue = %v, %s; want false, 50ms", due, wait)
	}

	for name, p := range map[string]*poller{
		"no wire":    {noWire: true, cursor: collect.NewJoinCursor("events_statements_history_long")},
		"per thread": {cursor: collect.NewJoinCursor("events_statements_history")},
		"no cursor":  {},
	} {
		w := newWireStage(newOwnAddrs(), 16, true, nil)
		p.wireTaken, p.own = &w.taken, w.own
		p.startRingPace(w)
		for range 10_000 {
			w.noteRingTaken(w.taken.Add(1))
		}
		select {
		case <-w.ringFill:
			t.Errorf("%s: the wire woke the poller", name)
		default:
		}
		if due, wait := p.ringDue(time.Now()); due || wait != 0 {
			t.Errorf("%s: ringDue = %v, %s", name, due, wait)
		}
	}
}
