package collect

import (
	"cmp"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// rows builds history rows of one thread: each statement takes span ids
// (itself and its stages/waits) and gap ids of other events follow it.
func threadRows(thread, firstID uint64, n, span, gap int) []eventKey {
	var out []eventKey
	id := firstID
	for i := 0; i < n; i++ {
		out = append(out, eventKey{Thread: thread, EventID: id, EndEventID: id + uint64(span) - 1})
		id += uint64(span + gap)
	}
	return out
}

func sub(all []eventKey, from, to int) []eventKey { return append([]eventKey(nil), all[from:to]...) }

func TestRingCursorPerThreadLoss(t *testing.T) {
	for _, tc := range []struct {
		name      string
		span, gap int
	}{{"statements only", 1, 0}, {"with stages and idle", 5, 2}, {"one id each, idle between", 1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			all := threadRows(7, 1, 60, tc.span, tc.gap)
			c := newRingCursor(false, 10)
			fresh, lost := c.advance(sub(all, 0, 10))
			if len(fresh) != 10 || lost != 0 {
				t.Fatalf("first read: %d fresh, %d lost", len(fresh), lost)
			}
			// Next 10 statements, all still in the ring: no loss.
			if fresh, lost = c.advance(sub(all, 10, 20)); len(fresh) != 10 || lost != 0 {
				t.Fatalf("contiguous read: %d fresh, %d lost", len(fresh), lost)
			}
			// Statements 20..34 happen, the ring keeps 25..34: 5 lost.
			if fresh, lost = c.advance(sub(all, 25, 35)); len(fresh) != 10 || lost != 5 {
				t.Fatalf("after overflow: %d fresh, %d lost, want 10, 5", len(fresh), lost)
			}
			// Partly overlapping read: only the 3 new ones, no loss.
			if fresh, lost = c.advance(sub(all, 28, 38)); len(fresh) != 3 || lost != 0 {
				t.Fatalf("overlap: %d fresh, %d lost, want 3, 0", len(fresh), lost)
			}
			// Nothing new.
			if fresh, lost = c.advance(sub(all, 28, 38)); len(fresh) != 0 || lost != 0 {
				t.Fatalf("same read again: %d fresh, %d lost", len(fresh), lost)
			}
		})
	}
}

func TestRingCursorNotFullMeansNoLoss(t *testing.T) {
	c := newRingCursor(false, 10)
	all := threadRows(1, 1, 30, 1, 0)
	c.advance(sub(all, 0, 3))
	// A thread whose ring is not full lost nothing, whatever the id gap
	// (other event kinds may have taken the ids).
	if _, lost := c.advance(sub(all, 20, 25)); lost != 0 {
		t.Fatalf("lost = %d with a ring of 5/10", lost)
	}
}

func TestRingCursorNestedStatements(t *testing.T) {
	// A CALL (id 2, ends at 4) runs statements 3 and 4: they complete, and
	// appear, before the CALL does.
	c := newRingCursor(true, 100)
	children := []eventKey{{1, 1, 1, 0}, {1, 3, 3, 0}, {1, 4, 4, 0}}
	if fresh, _ := c.advance(children); len(fresh) != 3 {
		t.Fatalf("fresh = %v", fresh)
	}
	// The CALL then completes; its END_EVENT_ID (6) is above the children's
	// because its own trailing stages took ids 5 and 6.
	withCall := append(children, eventKey{1, 2, 6, 0}, eventKey{1, 7, 7, 0})
	fresh, lost := c.advance(withCall)
	if len(fresh) != 2 || withCall[fresh[0]].EventID != 2 || withCall[fresh[1]].EventID != 7 || lost != 0 {
		t.Fatalf("fresh = %v lost = %d, want the CALL and statement 7", fresh, lost)
	}
}

