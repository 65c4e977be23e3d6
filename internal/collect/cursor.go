package collect

import (
	"cmp"
	"slices"
)

// eventKey locates one row of a performance_schema history table.
// EndEventID orders completion within a thread: a row appears in history
// when its event ends, and END_EVENT_ID is the thread's event counter at that
// moment. (EVENT_ID alone does not: a CALL gets its EVENT_ID before the
// statements it runs but ends, and appears, after them.) TimerEnd is the
// row's TIMER_END, 0 when NULL (an untimed instrument).
type eventKey struct {
	Thread, EventID, EndEventID uint64
	TimerEnd                    uint64
}

func (k eventKey) end() uint64 {
	if k.EndEventID == 0 {
		return k.EventID
	}
	return k.EndEventID
}

// ringCursor is the pure bookkeeping behind the history cursors: which rows
// of a ring-buffer table are new since the last read, and how many rows the
// ring dropped before we could read them.
//
// Two ring shapes exist. *_history keeps the last ringSize events of each
// thread; *_history_long keeps the last ringSize events of the whole server.
// For both, a row is new when its END_EVENT_ID is above the thread's mark
// (the highest END_EVENT_ID returned before). Loss is possible only when the
// ring holds no row we saw before and is full: for _history per thread, for
// _long globally (if any old row survives, everything newer survives too,
// since the ring evicts oldest first). The count of lost events is then
// estimated from the EVENT_ID gap after the mark (see estimateLost).
//
// An incremental cursor is given only the rows inside window() (TIMER_END
// after the high-water mark minus a slack, see incremental.go) instead of
// the whole table. The loss test above still holds on that subset: a ring
// that kept any row we saw either returns it (inside the slack) or returns
// fewer than ringSize rows (the seen rows below the window were filtered
// out, and survive); a ring that kept none returns all its rows, all new.
//
// An incremental cursor does not trust the thread marks for rows inside
// its window: a read can miss rows of a thread and return a later row of
// it, when the server's scan of the ring is descheduled just as that thread
// writes into the slots behind it (measured: runs of 10-30 statements of one
// sysbench thread). The missed rows appear in the next read, inside the
// window, below the thread's mark. So rows inside the window are
// recognised one by one (recent), and the marks serve untimed rows and the
// loss estimate.
type ringCursor struct {
	long     bool // one global ring (_history_long) instead of one per thread
	ringSize int  // events the ring holds (per thread or global); 0: unknown
	marks    map[uint64]threadMark
	primed   bool // a read happened before
	polls    uint64
	inc      *timerWindow // nil: every read is the whole table
	// recent maps the timed rows returned that are still inside the
	// window to their TIMER_END (incremental cursors only).
	recent map[rowID]uint64
	// filtered: reads ask for some connections only, so a read never holds
	// the whole ring and only per-thread gaps can show a loss.
	filtered bool
}

// rowID names one history row: a thread's END_EVENT_ID is unique.
type rowID struct{ thread, end uint64 }

// threadMark is what the cursor remembers of one thread: the highest
// END_EVENT_ID returned, and the poll that last returned a row of it.
type threadMark struct {
	end  uint64
	seen uint64
	// unread: reads left the thread out on purpose (ExceptConns) since
	// end: the gap before its next row is not a loss.
	unread bool
}

func newRingCursor(long bool, ringSize int) *ringCursor {
	return &ringCursor{long: long, ringSize: ringSize, marks: map[uint64]threadMark{}}
}

// newIncrementalCursor returns a cursor whose reads are filtered by window().
func newIncrementalCursor(long bool, ringSize int, minSlack uint64) *ringCursor {
	c := newRingCursor(long, ringSize)
	c.inc = &timerWindow{minSlack: minSlack}
	c.recent = map[rowID]uint64{}
	return c
}

// window returns the TIMER_END range the next read must cover.
func (c *ringCursor) window() window {
	if c.inc == nil {
		return window{all: true}
	}
	return c.inc.window()
}

// advance takes the rows of the table inside window() and returns the
// indices of the new ones (in input order) and the estimated number of
// events lost since the previous call.
func (c *ringCursor) advance(keys []eventKey) (fresh []int, lost int64) {
	c.polls++
	byThread := groupByThread(keys)
	old := make([]bool, len(keys))
	anyOld := false
	for i, k := range keys {
		if old[i] = c.returned(k); old[i] {
			anyOld = true
			continue
		}
		fresh = append(fresh, i)
	}
	if c.primed {
		lost = c.lostSince(keys, old, byThread, anyOld)
	}
	if c.inc != nil {
		c.inc.observe(keys, fresh)
		c.settle(keys, fresh)
	}
	c.remember(keys, byThread)
	c.primed = true
	return fresh, lost
}

// returned reports whether row k was returned by an earlier read.
func (c *ringCursor) returned(k eventKey) bool {
	if c.inc != nil && k.TimerEnd != 0 {
		_, ok := c.recent[rowID{k.Thread, k.end()}]
		return ok
	}
	m, ok := c.marks[k.Thread]
	return ok && k.end() <= m.end
}

