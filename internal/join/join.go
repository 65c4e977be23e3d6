// Package join matches the statements seen on the wire (capture) with the
// statements the server recorded (performance_schema, via collect) and
// splits each statement's client-seen time into request, queue, exec,
// send-stall and delivery (docs/events.md).
//
// Matching is per connection and in order: the server runs one statement at
// a time per connection, so a server row belongs to the oldest pending wire
// statement of its connection whose time window and command agree with it.
// Both sides may arrive first (capture lags behind, or the poller does), so
// both are buffered, for at most MaxWait and at most MaxPending items.
//
// The server's times reach the joiner converted by collect's clock
// calibration, which on a loaded host can be off by more than it claims;
// on a busy connection tens of µs are enough to pair rows with their
// neighbours. The joiner therefore learns the server clock's true origin
// from the pairs themselves and keeps it up to date (offset.go, calib.go).
//
// The Joiner holds the lock and the connections' pending items, and
// matches them (this file). Each other concern is a type with its own
// state: the server clock as learnt and the tolerances it sets
// (joinClock, calib.go), the threads performance_schema no longer names
// (threadIDs, threads.go, candidates.go), the buffered items in arrival
// order for giving up (heldItems, giveup.go), and the client addresses'
// connection ids (addrBook, addrs.go).
package join

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// Options tune a Joiner. Zero values pick the defaults.
type Options struct {
	// MaxWait is how long a statement waits for its counterpart before it is
	// given up (wire: emitted with joined=false; server: counted). Default 5 s.
	MaxWait time.Duration
	// MaxPending bounds the wire statements plus server rows held; above it
	// the oldest are given up early. Default 100,000.
	MaxPending int
	// CalibrationErrorUS is the clock calibration's claimed uncertainty;
	// it widens the matching window and is the threshold for clamp notes
	// until the joiner has learnt the clock's offset from matched pairs
	// (then the learnt error takes its place; see offset.go).
	CalibrationErrorUS int64
	// SlackUS widens the matching window on top of the calibration error to
	// absorb timer rounding and the capture point's distance from the
	// server. Default 1,000 µs.
	SlackUS int64
	// PostSendUS is how long after the last response byte a server row may
	// end and still match while the connection's next statement has not
	// been seen (the server records TIMER_END after sending; see
	// ServerTailUS); once it has, the next statement's answer bounds the
	// end instead. Default 5,000 µs.
	PostSendUS int64
	// FitSlackUS: a server row whose start lies outside its wire
	// statement's gap between last request byte and first response byte by
	// more than CalibrationErrorUS + FitSlackUS is matched only when no
	// better candidate can come any more (at expiry). Default 100 µs.
	FitSlackUS int64
	// ThreadPoolSize, when > 0, sets PoolGroup = conn_id % size.
	ThreadPoolSize int
	// Partial: the server's rows come for a sample of the connections
	// (SetPartial changes it).
	Partial bool
	// MaxConnMap bounds the client-address → connection-id map fed by
	// MapConn. Default 65,536.
	MaxConnMap int
	// SearchUS is how far from collect's calibration the joiner looks for
	// the server clock's true origin while it learns it (see offset.go).
	// Default 5,000 µs, at least 4 × CalibrationErrorUS.
	SearchUS int64
	// LearnWait bounds how long matching waits for the origin to be
	// learnt when the claimed calibration looks wrong; after it, rows are
	// matched with the claimed one. Default 2 s.
	LearnWait time.Duration
	// KeepLiterals keeps the literals in the text of the server-only
	// statements the joiner reports (a unix socket's), as the capture
	// keeps them in the wire's (ServerText).
	KeepLiterals bool
}

func (o Options) withDefaults() Options {
	if o.MaxWait <= 0 {
		o.MaxWait = 5 * time.Second
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 100_000
	}
	if o.SlackUS <= 0 {
		o.SlackUS = 1000
	}
	if o.PostSendUS <= 0 {
		o.PostSendUS = 5000
	}
	if o.FitSlackUS <= 0 {
		o.FitSlackUS = 100
	}
	if o.MaxConnMap <= 0 {
		o.MaxConnMap = 65_536
	}
	o.CalibrationErrorUS = max(o.CalibrationErrorUS, 0)
	if o.SearchUS <= 0 {
		o.SearchUS = max(5000, 4*o.CalibrationErrorUS)
	}
	if o.LearnWait <= 0 {
		o.LearnWait = 2 * time.Second
	}
	return o
}