func TestRingCursorGlobalWrap(t *testing.T) {
	// Two threads interleave in a global ring of 6.
	a := threadRows(1, 1, 40, 1, 0)
	b := threadRows(2, 1, 40, 1, 0)
	ring := func(i, j int) []eventKey { // a[i:i+3] and b[j:j+3]
		return append(sub(a, i, i+3), sub(b, j, j+3)...)
	}
	c := newRingCursor(true, 6)
	c.advance(ring(0, 0))
	if fresh, lost := c.advance(ring(2, 1)); len(fresh) != 3 || lost != 0 {
		t.Fatalf("overlapping read: %d fresh, %d lost", len(fresh), lost)
	}
	// a: last seen #4, now #10..12 (5 lost); b: last seen #3, now #9..11 (5 lost).
	if fresh, lost := c.advance(ring(10, 9)); len(fresh) != 6 || lost != 10 {
		t.Fatalf("wrapped read: %d fresh, %d lost, want 6, 10", len(fresh), lost)
	}
	// A ring full of threads we never saw still reports the wrap.
	c2 := newRingCursor(true, 6)
	c2.advance(ring(0, 0))
	other := append(threadRows(3, 1, 3, 1, 0), threadRows(4, 1, 3, 1, 0)...)
	if _, lost := c2.advance(other); lost != 1 {
		t.Fatalf("wrap by unknown threads: lost = %d, want at least 1", lost)
	}
}

// A filtered read (some connections only) never holds the whole ring, so
// the global ring's wrap shows only in the followed threads' id gaps.
func TestRingCursorFilteredGlobalWrap(t *testing.T) {
	a := threadRows(1, 1, 40, 1, 0)
	c := newRingCursor(true, 6)
	c.filtered = true
	c.advance(sub(a, 0, 3))
	if fresh, lost := c.advance(sub(a, 3, 5)); len(fresh) != 2 || lost != 0 {
		t.Fatalf("contiguous filtered read: %d fresh, %d lost", len(fresh), lost)
	}
	if fresh, lost := c.advance(sub(a, 2, 7)); len(fresh) != 2 || lost != 0 {
		t.Fatalf("overlapping filtered read: %d fresh, %d lost", len(fresh), lost)
	}
	// a: last seen #7, the ring now holds #12..13 of it: 4 lost.
	if fresh, lost := c.advance(sub(a, 11, 13)); len(fresh) != 2 || lost != 4 {
		t.Fatalf("wrapped filtered read: %d fresh, %d lost, want 2, 4", len(fresh), lost)
	}
}

func TestRingCursorForgetsEndedThreads(t *testing.T) {
	c := newRingCursor(false, 10)
	c.advance(threadRows(1, 1, 3, 1, 0))
	c.advance(threadRows(2, 1, 3, 1, 0))
	if _, ok := c.marks[1]; ok || len(c.marks) != 1 {
		t.Fatalf("marks = %v, want only thread 2", c.marks)
	}
}

func BenchmarkRingCursorAdvance(b *testing.B) {
	var keys []eventKey
	for t := uint64(1); t <= 50; t++ {
		keys = append(keys, threadRows(t, 1, 20, 3, 1)...)
	}
	c := newRingCursor(true, len(keys))
	b.ReportAllocs()
	for b.Loop() {
		c.advance(keys)
	}
}

// simRing simulates a performance_schema history ring: a row is inserted
// when it becomes visible (visible >= its TIMER_END), the oldest evicted
// beyond size (globally for _long, per thread for _history).
type simRing struct {
	long bool
	size int
	rows []simRow // pending and inserted, in visibility order
}

type simRow struct {
	key     eventKey
	visible uint64
}

// at returns the ring's rows at time now that the window admits.
func (r *simRing) at(now uint64, w window) []eventKey {
	var in []eventKey
	for _, row := range r.rows {
		if row.visible <= now {
			in = append(in, row.key)
		}
	}
	if r.long {
		in = in[max(0, len(in)-r.size):]
	} else {
		in = lastPerThread(in, r.size)
	}
	var out []eventKey
	for _, k := range in {
		if w.admits(k.TimerEnd) {
			out = append(out, k)
		}
	}
	return out
}

func lastPerThread(in []eventKey, size int) []eventKey {
	count := map[uint64]int{}
	for _, k := range in {
		count[k.Thread]++
	}
	var out []eventKey
	for _, k := range in {
		if count[k.Thread] <= size {
			out = append(out, k)
		}
		count[k.Thread]--
	}
	return out
}

func (r *simRing) add(k eventKey, visible uint64) {
	r.rows = append(r.rows, simRow{k, visible})
	slices.SortStableFunc(r.rows, func(a, b simRow) int { return cmp.Compare(a.visible, b.visible) })
}

