package join

import (
	"cmp"
	"slices"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// maxThreadMap bounds the learned THREAD_ID -> connection map.
const maxThreadMap = 65_536

// maxAnon bounds the rows held for attribution; past it they are counted
// as background at once. A pool closing two busy connections at the end of
// a burst leaves thousands of rows whose threads are gone.
const maxAnon = 16_384

// anonGraceUS is how long rows of an ended thread wait before they are
// attributed. On a loaded host the capture delivers a connection's wire
// statements after the poll that read their rows; a thread attributed
// while its own connection's statements were still missing would go to
// another busy connection that happened to fit.
const anonGraceUS = 50_000

// threadIDs identifies the threads whose connection performance_schema no
// longer names (the thread ended before its rows were read): the threads
// already attributed, the id offset that hints at the rest, and the rows
// waiting for attribution. The Joiner attributes them against its
// connections' pending wire statements (attributeAnon, connOfRows).
type threadIDs struct {
	// threads maps THREAD_ID -> connection id learned for rows read after
	// their connection ended (performance_schema forgets the mapping then).
	threads map[uint64]uint64
	// ids follows THREAD_ID − PROCESSLIST_ID, a hint for ended threads.
	ids idOffset
	// anon holds rows of ended threads not attributed yet: on a busy
	// capture their wire statement can arrive after the poll that read them.
	anon []anonRow
	// spans indexes the pending wire statements for connOfRows, built once
	// per attributeAnon pass (candidates.go).
	spans spanIndex
	// shifted is connOfRows' buffer of rows on the capture's clock.
	shifted []collect.ServerStatement
	// undecided is attributeAnon's buffer of the groups it retries.
	undecided []undecidedGroup
	// texts is connOfRows' buffer of the rows' text hashes.
	texts []uint64
	// byNamed is attributeSwaps' index, reused from pass to pass.
	byNamed map[uint64]int
	// partial: only a join sample's connections hand their statements in
	// (SetPartial).
	partial bool
}

// hold keeps r for attribution, false when it cannot be (no thread, no
// time, or the bound is reached: the caller counts it as background).
func (t *threadIDs) hold(r *collect.ServerStatement, nowUS int64) bool {
	if r.ThreadID == 0 || r.StartUS == 0 || len(t.anon) >= maxAnon {
		return false
	}
	t.anon = append(t.anon, anonRow{r: *r, added: nowUS})
	return true
}

// learn records thread's connection id.
func (t *threadIDs) learn(thread, id uint64) {
	if len(t.threads) >= maxThreadMap {
		clear(t.threads)
	}
	t.threads[thread] = id
}

// expire drops the held rows older than cutoff and returns how many.
func (t *threadIDs) expire(cutoff int64) (dropped int) {
	kept := t.anon[:0]
	for _, a := range t.anon {
		if a.added <= cutoff {
			dropped++
			continue
		}
		kept = append(kept, a)
	}
	clear(t.anon[len(kept):])
	t.anon = kept
	return dropped
}

// reset forgets every thread and the offset (a server restart: ids start
// over).
func (t *threadIDs) reset() {
	clear(t.threads)
	t.ids = idOffset{}
}

// undecidedGroup is an ended thread's rows, kept[lo:hi] in attributeAnon,
// that no connection took yet, with connOfRows' last verdict on them.
type undecidedGroup struct {
	lo, hi int
	taken  bool
	fit    anonFit
}

// anonRow is a server row of an ended thread waiting for its connection.
type anonRow struct {
	r     collect.ServerStatement
	added int64
}

// holdAnon keeps a row whose thread had ended before the row was read
// (performance_schema no longer says which connection it served: a
// short-lived connection often ends within one poll, and a pool closes
// idle connections right after a burst). attributeAnon finds its
// connection from the wire.
func (j *Joiner) holdAnon(r *collect.ServerStatement, nowUS int64) {
	if !j.thr.hold(r, nowUS) {
		j.stats.Background++
	}
}

// attributeAnon attributes the held rows thread by thread. A thread served
// one connection, so that connection's pending wire statements must fit
// all of the thread's rows: one point select fits any of four busy
// connections half the time, a thread's hundred rows fit only their own.
// Rows wait anonGraceUS after they were read unless force (end of run).
func (j *Joiner) attributeAnon(nowUS int64, force bool) {
	if len(j.thr.anon) == 0 {
		return
	}
	// Stable: a thread's rows keep their EVENT_ID order.
	slices.SortStableFunc(j.thr.anon, func(a, b anonRow) int { return cmp.Compare(a.r.ThreadID, b.r.ThreadID) })
	j.batch++
	j.thr.spans.stale = true // wire statements came and went since the last pass
	touched := j.touched[:0]
	kept := j.thr.anon[:0]
	undecided := j.thr.undecided[:0] // ranges of kept: ready, not attributed
	for lo := 0; lo < len(j.thr.anon); {
		hi := lo + 1
		for hi < len(j.thr.anon) && j.thr.anon[hi].r.ThreadID == j.thr.anon[lo].r.ThreadID {
			hi++
		}
		group := j.thr.anon[lo:hi]
		lo = hi
		id, known := j.thr.threads[group[0].r.ThreadID]
		if !known {
			if !force && !graceOver(group, nowUS) {
				kept = append(kept, group...)
				continue
			}
			fit := j.connOfRows(group)
			if id = fit.id; id == 0 {
				undecided = append(undecided, undecidedGroup{lo: len(kept), hi: len(kept) + len(group), fit: fit})
				kept = append(kept, group...)
				continue
			}
			j.attributed(group[0].r.ThreadID, id)
		}
		touched = j.assignRows(group, id, touched)
	}
	// Second chances: a connection that took a thread in this pass is no
	// longer a candidate for another (connOfRows), which may leave one.
	// Three connections opened at once can take their THREAD_IDs in
	// another order than their ids, and a thread that fitted all three
	// then fits the one the others did not take.
	for round, progress := 0, true; round < 3 && progress && len(undecided) > 0; round++ {
		progress = false
		for k := range undecided {
			g := &undecided[k]
			if g.taken {
				continue
			}
			group := kept[g.lo:g.hi]
			if g.fit = j.connOfRows(group); g.fit.id == 0 {
				continue
			}
			j.attributed(group[0].r.ThreadID, g.fit.id)
			touched = j.assignRows(group, g.fit.id, touched)
			g.taken, progress = true, true
		}
	}
	touched = j.attributeSwaps(kept, undecided, touched)
	// Drop what the second chances took (the ranges are in order).
	out, from := kept[:0], 0
	for _, g := range undecided {
		if g.taken {
			out = append(out, kept[from:g.lo]...)
			from = g.hi
		}
	}
	out = append(out, kept[from:]...)
	clear(j.thr.anon[len(out):])
	j.thr.anon = out
	j.thr.undecided = undecided[:0]
	j.settleBatch(touched, nowUS)
}

// maxSwapCycle bounds the connections a swap may reorder: as many as a
// client opens at once, in the field a handful.
const maxSwapCycle = 8

// attributeSwaps gives the threads the offset and the wire disagree on
// their connections when, together, they agree. Under a join sample the
// trusted offset decides (connOfRows), but connections opened at once can
// take their THREAD_IDs in another order than their ids: the threads the
// offset names for connections 26 and 27 serve 27 and 26. When a set of
// undecided threads fits, one each and nothing else, exactly the set of
// connections the offset names for them, the wire has shown the order. A
// connection left out of the sample has no wire statements, so it fits no
// thread and can take no part in a swap.
func (j *Joiner) attributeSwaps(kept []anonRow, undecided []undecidedGroup, touched []*connState) []*connState {
	// byNamed: the undecided thread the offset gives a connection, for the
	// threads whose rows fit another one alone (few: built per pass).
	byNamed := j.thr.byNamed
	clear(byNamed)
	for k, g := range undecided {
		if !g.taken && g.fit.named != 0 {
			if byNamed == nil {
				byNamed = map[uint64]int{}
				j.thr.byNamed = byNamed
			}
			byNamed[g.fit.named] = k
		}
	}
	if len(byNamed) < 2 {
		return touched // a swap takes two
	}
	named := func(conn uint64) int {
		if k, ok := byNamed[conn]; ok && !undecided[k].taken {
			return k
		}
		return -1
	}
	var cycle [maxSwapCycle]int
	for k := range undecided {
		if g := undecided[k]; g.taken || g.fit.named == 0 {
			continue
		}
		// Follow k's rows to the connection they fit, that connection's
		// thread by the offset to the connection its rows fit, and so on:
		// a swap comes back to k.
		n, m := 0, k
		for {
			cycle[n], n = m, n+1
			m = named(undecided[m].fit.only)
			if m < 0 || m == k || n == maxSwapCycle || slices.Contains(cycle[:n], m) {
				break
			}
		}
		if m != k || slices.ContainsFunc(cycle[:n], func(m int) bool { return !j.canTake(undecided[m].fit.only, kept[undecided[m].lo].r.ThreadID) }) {
			continue
		}
		for _, m := range cycle[:n] {
			g := &undecided[m]
			group := kept[g.lo:g.hi]
			j.attributed(group[0].r.ThreadID, g.fit.only)
			touched = j.assignRows(group, g.fit.only, touched)
			g.taken = true
		}
	}
	return touched
}

// canTake reports whether connection id can take thread's rows: no other
// thread's rows went to it (a second chance may have given it one since
// connOfRows looked).
func (j *Joiner) canTake(id, thread uint64) bool {
	c := j.conns[id]
	return c != nil && (c.thread == 0 || c.thread == thread)
}

// attributed records that the wire singled out thread's connection.
func (j *Joiner) attributed(thread, id uint64) {
	j.learnThread(thread, id)
	// What the wire singled out narrows the offset's ranges for the
	// threads after it (by THREAD_ID, the order of the pass): a thread
	// between two ranges is judged by the nearer evidence.
	j.thr.ids.observe(thread, id)
}

// assignRows hands a thread's rows to its connection, adding the
// connection to touched once per batch.
func (j *Joiner) assignRows(group []anonRow, id uint64, touched []*connState) []*connState {
	c := j.conn(id)
	c.thread = group[0].r.ThreadID
	for i := range group {
		base, shift := j.clk.clockOf(&group[i].r)
		j.pushRow(c, &group[i].r, id, base, shift, group[i].added)
	}
	if c.batch != j.batch {
		c.batch = j.batch
		touched = append(touched, c)
	}
	return touched
}

// graceOver: the newest row of the group was read anonGraceUS ago.
func graceOver(group []anonRow, nowUS int64) bool {
	var newest int64
	for i := range group {
		newest = max(newest, group[i].added)
	}
	return nowUS-newest >= anonGraceUS
}

// idOffset follows THREAD_ID − PROCESSLIST_ID over the rows whose thread
// still named its connection. Both ids count up as connections open, so
// while the server starts no thread of its own the difference stays the
// same from one connection to the next (MariaDB and MySQL give every new
// connection the next of each); when it starts one (InnoDB starts workers
// on demand, each taking a THREAD_ID) the difference grows by one from
// that thread on. So the offset is kept per range of threads: each
// segment holds the threads observed with one offset, in THREAD_ID order.
// An ended thread is judged by the offset of its own range, not by the
// newest (a busy capture attributes threads a second after they ended,
// when hundreds of newer ones carry the next offset). It is a hint, never
// proof: it only picks among connections whose wire statements fit an
// ended thread's rows.
type idOffset struct {
	segs   []offsetSeg // by lo, not overlapping
	thread uint64      // the last thread counted
}

// offsetSeg: threads lo..hi were observed with THREAD_ID − PROCESSLIST_ID
// = off, n distinct observations.
type offsetSeg struct {
	lo, hi uint64
	off    int64
	n      int
}

// idOffsetAgree is how many observations a range needs before its offset
// is trusted past its last thread.
const idOffsetAgree = 3

// maxOffsetSegs bounds the ranges kept: the oldest go first (their
// threads' rows were attributed or given up long since).
const maxOffsetSegs = 64

// seg returns the index of the last range starting at or before thread
// (-1: none).
func (o *idOffset) seg(thread uint64) int {
	i, _ := slices.BinarySearchFunc(o.segs, thread, func(s offsetSeg, t uint64) int { return cmp.Compare(s.lo, t+1) })
	return i - 1
}

// observe counts a live thread's pair. A pair that contradicts the range
// around it (two connections opened at once can take their THREAD_IDs in
// the other order) is ignored; one past a range with another offset starts
// a new range.
func (o *idOffset) observe(thread, conn uint64) {
	if thread == o.thread || conn == 0 {
		return
	}
	o.thread = thread
	d := int64(thread) - int64(conn)
	i := o.seg(thread)
	switch {
	case i >= 0 && o.segs[i].off == d:
		o.segs[i].hi = max(o.segs[i].hi, thread)
		o.segs[i].n++
	case i >= 0 && thread <= o.segs[i].hi:
		return // contradicts its range
	case i+1 < len(o.segs) && o.segs[i+1].off == d:
		o.segs[i+1].lo = thread
		o.segs[i+1].n++
	default:
		o.segs = slices.Insert(o.segs, i+1, offsetSeg{lo: thread, hi: thread, off: d, n: 1})
		if len(o.segs) > maxOffsetSegs {
			o.segs = slices.Delete(o.segs, 0, 1)
		}
	}
}

// idHint is what the offset says of an ended thread's connection: id when
// trusted; between two ranges with different offsets, one of id and alt
// (the server started a thread of its own in between, where is unknown).
type idHint struct {
	id, alt uint64
	trusted bool
}

// hint judges thread by its range: inside a range observed twice or more
// its offset is trusted, past the newest range when it was observed
// idOffsetAgree times; between two ranges it names both candidates.
func (o *idOffset) hint(thread uint64) idHint {
	i := o.seg(thread)
	if i < 0 {
		return idHint{}
	}
	s := o.segs[i]
	conn := func(off int64) uint64 {
		if c := int64(thread) - off; c > 0 {
			return uint64(c)
		}
		return 0
	}
	switch {
	case thread <= s.hi:
		return idHint{id: conn(s.off), trusted: s.n >= 2 && conn(s.off) > 0}
	case i == len(o.segs)-1:
		return idHint{id: conn(s.off), trusted: s.n >= idOffsetAgree && conn(s.off) > 0}
	default:
		return idHint{id: conn(s.off), alt: conn(o.segs[i+1].off)}
	}
}

// pick is the connection of fits the hint names: the trusted one, or the
// only one of the two candidates between ranges (0: none).
func (h idHint) pick(fits func(uint64) bool) uint64 {
	switch {
	case h.trusted:
		if fits(h.id) {
			return h.id
		}
	case h.alt != 0:
		a, b := h.id != 0 && fits(h.id), fits(h.alt)
		if a != b {
			if a {
				return h.id
			}
			return h.alt
		}
	}
	return 0
}

// informed: the hint says something (trusted, or two candidates).
func (h idHint) informed() bool { return h.trusted || h.alt != 0 }

// ObserveThread tells the joiner a live thread's connection (read from
// the threads table), for the id offset that names ended threads'.
func (j *Joiner) ObserveThread(thread, conn uint64) {
	j.mu.Lock()
	j.thr.ids.observe(thread, conn)
	j.mu.Unlock()
}

// SetPartial tells the joiner whether it is given the wire statements of
// only some connections (a join sample): an ended thread's rows then go
// only where a trusted id offset names the connection they fit.
func (j *Joiner) SetPartial(on bool) {
	j.mu.Lock()
	j.thr.partial = on
	j.mu.Unlock()
}

func (j *Joiner) learnThread(thread, id uint64) {
	j.thr.learn(thread, id)
	j.stats.ThreadsLearned++
}

// connOfRows finds the connection whose pending wire statements hold the
// rows of one ended thread (anonFit.id, 0 when the evidence does not single
// one out). Per connection it counts the rows that fit one of its statements
// (hits), those that fit none even with the matching tolerance (misses),
// and those that start outside their statement's window by more than the
// clock's uncertainty (off). On busy connections the tolerance (the
// calibration error plus slack) can exceed the gap between statements, so
// another connection may fit every row within it; it does not put them
// inside its windows. A row whose only fit is a command still waiting for
// its bound (last on its connection, without a response: a COM_QUIT) is
// no evidence either way: such a command fits any later row, and the
// server may start a COM_QUIT milliseconds after reading it.
//   - A connection is a candidate with at least one hit and at most one
//     miss in twenty rows (none below twenty: a wire statement given up
//     already, a row read late).
//   - A short thread (under ten rows) must have exactly one candidate.
//   - A long thread goes to the candidate that is off for at most one row
//     in twenty, and for at least one row in ten fewer than any other.
func (j *Joiner) connOfRows(rows []anonRow) anonFit {
	n := len(rows)
	allow := n / 20
	type tally struct {
		id  uint64
		off int
	}
	// The rows on the capture's clock, once for every connection tried.
	j.thr.shifted = slices.Grow(j.thr.shifted[:0], n)[:n] // reused: a burst's ended threads hold thousands of rows
	shifted := j.thr.shifted
	defer clear(shifted) // keep no texts alive between calls
	j.thr.texts = slices.Grow(j.thr.texts[:0], n)[:n]
	texts := j.thr.texts
	for i := range rows {
		shifted[i] = rows[i].r
		_, shift := j.clk.clockOf(&shifted[i])
		shifted[i].StartUS, shifted[i].EndUS = shifted[i].StartUS-shift, shifted[i].EndUS-shift
		texts[i] = sqltext.TextHashString(rows[i].r.SQLText)
	}
	var fits []tally
	for _, id := range j.candidates(shifted) {
		c := j.conns[id]
		if c == nil || c.wires.len() == 0 || c.thread != 0 && c.thread != rows[0].r.ThreadID {
			continue // a connection another thread served is not this one's
		}
		hits, miss, off := 0, 0, 0
		for i := range shifted {
			switch k, fit := j.nearestWire(c, &shifted[i]); {
			case k >= 0 && latestStart(c, k) >= noEnd:
				// no evidence (see above)
			case k < 0 || fit > j.clk.fitTolUS || !sqltext.SameText(c.wires.at(k).s.TextHash, texts[i]):
				// Three connections opened at once run the same point select
				// within the same milliseconds: by time their ended threads'
				// rows fit each other's statements, by their literals not.
				miss++
			default:
				hits++
				if fit > j.clk.errUS {
					off++
				}
			}
			if miss > allow || n >= 10 && off > 3*n/20 {
				break // neither the best nor close enough to it to matter
			}
		}
		if hits > 0 && miss <= allow && (n < 10 || off <= 3*n/20) {
			fits = append(fits, tally{id, off})
		}
	}
	hint := j.thr.ids.hint(rows[0].r.ThreadID)
	fitting := func(id uint64) bool { return slices.ContainsFunc(fits, func(f tally) bool { return f.id == id }) }
	if j.thr.partial && hint.informed() {
		// Under a join sample the connections left out have no wire
		// statements here, so an ended thread of theirs can fit one that is
		// in, alone: an offset that names another connection says whose it
		// is. (Without one, the fit decides as below.)
		if id := hint.pick(fitting); id != 0 || !hint.trusted || len(fits) != 1 {
			return anonFit{id: id}
		}
		return anonFit{named: hint.id, only: fits[0].id} // a swap, perhaps (attributeSwaps)
	}
	if len(fits) > 1 {
		// Several connections fit: the id offset may single one out.
		if id := hint.pick(fitting); id != 0 {
			return anonFit{id: id}
		}
	}
	switch {
	case len(fits) == 0:
		return anonFit{}
	case n < 10:
		if len(fits) == 1 {
			return anonFit{id: fits[0].id}
		}
		return anonFit{} // two connections fit: do not guess
	}
	slices.SortFunc(fits, func(a, b tally) int { return a.off - b.off })
	if fits[0].off > n/20 || len(fits) > 1 && fits[1].off-fits[0].off < max(n/10, 1) {
		return anonFit{}
	}
	return anonFit{id: fits[0].id}
}

// anonFit is connOfRows' verdict on an ended thread's rows: id, the
// connection, or 0 when the evidence does not single one out. Under a
// join sample, when the trusted offset named a connection the rows do not
// fit while they fit one other alone, named and only say which.
type anonFit struct {
	id, named, only uint64
}

// nearestWireScan bounds how many wire statements nearestWire looks at
// before the row's start: a connection runs one statement at a time, so
// only the last few can hold a row that started then.
const nearestWireScan = 8

// nearestWire is bestWire restricted to fits within fitTolUS, over the few
// pending wire statements that can hold the row, found by binary search:
// attribution tries every row of a thread against every busy connection,
// which must not cost the whole pending queue each time.
func (j *Joiner) nearestWire(c *connState, r *collect.ServerStatement) (best int, fit int64) {
	// A fit within fitTolUS needs TReqLast, hence TReqFirst, no later than
	// S + fitTolUS: find the first statement past that.
	lo, hi := 0, c.wires.len()
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.wires.at(m).s.TReqFirst-j.clk.fitTolUS > r.StartUS {
			hi = m
		} else {
			lo = m + 1
		}
	}
	best, fit = -1, noEnd
	for i := lo - 1; i >= 0 && i >= lo-nearestWireScan; i-- {
		f, ok := j.wireFit(c, i, r, 0) // the callers judge the texts themselves
		if ok && f <= fit {
			best, fit = i, f
		}
		if s := c.wires.at(i).s; s.HasResponse() && AnswerStart(s)+j.clk.fitTolUS < r.StartUS {
			break // answered before the row started: earlier ones were too
		}
	}
	return best, fit
}

// expireAnon gives up held rows older than cutoff: background threads, or
// connections whose statements never reached the wire.
func (j *Joiner) expireAnon(cutoff int64) {
	// Counted, not reported: an ended thread's row that no wire statement
	// took may be a connection's the capture did carry (its statements
	// late, given up, or sampled out) as well as a unix socket's or a
	// server thread's; reported as a statement of its own it would count
	// twice. Socket threads are known while they live (AddServer reports
	// theirs).
	j.stats.Background += int64(j.thr.expire(cutoff))
}