// Stats counts what the joiner did.
type Stats struct {
	Wire, Server, Joined, UnjoinedWire, UnmatchedServer int64
	// ClampedStart / ClampedEnd count joins whose server start / end had to
	// move by more than the clock's uncertainty (OffsetErrorUS) to fit the
	// wire window. A clamped end is mostly the server's tail after the send
	// (ServerTailUS).
	ClampedStart, ClampedEnd int64
	// Nested counts server rows of statements inside stored programs
	// (they belong to their top-level CALL and are never matched).
	Nested int64
	// Background counts server rows without a connection: background
	// threads, and ended threads no connection on the wire could be
	// identified for.
	Background int64
	// Merged counts extra server rows absorbed by a multi-statement query.
	Merged int64
	// Streams counts rows of replicas' binlog streams (a COM_BINLOG_DUMP,
	// written when the replica left, its TIMER_WAIT the stream's life): no
	// statement, never matched; the wire reported the stream as it began.
	Streams int64
	// UnmatchedByReason splits UnmatchedServer by why no wire statement
	// took the row, by the reason's name (the reasons of kind event.KindUnmatchedRow).
	UnmatchedByReason map[string]int64
	// NotOnWire counts server rows emitted as statements of their own
	// because their client was not on the captured wire (a unix socket).
	NotOnWire int64
	// Withheld counts joins whose split the evidence could not explain
	// (guard.go): matched, but emitted without the split.
	Withheld int64
	// WireSplit counts pipelined statements whose row no read returned,
	// split from the wire alone (pipeline.go): not in Joined, which counts
	// server rows.
	WireSplit int64
	// Evicted counts items given up before MaxWait because of MaxPending.
	Evicted int64
	// Expired counts items given up by Flush because their counterpart did
	// not come within MaxWait (one side lagging the other by that much),
	// as opposed to those the other side's progress showed to be orphans.
	Expired int64
	// ThreadsLearned counts threads attributed to a connection from the
	// wire because they had ended before their rows were read.
	ThreadsLearned int64
	// OffsetUS is the server clock's residual offset the joiner learnt
	// from matched pairs and applies to rows: server time (after collect's
	// calibration) minus capture time; 0 until learnt. OffsetErrorUS is
	// how far the truth may lie from it (the matching tolerance), and
	// OffsetSamples how many pairs agree on it.
	OffsetUS, OffsetErrorUS int64
	OffsetSamples           int
}

// Joiner pairs wire statements with server statements. It is safe for
// concurrent use; emit is called with the joiner's lock held, so it must not
// call back into the Joiner.
type Joiner struct {
	mu   sync.Mutex
	opts Options
	// clk is what the joiner knows of the server clock: the origin it
	// learns from matched pairs, the tolerances that follow, and whether
	// matching waits for it (calib.go).
	clk joinClock
	// thr identifies the threads whose connection performance_schema no
	// longer names (threads.go).
	thr  threadIDs
	emit func(*event.Statement)
	// The connections' pending items, matched in order (this file).
	conns   map[uint64]*connState
	orphans map[string]*connState // wire statements whose connection id is not known yet
	addrs   addrBook
	free    []*connState
	groups  []int        // PoolGroup targets, shared by all statements of a group
	touched []*connState // connections with new rows in the current AddServer batch
	order   []int        // AddServer's rows by start (reused)
	batch   uint64
	// readAt is when the latest read of the server's statements began:
	// every statement that ended before it was in that read or an earlier
	// one. A multi-statement query waits for a read that began after its
	// answer (and the server's tail), so that all its rows are there.
	readAt int64
	// held is what is buffered, in arrival order, for giving up
	// (giveup.go).
	held heldItems
	seq  uint64
	// unmatchedBy counts the server rows no wire statement took, by reason.
	unmatchedBy event.ReasonCounts
	stats       Stats
	// text gives the statements reported without a wire half their text
	// (made at the first).
	text *ServerText
	// answers keeps the latest answer of the connections released while
	// their next statement may still come (pipeline.go).
	answers map[uint64]answerSpan
}

type wireItem struct {
	s   *event.Statement
	seq uint64
	// prev is the connection's answer before s's (pipeline.go): the
	// server started s after it began that one.
	prev answerSpan
}

type rowItem struct {
	r    collect.ServerStatement
	seq  uint64
	done bool // matched; popped once it reaches the front
	// base is collect's origin for this row, shift what was subtracted
	// from its times to put them on the capture clock; timed is false for
	// a row without times (collect had no calibration).
	base, shift int64
	timed       bool
	// shape is the fingerprint of the row's text once rowShape computed it
	// (shaped), for the votes that learn the clock.
	shape  string
	shaped bool
	// text is the TextHash of the row's SQLText: a row is tried against
	// its connection's statements at each settle, and hashed once.
	text uint64
}

// raw is the row's start on the server's own timer (µs since its origin).
func (it *rowItem) raw() int64 { return it.r.StartUS + it.shift - it.base }

// ageRef points at a buffered item from the arrival-order queue. An item
// that was matched meanwhile is recognised by its sequence number being
// older than its connection's front.
type ageRef struct {
	c      *connState
	gen    uint64
	seq    uint64
	added  int64
	server bool
}