// poll reads the ring at now through c and returns the new keys.
func (r *simRing) poll(c *ringCursor, now uint64) ([]eventKey, int64) {
	keys := r.at(now, c.window())
	fresh, lost := c.advance(keys)
	out := make([]eventKey, len(fresh))
	for j, i := range fresh {
		out[j] = keys[i]
	}
	return out, lost
}

const ms = 1_000_000_000 // picoseconds

func TestIncrementalLateRow(t *testing.T) {
	r := &simRing{long: true, size: 100}
	c := newIncrementalCursor(true, 100, 50*ms)
	r.add(eventKey{1, 1, 1, 100 * ms}, 100*ms)
	r.add(eventKey{2, 1, 1, 150 * ms}, 150*ms)
	// Thread 3's statement ended at 120 ms but its row appears at 160 ms,
	// after the read at 155 ms saw thread 2's later-ending row.
	r.add(eventKey{3, 1, 1, 120 * ms}, 160*ms)
	if got, _ := r.poll(c, 155*ms); len(got) != 2 {
		t.Fatalf("first read: %v", got)
	}
	got, lost := r.poll(c, 200*ms)
	if len(got) != 1 || got[0].Thread != 3 || lost != 0 {
		t.Fatalf("second read: %v lost %d, want thread 3's late row", got, lost)
	}
	// 30 ms late: the slack grows to four times that.
	if c.inc.maxLate != 30*ms || c.inc.slack() != 120*ms {
		t.Errorf("late %d ms, slack %d ms; want 30, 120", c.inc.maxLate/ms, c.inc.slack()/ms)
	}
	if got, _ := r.poll(c, 300*ms); len(got) != 0 {
		t.Fatalf("third read returned %v again", got)
	}
}

func TestIncrementalScanRace(t *testing.T) {
	// The server's scan passed the slots of thread 1's statements 5 and 6
	// before they were written, and read statement 7's slot after: the
	// first read returns 7 only, the next one 5 and 6 (below 7, but not
	// returned before), and the one after nothing.
	r := &simRing{long: true, size: 100}
	c := newIncrementalCursor(true, 100, 50*ms)
	r.add(eventKey{1, 5, 5, 10 * ms}, 13*ms)
	r.add(eventKey{1, 6, 6, 11 * ms}, 13*ms)
	r.add(eventKey{1, 7, 7, 12 * ms}, 12*ms)
	if got, _ := r.poll(c, 12*ms); len(got) != 1 || got[0].EventID != 7 {
		t.Fatalf("first read: %v", got)
	}
	if got, _ := r.poll(c, 20*ms); len(got) != 2 || got[0].EventID != 5 || got[1].EventID != 6 {
		t.Fatalf("second read: %v, want statements 5 and 6", got)
	}
	if got, _ := r.poll(c, 30*ms); len(got) != 0 {
		t.Fatalf("third read: %v", got)
	}
}

func TestIncrementalWindowStartsBelowMark(t *testing.T) {
	c := newIncrementalCursor(true, 100, 50*ms)
	if w := c.window(); !w.all {
		t.Fatalf("first window %+v, want the whole table", w)
	}
	c.advance([]eventKey{{1, 1, 1, 1000 * ms}, {1, 2, 2, 0}})
	w := c.window()
	if w.all || w.from != 950*ms {
		t.Fatalf("window %+v, want from 950 ms", w)
	}
	if !w.admits(0) || w.admits(950*ms) || !w.admits(950*ms+1) {
		t.Errorf("window %+v admits untimed/at-start/after-start wrongly", w)
	}
	// A quiet read never moves the window back.
	c.advance(nil)
	if c.window().from != 950*ms {
		t.Errorf("window moved to %d", c.window().from)
	}
}

func TestIncrementalCallNesting(t *testing.T) {
	// A CALL (event 2) runs statements 3 and 4, which end and appear at
	// 10 and 20 ms; the CALL ends at 30 ms with END_EVENT_ID 6.
	r := &simRing{long: true, size: 100}
	c := newIncrementalCursor(true, 100, 5*ms)
	r.add(eventKey{1, 3, 3, 10 * ms}, 10*ms)
	r.add(eventKey{1, 4, 4, 20 * ms}, 20*ms)
	r.add(eventKey{1, 2, 6, 30 * ms}, 30*ms)
	r.add(eventKey{1, 7, 7, 40 * ms}, 40*ms)
	if got, _ := r.poll(c, 25*ms); len(got) != 2 {
		t.Fatalf("children: %v", got)
	}
	got, _ := r.poll(c, 45*ms)
	if len(got) != 2 || got[0].EventID != 2 || got[1].EventID != 7 {
		t.Fatalf("got %v, want the CALL then statement 7", got)
	}
}