// settle records the fresh timed rows in recent and forgets those the
// window has left: they cannot be read again, since the window's start
// never moves back.
func (c *ringCursor) settle(keys []eventKey, fresh []int) {
	for _, i := range fresh {
		if k := keys[i]; k.TimerEnd != 0 {
			c.recent[rowID{k.Thread, k.end()}] = k.TimerEnd
		}
	}
	w := c.inc.window()
	for id, te := range c.recent {
		if !w.admits(te) {
			delete(c.recent, id)
		}
	}
}

func (c *ringCursor) lostSince(keys []eventKey, old []bool, byThread map[uint64][]int, anyOld bool) int64 {
	if c.ringSize <= 0 {
		return 0
	}
	var lost int64
	if c.long {
		// A row read before is still in the ring: nothing newer fell out.
		if anyOld || (!c.filtered && len(keys) < c.ringSize) {
			return 0
		}
		for t, idx := range byThread {
			if m, ok := c.marks[t]; ok && !m.unread {
				lost += estimateLost(m.end, keys, idx)
			}
		}
		if c.filtered {
			return lost
		}
		// The whole ring turned over: at least one event fell out unseen,
		// even if no thread we knew shows a gap.
		return max(lost, 1)
	}
	for t, idx := range byThread {
		m, ok := c.marks[t]
		if !ok || m.unread || len(idx) < c.ringSize || anyOf(old, idx) {
			continue
		}
		lost += estimateLost(m.end, keys, idx)
	}
	return lost
}

func anyOf(flags []bool, idx []int) bool {
	for _, i := range idx {
		if flags[i] {
			return true
		}
	}
	return false
}

// estimateLost estimates how many events of one thread were dropped between
// its mark and its oldest surviving row. Events of all kinds share the
// thread's EVENT_ID counter, so an id gap is not a count of lost rows: the
// rows still present show how many ids one event normally takes (its own
// span END-EVENT+1 plus the ids other event kinds take before the next one,
// b), and the gap after the mark is b + lost*(span+b). With only this kind
// instrumented (b = 0, span = 1) the estimate is exact.
func estimateLost(mark uint64, keys []eventKey, idx []int) int64 {
	if len(idx) == 0 {
		return 0
	}
	rows := make([]eventKey, len(idx))
	for j, i := range idx {
		rows[j] = keys[i]
	}
	slices.SortFunc(rows, func(a, b eventKey) int { return cmp.Compare(a.EventID, b.EventID) })
	first := rows[0]
	if first.EventID <= mark+1 {
		return 0
	}
	gap := first.EventID - mark - 1
	between, per := idsPerEvent(rows)
	if gap <= between {
		return 0
	}
	return int64((gap - between + per/2) / per)
}

// idsPerEvent returns the median id gap between consecutive top-level rows
// (ids other event kinds take) and the median ids one event plus that gap
// take.
func idsPerEvent(rows []eventKey) (between, per uint64) {
	var gaps, spans []uint64
	for i := 0; i+1 < len(rows); i++ {
		a, b := rows[i], rows[i+1]
		if b.EventID <= a.end() { // b is nested in a (statement of a CALL)
			continue
		}
		g := b.EventID - a.end() - 1
		gaps = append(gaps, g)
		spans = append(spans, a.end()-a.EventID+1+g)
	}
	if len(spans) == 0 {
		last := rows[len(rows)-1]
		return 0, last.end() - last.EventID + 1
	}
	return median(gaps), max(median(spans), 1)
}

func median(v []uint64) uint64 {
	slices.Sort(v)
	return v[len(v)/2]
}

func (c *ringCursor) remember(keys []eventKey, byThread map[uint64][]int) {
	if c.inc == nil {
		for t := range c.marks {
			if _, ok := byThread[t]; !ok {
				// The whole table was read and the thread's rows left it
				// (thread ended, or its rows aged out of the global ring):
				// any row of it seen later is newer.
				delete(c.marks, t)
			}
		}
	}
	for _, k := range keys {
		m, ok := c.marks[k.Thread]
		if !ok || k.end() > m.end {
			m.end = k.end()
		}
		m.seen, m.unread = c.polls, false
		c.marks[k.Thread] = m
	}
}

// unread records that reads left thread out on purpose since its mark, so
// that its next gap is not counted as lost.
func (c *ringCursor) unread(thread uint64) {
	if m, ok := c.marks[thread]; ok {
		m.unread = true
		c.marks[thread] = m
	}
}

// forget drops the marks of threads that have ended (alive reports the
// threads performance_schema.threads still lists) and that the last read
// did not return. Such a thread runs nothing more, and its rows cannot be
// returned again: each was either outside that read's window, whose start
// only moves forward, or already gone from the ring. An incremental cursor
// keeps every other mark, since a thread absent from a filtered read may
// simply have been idle.
func (c *ringCursor) forget(alive func(thread uint64) bool) {
	for t, m := range c.marks {
		if m.seen < c.polls && !alive(t) {
			delete(c.marks, t)
		}
	}
}

func groupByThread(keys []eventKey) map[uint64][]int {
	out := map[uint64][]int{}
	for i, k := range keys {
		out[k.Thread] = append(out[k.Thread], i)
	}
	return out
}