// connState holds one connection's pending items.
type connState struct {
	id    uint64
	addr  string // orphan key, when id is not known
	gen   uint64
	batch uint64 // last AddServer batch that touched it
	// lastReqFirst / lastRowStart are the newest times seen on each side;
	// what is older than the other side's newest can no longer match.
	lastReqFirst, lastRowStart int64
	// answerMax is the latest first answer byte of any wire statement
	// pushed (kept after pops: a bound only needs to be safe).
	answerMax int64
	// last is the newest wire statement's answer, the next one's prev
	// (pipeline.go); kept across a release in Joiner.answers.
	last answerSpan
	// thread is the THREAD_ID whose rows it was given (0: none yet): a
	// connection is served by one thread, so another ended thread's rows
	// are not its.
	thread uint64
	wires  fifo[wireItem]
	rows   fifo[rowItem]
}

func (c *connState) empty() bool { return c.wires.len() == 0 && c.rows.len() == 0 }

// New returns a Joiner that passes every wire statement to emit exactly
// once, joined or not.
func New(opts Options, emit func(*event.Statement)) *Joiner {
	opts = opts.withDefaults()
	j := &Joiner{
		opts:    opts,
		emit:    emit,
		conns:   make(map[uint64]*connState),
		orphans: make(map[string]*connState),
		addrs:   addrBook{ids: make(map[string]uint64), max: opts.MaxConnMap},
		thr:     threadIDs{threads: make(map[uint64]uint64), partial: opts.Partial},
		clk:     newJoinClock(opts),
	}
	if opts.ThreadPoolSize > 0 {
		j.groups = make([]int, opts.ThreadPoolSize)
		for i := range j.groups {
			j.groups[i] = i
		}
	}
	return j
}

// Stats returns the counters so far.
func (j *Joiner) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	st := j.stats
	st.UnmatchedByReason = j.unmatchedBy.Map()
	st.OffsetUS, st.OffsetErrorUS, st.OffsetSamples = j.clk.offset()
	return st
}

// Pending returns how many wire statements and server rows are buffered.
func (j *Joiner) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.held.pending
}

// Holds reports whether anything waits for Flush: statements or rows
// buffered, or rows of ended threads not attributed yet.
func (j *Joiner) Holds() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.held.pending > 0 || len(j.thr.anon) > 0
}

// AddWire takes a wire statement (the Joiner keeps it until it is emitted).
// Statements of one connection must arrive in order, as the capture emits
// them. nowUS is the caller's clock, used only for expiry.
func (j *Joiner) AddWire(s *event.Statement, nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stats.Wire++
	var addr string
	if s.ConnID == 0 || s.Cmd == "COM_QUIT" {
		addr = clientAddr(s.Conn)
	}
	if s.ConnID == 0 && addr != "" {
		s.ConnID = j.addrs.ids[addr]
	}
	if s.Cmd == "COM_QUIT" && addr != "" {
		delete(j.addrs.ids, addr) // the port may be reused by another connection
	}
	var c *connState
	switch {
	case s.ConnID != 0:
		c = j.conn(s.ConnID)
	case addr != "":
		c = j.orphan(addr)
	default:
		j.unjoined(s, event.NoConn)
		return
	}
	j.pushWire(c, s, nowUS)
	if c.id != 0 {
		if j.clk.off.learning() && j.clk.off.wantsVote(j.seq) {
			j.voteWire(c, c.wires.len()-1)
		}
		j.settle(c, false)
	}
	j.enforceBound()
}

// AddServer takes server statements (copied; the slice may be reused).
// Rows of one connection must come in EVENT_ID order across calls, as a
// history cursor returns them; within a call any order is accepted.
// nowUS is when the read that returned them began (capture clock): every
// statement that ended before then is in rows or in an earlier call.
func (j *Joiner) AddServer(rows []collect.ServerStatement, nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.readAt = max(j.readAt, nowUS)
	j.addServer(rows, nowUS)
}

// AddThreadRows takes rows of a partial read (a few threads' statements,
// from some time on), which says nothing of the statements it left out:
// unlike AddServer's, its time does not tell a multi-statement query that
// its rows are all in.
func (j *Joiner) AddThreadRows(rows []collect.ServerStatement, nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.addServer(rows, nowUS)
}

func (j *Joiner) addServer(rows []collect.ServerStatement, nowUS int64) {
	j.batch++
	touched := j.touched[:0]
	for _, i := range j.startOrder(rows) {
		j.stats.Server++
		if rows[i].NestingType == "STATEMENT" || rows[i].NestingLevel > 0 {
			j.stats.Nested++
			continue
		}
		r := &rows[i]
		if StreamEvent(r.EventName) { // a replica's binlog stream, over TCP or the socket
			j.stats.Streams++
			continue
		}
		if r.Socket {
			j.notOnWire(r, event.UnixSocket) // no capture sees a unix socket
			continue
		}
		base, shift := j.clk.clockOf(r)
		id := r.ConnID
		j.thr.ids.observe(r.ThreadID, id)
		if id == 0 {
			// Rare: a thread that ended before its rows were read.
			if id = j.thr.threads[r.ThreadID]; id == 0 {
				j.holdAnon(r, nowUS)
				continue
			}
		}
		c := j.conn(id)
		c.thread = r.ThreadID
		j.pushRow(c, r, id, base, shift, nowUS)
		if c.batch != j.batch {
			c.batch = j.batch
			touched = append(touched, c)
		}
	}
	j.settleBatch(touched, nowUS)
	j.attributeAnon(nowUS, false)
	j.enforceBound()
}