func TestIncrementalIdleThreadKeepsMark(t *testing.T) {
	// Per-thread rings of 10. Thread 1 runs once, then is idle while
	// thread 2 runs for many polls (thread 1 absent from every filtered
	// read), then runs 25 statements between two reads: 15 lost.
	r := &simRing{long: false, size: 10}
	c := newIncrementalCursor(false, 10, 5*ms)
	now := uint64(0)
	r.add(eventKey{1, 1, 1, 1 * ms}, 1*ms)
	for i := uint64(1); i <= 20; i++ {
		now = i * 100 * ms
		r.add(eventKey{2, i, i, now - ms}, now-ms)
		if _, lost := r.poll(c, now); lost != 0 {
			t.Fatalf("poll %d: lost %d", i, lost)
		}
	}
	for i := uint64(2); i <= 26; i++ {
		r.add(eventKey{1, i, i, now + i*ms}, now+i*ms)
	}
	got, lost := r.poll(c, now+100*ms)
	if len(got) != 10 || lost != 15 {
		t.Fatalf("after the burst: %d new, %d lost; want 10, 15", len(got), lost)
	}
}

func TestIncrementalForgetsEndedThreads(t *testing.T) {
	c := newIncrementalCursor(true, 100, 5*ms)
	c.advance([]eventKey{{1, 1, 1, 10 * ms}, {2, 1, 1, 11 * ms}, {3, 1, 1, 12 * ms}})
	c.advance([]eventKey{{3, 2, 2, 20 * ms}})
	// Threads 1 and 2 have ended; 3 has ended too but its row was in the
	// last read (it may be read again inside the slack): keep it.
	c.forget(func(t uint64) bool { return t == 2 })
	if _, ok := c.marks[1]; ok || len(c.marks) != 2 {
		t.Fatalf("marks = %v, want threads 2 and 3", c.marks)
	}
	// A filtered read without thread 2 keeps its mark (idle, alive).
	c.advance(nil)
	if _, ok := c.marks[2]; !ok {
		t.Fatal("an idle thread lost its mark")
	}
}

func TestIncrementalRingWrap(t *testing.T) {
	// Global ring of 6, two threads; between two reads 20 statements
	// happen: the read gets the last 6, and the loss is counted as with a
	// whole-table read.
	r := &simRing{long: true, size: 6}
	c := newIncrementalCursor(true, 6, 5*ms)
	tm := uint64(0)
	next := map[uint64]uint64{1: 1, 2: 1}
	run := func(n int) {
		for i := 0; i < n; i++ {
			th := uint64(1 + i%2)
			tm += ms
			r.add(eventKey{th, next[th], next[th], tm}, tm)
			next[th]++
		}
	}
	run(4)
	r.poll(c, tm)
	run(20)
	got, lost := r.poll(c, tm)
	if len(got) != 6 || lost != 14 {
		t.Fatalf("after wrap: %d new, %d lost; want 6, 14", len(got), lost)
	}
	// Fewer new rows than the ring holds, no old row inside the slack (a
	// quiet gap): no loss.
	tm += 100 * ms
	run(3)
	if got, lost := r.poll(c, tm); len(got) != 3 || lost != 0 {
		t.Fatalf("after a quiet gap: %d new, %d lost; want 3, 0", len(got), lost)
	}
}

func TestIncrementalTimerWrap(t *testing.T) {
	// TIMER_END passes 2^64 (213 days of uptime in picoseconds).
	r := &simRing{long: true, size: 1000}
	c := newIncrementalCursor(true, 1000, 5*ms)
	start := ^uint64(0) - 30*ms
	seen := map[eventKey]bool{}
	// The simulated ring orders rows by visibility: step numbers here.
	for i := uint64(1); i <= 60; i++ {
		te := start + i*ms // wraps after i = 30
		r.add(eventKey{1, i, i, te}, i)
		if i%7 == 0 {
			got, _ := r.poll(c, i)
			for _, k := range got {
				if seen[k] {
					t.Fatalf("%+v returned twice", k)
				}
				seen[k] = true
			}
		}
	}
	got, _ := r.poll(c, 61)
	for _, k := range got {
		seen[k] = true
	}
	if len(seen) != 60 {
		t.Fatalf("returned %d of 60 statements across the timer wrap", len(seen))
	}
}

// TestIncrementalMatchesWholeTable runs random workloads (threads,
// statements, rows visible up to 10 ms after their TIMER_END, so that a
// read may see a thread's row and miss its earlier one, as a server scan
// racing the writer does; reads at random times) through an incremental
// and a whole-table cursor. The incremental one must return exactly the
// rows that were in the ring at some read, once each, and report loss in
// the same reads as the whole-table one.
func TestIncrementalMatchesWholeTable(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		long := seed%2 == 0
		size := 5 + rng.IntN(200)
		r := &simRing{long: long, size: size}
		whole, inc := newRingCursor(long, size), newIncrementalCursor(long, size, 20*ms)
		next := map[uint64]uint64{}
		tm := uint64(rng.IntN(1000)) * ms
		readable := map[eventKey]bool{}
		var got []eventKey
		for step := 0; step < 400; step++ {
			tm += uint64(rng.IntN(3000)) * 1_000_000 // 0-3 ms
			th := uint64(1 + rng.IntN(8))
			id := next[th] + 1 + uint64(rng.IntN(3))
			end := id + uint64(rng.IntN(3))
			next[th] = end
			r.add(eventKey{th, id, end, tm}, tm+uint64(rng.IntN(10_000))*1_000_000)
			if rng.IntN(20) == 0 {
				for _, k := range r.at(tm, window{all: true}) {
					readable[k] = true
				}
				_, lw := r.poll(whole, tm)
				i, li := r.poll(inc, tm)
				got = append(got, i...)
				if (lw > 0) != (li > 0) {
					t.Fatalf("seed %d step %d: whole-table lost %d, incremental %d", seed, step, lw, li)
				}
			}
		}
		want := slices.Collect(maps.Keys(readable))
		slices.SortFunc(want, cmpKey)
		slices.SortFunc(got, cmpKey)
		if !slices.Equal(want, got) {
			t.Fatalf("seed %d (long %v, ring %d): %d rows were readable, incremental returned %d",
				seed, long, size, len(want), len(got))
		}
	}
}

func cmpKey(a, b eventKey) int {
	if c := cmp.Compare(a.Thread, b.Thread); c != 0 {
		return c
	}
	return cmp.Compare(a.EventID, b.EventID)
}

// A connection left out of reads (ExceptConns) and then read again: what
// it ran meanwhile was skipped on purpose, not lost to the ring; a thread
// read all along still shows its loss.
func TestExceptConnsReadAgainIsNotLoss(t *testing.T) {
	run := func(leaveOut bool) int64 {
		c := newStatementCursor("events_statements_history_long", true)
		c.r.ring = newIncrementalCursor(true, 6, 5*ms)
		c.r.ring.filtered = true
		c.conns[7] = 70 // thread 7 runs connection 70
		a, b := threadRows(7, 1, 40, 1, 0), threadRows(8, 1, 40, 1, 0)
		for i := range a { // both threads run a statement every 10 ms
			a[i].TimerEnd, b[i].TimerEnd = uint64(i+1)*10*ms, uint64(i+1)*10*ms+ms
		}
		c.r.ring.advance(append(sub(a, 0, 2), sub(b, 0, 2)...))
		if leaveOut {
			c.ExceptConns([]uint64{70})
		}
		c.r.ring.advance(sub(b, 2, 4)) // thread 7 not asked for (or idle)
		c.ExceptConns(nil)
		_, lost := c.r.ring.advance(append(sub(a, 30, 32), sub(b, 4, 6)...))
		return lost
	}
	if lost := run(true); lost != 0 {
		t.Errorf("left out, then read again: %d lost, want 0", lost)
	}
	if lost := run(false); lost != 28 {
		t.Errorf("read all along: %d lost, want 28 (ids 3-30 of thread 7)", lost)
	}
}