// settleBatch matches the connections a batch of rows touched, once the
// whole batch is buffered: the rows of a multi-statement query must all
// be there to be absorbed together, and while the clock offset is still
// being learnt the batch's votes decide it before anything is matched.
func (j *Joiner) settleBatch(touched []*connState, nowUS int64) {
	if j.clk.off.learning() && j.decide(nowUS) {
		clear(touched)
		touched = touched[:0] // every connection is settled already
	}
	for _, c := range touched {
		j.settle(c, false)
		j.catchUp()
	}
	clear(touched)
	j.touched = touched[:0]
}

// startOrder returns the indexes of rows by start (then EVENT_ID). A
// history table is read in ring order, so once the ring has wrapped a
// poll returns its newest rows first: pushed as they come, every older row
// would sort back past all the newer ones: quadratic, a large share of
// watch's CPU at saturation (docs/performance.md, "The joiner's CPU").
func (j *Joiner) startOrder(rows []collect.ServerStatement) []int {
	order := j.order[:0]
	for i := range rows {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(rows[a].StartUS, rows[b].StartUS); c != 0 {
			return c
		}
		return cmp.Compare(rows[a].EventID, rows[b].EventID)
	})
	j.order = order
	return order
}

// ConnOf returns the connection id of a wire connection
// ("client>server"): the capture's, or what MapConn learnt; 0 if unknown.
func (j *Joiner) ConnOf(conn string) uint64 {
	addr := clientAddr(conn)
	if addr == "" {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.addrs.ids[addr]
}

// MapConn tells the joiner the connection id of a client address, for
// connections opened before the capture started (no handshake seen):
// processlist HOST "ip:port" -> ID. "localhost:port" is taken as 127.0.0.1.
func (j *Joiner) MapConn(clientAddr string, connID uint64) {
	if connID == 0 {
		return
	}
	addr := canonicalAddr(clientAddr)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.addrs.set(addr, connID)
	if o := j.orphans[addr]; o != nil {
		delete(j.orphans, addr)
		j.adopt(o, connID)
	}
}

func (j *Joiner) conn(id uint64) *connState {
	if c := j.conns[id]; c != nil {
		return c
	}
	c := j.newConn()
	c.id = id
	if last, ok := j.answers[id]; ok {
		c.last = last
		delete(j.answers, id)
	}
	j.conns[id] = c
	return c
}

func (j *Joiner) orphan(addr string) *connState {
	if c := j.orphans[addr]; c != nil {
		return c
	}
	c := j.newConn()
	c.addr = addr
	j.orphans[addr] = c
	return c
}

// newConn reuses a released connState. Its generation changes so that
// age references to its previous life are recognised as stale.
func (j *Joiner) newConn() *connState {
	if n := len(j.free); n > 0 {
		c := j.free[n-1]
		j.free = j.free[:n-1]
		return c
	}
	return &connState{}
}

// release forgets an empty connection.
func (j *Joiner) release(c *connState) {
	if !c.empty() {
		return
	}
	if c.id != 0 {
		if j.conns[c.id] == c {
			delete(j.conns, c.id)
			j.keepAnswered(c)
		}
	} else if j.orphans[c.addr] == c {
		delete(j.orphans, c.addr)
	}
	c.wires.release(freeKeep)
	c.rows.release(freeKeep)
	*c = connState{gen: c.gen + 1, wires: c.wires, rows: c.rows}
	if len(j.free) < maxFree {
		j.free = append(j.free, c)
	}
}

// The released connections kept for reuse, and the items of storage each
// keeps. A released connection's queues are empty; what they kept is only
// for the next connection's first items. Kept whole, a connection-per-batch
// load left every free connection holding its rows' array, and the heap
// grew with the churn (docs/performance.md, "The joiner's CPU").
const (
	maxFree  = 256
	freeKeep = 16
)

func (j *Joiner) pushWire(c *connState, s *event.Statement, nowUS int64) {
	j.seq++
	c.wires.push(wireItem{s: s, seq: j.seq, prev: c.last})
	c.lastReqFirst = max(c.lastReqFirst, s.TReqFirst)
	if s.HasResponse() {
		c.answerMax = max(c.answerMax, AnswerStart(s))
		c.last = answeredOf(s)
	}
	j.held.age.push(ageRef{c: c, gen: c.gen, seq: j.seq, added: nowUS})
	j.held.pending++
}

// repushWire pushes a wire statement taken off a queue again, with the
// answer that preceded it on its own connection.
func (j *Joiner) repushWire(c *connState, w wireItem, nowUS int64) {
	j.pushWire(c, w.s, nowUS)
	c.wires.back().prev = w.prev
}

// inOrder reports whether r comes from the stream that returns each
// connection's rows in order (the history_long cursor). A row read for a
// statement that stood out, from its thread's own history or its thread's
// rows in history_long, can come before the rows of the statements its
// connection ran just before it: it must not tell the joiner that those
// will never come.
func inOrder(r *collect.ServerStatement) bool {
	return !r.Targeted && (r.Source == "" || r.Source == collect.SourceHistoryLong)
}

func rowLess(a, b *rowItem) bool {
	if a.r.StartUS != b.r.StartUS {
		return a.r.StartUS < b.r.StartUS
	}
	return a.r.EventID < b.r.EventID
}

// pushRow buffers a copy of r for connection id, its times moved onto the
// capture clock by shift (see clockOf).
func (j *Joiner) pushRow(c *connState, r *collect.ServerStatement, id uint64, base, shift int64, nowUS int64) {
	j.seq++
	c.rows.push(rowItem{r: *r, seq: j.seq, base: base, shift: shift, timed: r.StartUS != 0, text: sqltext.TextHashString(r.SQLText)})
	it := c.rows.back()
	it.r.ConnID, it.r.StartUS, it.r.EndUS = id, it.r.StartUS-shift, it.r.EndUS-shift
	if inOrder(&it.r) {
		c.lastRowStart = max(c.lastRowStart, it.r.StartUS)
	}
	i := c.rows.sortBack(rowLess)
	j.held.age.push(ageRef{c: c, gen: c.gen, seq: j.seq, added: nowUS, server: true})
	j.held.pending++
	if j.clk.off.learning() && c.id != 0 && j.clk.off.wantsVote(j.seq) {
		j.voteRow(c, c.rows.at(i))
	}
}

// adopt gives an orphan's wire statements their connection id and matches
// them against whatever the server side already buffered.
func (j *Joiner) adopt(o *connState, id uint64) {
	c := j.conns[id]
	if c == nil {
		o.id, o.addr = id, ""
		j.conns[id] = o
		for i := 0; i < o.wires.len(); i++ {
			o.wires.at(i).s.ConnID = id
		}
		j.settle(o, false)
		return
	}
	// Both sides already exist (rare): move the wire statements over. Their
	// age references stay with the orphan, so re-register them.
	for o.wires.len() > 0 {
		w := o.wires.pop()
		w.s.ConnID = id
		j.held.pending--
		j.repushWire(c, w, j.held.ageOf(o))
	}
	j.release(o)
	j.settle(c, false)
}

// settle matches what can be matched on one connection, and gives up what
// the other side has already moved past. A row that fits its best wire
// statement only after clamping by more than the fit tolerance is left
// for later: the wire statement it really belongs to may not have arrived
// yet (its own row was lost, or it is a statement the capture missed).
// force (expiry) matches such rows with their best fit anyway.
func (j *Joiner) settle(c *connState, force bool) {
	if j.clk.holding && !force {
		return
	}
	// Rows are sorted by start, and no row can fit a wire statement whose
	// answer began more than the tolerance before the row started: the
	// rows past the latest answer wait for wire statements not seen yet.
	// Stopping there keeps a settle linear in what can match, not in what
	// is buffered (a lagging side would otherwise make every expiry scan
	// every buffered row).
	limit := j.latestAnswer(c)
	for i := 0; i < c.rows.len(); i++ {
		it := c.rows.at(i)
		if it.timed && it.r.StartUS > limit {
			break
		}
		if it.done {
			continue
		}
		k, fit := j.bestWire(c, it)
		if k < 0 || (fit > j.clk.fitTolUS && !force) {
			continue
		}
		if !force && j.rowsMayFollow(c.wires.at(k).s) {
			break // its other rows are not read yet: this connection waits
		}
		if !inOrder(&it.r) {
			// Read from its thread for an outlier: the rows of the
			// statements its connection ran before it may still be on
			// their way in history_long, so theirs wait.
			j.held.pending--
			j.join(c, i, c.wires.take(k))
			continue
		}
		// The statements before it: rows come in order, so theirs will
		// not come from history_long. An outlier's may still come from a
		// read of its thread (giveUpLost): it waits.
		at := 0
		for range k {
			if c.wires.at(at).s.Outlier {
				at++
				continue
			}
			j.giveUpWireAt(c, at, event.NoRow)
		}
		j.held.pending--
		j.join(c, i, c.wires.take(at))
	}
	j.dropDeadRows(c)
	j.dropSupersededWires(c)
	j.release(c)
}

// rowsMayFollow reports whether s may have more server rows than the
// reads so far hold: a query that can carry several statements, answered
// less than multiSettleUS (or the end tolerance) before the latest read
// began.
func (j *Joiner) rowsMayFollow(s *event.Statement) bool {
	return multiStatement(s.Cmd) && mayHoldMore(s.SQL) && s.HasResponse() && j.readAt < s.TRespLast+max(j.clk.endTolUS, multiSettleUS)
}

// multiSettleUS is the least time after a multi-statement query's answer
// before a read is trusted to hold its last row: on a loaded host the
// server records a statement's end milliseconds after its last send, and
// a join on the first rows alone would read the rest as delivery.
const multiSettleUS = 100_000

// latestAnswer bounds the start of any row that can still fit one of c's
// pending wire statements: below every start when there are none, none
// while the newest has no answer of its own (its bound is the next answer).
func (j *Joiner) latestAnswer(c *connState) int64 {
	n := c.wires.len()
	switch {
	case n == 0:
		return -noEnd
	case !c.wires.at(n - 1).s.HasResponse():
		return noEnd
	}
	return c.answerMax + j.clk.tolUS
}

// bestWire returns the index of the pending wire statement that r fits
// best, and how far S and E would have to move to fit it (µs); ties go to
// the oldest. -1 when no wire statement is compatible.
//
// In a pipeline, consecutive statements' windows touch: the k-th starts
// when the (k-1)-th is answered, so a row that started there fits both
// within the clock's error. Then the row's end decides: the server ended
// the (k-1)-th as it answered it, the k-th a statement later. A clock off
// by more than it claims can put the k-th row's start inside the (k-1)-th
// window, and only its end, a statement past that answer, shows it: an
// end further from an answer than the end tolerance counts against the
// pairing as much as a start outside the window.
func (j *Joiner) bestWire(c *connState, it *rowItem) (best int, fit int64) {
	r := &it.r
	best, fit = -1, noEnd
	for i := 0; i < c.wires.len(); i++ {
		if c.wires.at(i).s.TReqFirst-j.clk.tolUS > r.StartUS {
			break // later statements start even later
		}
		f, ok := j.wireFit(c, i, r, it.text)
		if !ok {
			continue
		}
		if best >= 0 && pipelined(c.wires.at(i)) {
			if f <= j.clk.fitTolUS && fit <= j.clk.fitTolUS {
				if endGap(c, i, r) < endGap(c, best, r) { // the clock cannot tell them apart
					best, fit = i, f
				}
			} else if f+j.endMisfit(c, i, r) < fit+j.endMisfit(c, best, r) {
				best, fit = i, f
			}
			continue
		}
		if f < fit {
			best, fit = i, f
		}
	}
	return best, fit
}

// endGap is how far r's end lies from the i-th pending wire statement's
// last answer byte.
func endGap(c *connState, i int, r *collect.ServerStatement) int64 {
	return abs(r.EndUS - windowEnd(c, i))
}

// endMisfit is how much further than the end tolerance r's end lies from
// the i-th pending wire statement's last answer byte.
func (j *Joiner) endMisfit(c *connState, i int, r *collect.ServerStatement) int64 {
	return max(endGap(c, i, r)-j.clk.endTolUS, 0)
}

// wireFit reports whether r, whose text hashes to text (0: not looked
// at), can be the i-th pending wire statement's row and, if so, how far
// its start lies outside the window the wire allows.
func (j *Joiner) wireFit(c *connState, i int, r *collect.ServerStatement, text uint64) (int64, bool) {
	s := c.wires.at(i).s
	answer := latestStart(c, i)
	if r.StartUS > answer+j.clk.tolUS || r.EndUS > j.latestEnd(c, i) ||
		!cmdCompatible(s.Cmd, r.EventName) || !textCompatible(s.SQL, r.SQLText) || !sameRowText(s, r, text) {
		return 0, false
	}
	if r.StartUS != 0 && endBeforeAnswer(s, r.EndUS, j.clk.errUS+j.opts.SlackUS) {
		// Ended before the server began to answer it: an earlier
		// statement's row, never this one's, even at expiry: paired, its
		// split would read the missing work as delivery, however short.
		return 0, false
	}
	if pipelined(c.wires.at(i)) && r.StartUS < startFloor(c, i)-j.clk.tolUS {
		// Started before the server answered the statement before it:
		// that one's row, or an earlier one's, never this one's, even
		// at expiry (pipeline.go).
		return 0, false
	}
	// The server starts a statement once its request begins to arrive
	// and before its first response byte: how far S lies outside that gap
	// is the evidence. A request of one segment arrives at once; a long
	// one (a 20 MB INSERT, a client that sends slowly) is read while
	// performance_schema's timer already runs, measured at its first
	// byte. A pipelined request waits at the server for the statements
	// before it: its gap begins with the previous answer (startFloor).
	// E is no evidence: the server ends a statement after sending its
	// answer, by up to milliseconds on a busy host.
	return StartMisfit(r.StartUS, startFloor(c, i), answer), true
}

// sameRowText: a row whose text is known to differ from the query the
// client sent (both held whole; of a cut row, sqltext.SameText) is another
// statement's, however well it fits in time. With the clock off by the few
// hundred microseconds between one statement's answer and the next's
// start, time alone fits the next statement's row to a query whose own row
// the reads missed.
func sameRowText(s *event.Statement, r *collect.ServerStatement, row uint64) bool {
	if s.TextHash == 0 || row == 0 {
		return true
	}
	if r.HoldsWholeText() {
		return row == s.TextHash
	}
	return sqltext.SameText(s.TextHash, row) // a cut text: only its length can tell
}

// StartMisfit is how far a server row's start lies outside the window in
// which the server can have started a wire statement, from floor (its
// request's first byte, or a pipeline's previous answer) to answer (its
// first answer byte, AnswerStart): 0 inside it. The joiner and watch's
// targets both judge a row by it, against their own tolerance.
func StartMisfit(start, floor, answer int64) int64 {
	return max(floor-start, 0) + max(start-answer, 0)
}

// latestEnd bounds the end of the i-th pending wire statement's row. The
// server runs one statement at a time per connection, so it ended this one
// before it started the next, which was before the next answer. How long
// after its own answer that is cannot be bounded otherwise: on a busy host
// the thread may be descheduled between the send and TIMER_END for
// milliseconds (docs/performance.md, "The server's tail after its
// answer"). Without a next statement yet, PostSendUS is the guess.
func (j *Joiner) latestEnd(c *connState, i int) int64 {
	if i+1 < c.wires.len() {
		return max(nextAnswer(c, i)+j.clk.tolUS, windowEnd(c, i)+j.clk.endTolUS)
	}
	return windowEnd(c, i) + j.clk.endTolUS
}

// noEnd stands for "no bound yet"; far below MaxInt64 so that adding the
// tolerance cannot overflow.
const noEnd = int64(1) << 62

// windowEnd is the latest instant the server may have finished the i-th
// pending wire statement: its last response byte. Commands without a
// response (COM_STMT_CLOSE, COM_QUIT) are bounded by the next answer the
// server gave, and by nothing while none came yet.
func windowEnd(c *connState, i int) int64 {
	if s := c.wires.at(i).s; s.HasResponse() {
		return s.TRespLast
	}
	return nextAnswer(c, i)
}

// latestStart is the latest the server can have started the i-th pending
// wire statement: its first response byte; for commands without a
// response, the next answer.
func latestStart(c *connState, i int) int64 {
	if s := c.wires.at(i).s; s.HasResponse() {
		return AnswerStart(s)
	}
	return nextAnswer(c, i)
}

// AnswerStart is when the server's answer to a wire statement began (its
// last byte when the first was not seen): the rule by which the joiner and
// watch's targets bound a server row's end.
func AnswerStart(s *event.Statement) int64 {
	if s.TRespFirst != 0 {
		return min(s.TRespFirst, s.TRespLast)
	}
	return s.TRespLast
}

// nextAnswer is the first response byte of the first statement after the
// i-th that has one. The server handles a connection's commands in order,
// so it started and finished the i-th before then. The next request alone
// bounds nothing: a client sends commands without answers (and pipelined
// ones) without waiting for the server to catch up.
func nextAnswer(c *connState, i int) int64 {
	for k := i + 1; k < c.wires.len(); k++ {
		if s := c.wires.at(k).s; s.HasResponse() {
			return AnswerStart(s)
		}
	}
	return noEnd
}

// join matches the i-th buffered row with w's statement, absorbs the
// further rows of a multi-statement query, decomposes and emits it.
func (j *Joiner) join(c *connState, i int, w wireItem) {
	s := w.s
	if !pipelined(&w) { // a pipelined window is no evidence of the clock (pipeline.go)
		j.observe(c.rows.at(i), s)
	}
	first := j.take(c, i)
	start, end, waitPS := first.StartUS, first.EndUS, first.TimerWait
	lockPS, examined, sent := first.LockTimePS, first.RowsExamined, first.RowsSent
	var parts []event.StatementPart // the rows of a multi-statement query, when more than one
	for i++; multiStatement(s.Cmd) && mayHoldMore(s.SQL) && s.HasResponse() && i < c.rows.len(); i++ {
		it := c.rows.at(i)
		if it.done {
			continue
		}
		r := &it.r
		// The statements of a multi-statement query all start before its
		// response ends; the next statement's row starts after the client
		// sent it, which is after that.
		if r.StartUS > s.TRespLast+j.clk.errUS || r.EndUS > s.TRespLast+j.clk.endTolUS {
			break
		}
		if j.nextClaims(c, r) {
			break
		}
		if len(parts) == 0 {
			parts = append(parts, partOf(first))
		}
		parts = append(parts, partOf(r))
		end, waitPS = max(end, r.EndUS), waitPS+r.TimerWait
		lockPS, examined, sent = lockPS+r.LockTimePS, examined+r.RowsExamined, sent+r.RowsSent
		j.take(c, i)
		j.stats.Merged++
	}
	s.Statements = parts
	calErr := max(j.clk.errUS, 1)
	cl := decompose(s, start, end, s.ZeroWindows, calErr, calErr+ServerTailUS)
	if abs(cl.startMovedUS) > calErr {
		j.stats.ClampedStart++
	}
	if abs(cl.endMovedUS) > calErr {
		j.stats.ClampedEnd++ // usually the server's tail after the send
	}
	if waitPS > 0 {
		s.ServerUS = int64(waitPS / collect.PicosPerMicro)
	}
	// The server's own counters, summed over the request's rows: known
	// now, 0 included.
	s.LockUS, s.RowsExamined = int64(lockPS/collect.PicosPerMicro), examined
	s.Known |= event.KnowsLockUS | event.KnowsRowsExamined
	rowsFromServer(s, sent)
	if first.Digest != "" {
		s.Digest, s.DigestText = first.Digest, first.DigestText
	}
	s.JoinSource = first.Source
	if s.JoinSource == "" {
		s.JoinSource = collect.SourceHistoryLong
	}
	if s.DB == "" {
		s.DB = first.Schema
	}
	j.stats.Joined++
	if unexplainedDelivery(s) {
		withholdSplit(s, event.UnexplainedDelivery)
		j.stats.Withheld++
	}
	j.deliver(s)
}

// notOnWire emits r as a statement of its own: its client was not on the
// captured wire.
func (j *Joiner) notOnWire(r *collect.ServerStatement, why event.Reason) {
	j.stats.NotOnWire++
	if j.text == nil {
		j.text = NewServerText(j.opts.KeepLiterals)
	}
	j.deliver(ServerOnly(r, why, j.text))
}

// partOf is one server row of a request, for its event's list.
func partOf(r *collect.ServerStatement) event.StatementPart {
	return event.StatementPart{Digest: r.Digest, DigestText: r.DigestText, ServerUS: int64(r.TimerWait / collect.PicosPerMicro)}
}

// nextClaims reports whether the connection's next pending wire statement
// could be r's: sent before r started (within the calibration error) and
// of r's kind and text. The calibration error lets a row that started just
// after an answer pass for one more statement of that query; when the
// client sent its next request within that error (a few µs after the
// answer, seen in TestJoinRealServer), the UPDATE's join took the next
// query's row as its second statement, and the next query stayed unjoined.
func (j *Joiner) nextClaims(c *connState, r *collect.ServerStatement) bool {
	if c.wires.len() == 0 {
		return false
	}
	next := c.wires.at(0).s
	return r.StartUS+j.clk.errUS >= next.TReqLast && cmdCompatible(next.Cmd, r.EventName) && textCompatible(next.SQL, r.SQLText)
}

// take marks the i-th buffered row as used and returns a pointer to it,
// valid until the queue is next popped.
func (j *Joiner) take(c *connState, i int) *collect.ServerStatement {
	it := c.rows.at(i)
	it.done = true
	j.held.pending--
	return &it.r
}

// dropDeadRows pops used rows off the front, and gives up front rows that
// no wire statement, pending or still to come, can be the record of:
// nothing pending is compatible and the connection's newest wire statement
// began after the row ended.
func (j *Joiner) dropDeadRows(c *connState) {
	for c.rows.len() > 0 {
		it := c.rows.front()
		if !it.done {
			if it.r.EndUS >= c.lastReqFirst-j.clk.tolUS {
				return
			}
			if k, _ := j.bestWire(c, it); k >= 0 {
				return
			}
			j.held.pending--
			j.unmatched(event.RowNoWire)
		}
		c.rows.pop()
	}
}

// dropSupersededWires emits unjoined the oldest wire statements that ended
// before the newest server row of their connection started, unless a
// pending row started within their window (it may still match once the
// next statement bounds its end): rows come in order, so no other will
// arrive for them.
// An outlier waits on for a read of its thread (giveUpLost).
func (j *Joiner) dropSupersededWires(c *connState) {
	for i := 0; i < c.wires.len(); {
		end := windowEnd(c, i) + j.clk.tolUS
		if end >= c.lastRowStart || j.rowWithin(c, end) {
			return
		}
		if c.wires.at(i).s.Outlier {
			i++
			continue
		}
		j.giveUpWireAt(c, i, event.NoRow)
	}
}

// rowWithin reports whether an unmatched row of c starts by t.
func (j *Joiner) rowWithin(c *connState, t int64) bool {
	for i := 0; i < c.rows.len(); i++ {
		if it := c.rows.at(i); !it.done {
			return it.r.StartUS <= t // rows are sorted by start
		}
	}
	return false
}

func (j *Joiner) deliver(s *event.Statement) {
	if j.groups != nil && s.ConnID != 0 {
		s.PoolGroup = &j.groups[s.ConnID%uint64(len(j.groups))]
	}
	j.emit(s)
}

// rowsFromServer gives a statement whose rows the wire could not count (a
// header-only capture cut its answer) the server's count of the rows it
// sent, and says where they came from (RowsBy, written as a note). A count
// of 0 says nothing (the column may be missing): the rows stay unknown.
func rowsFromServer(s *event.Statement, sent int64) {
	if sent <= 0 || s.Rows != 0 || s.RowsBy != event.RowsCut {
		return
	}
	s.Rows, s.RowsBy = sent, event.RowsFromServer
}
