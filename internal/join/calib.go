package join

import (
	"sort"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// The joiner's side of self-calibration (the estimator is in offset.go).

// joinClock is what the joiner knows of the server clock: the origin it
// learns from matched pairs (the estimator), the matching tolerances that
// follow from how uncertain that origin still is, and whether matching
// waits for it. It owns that state; the Joiner's methods that walk the
// connections to vote, re-shift or settle ask it.
type joinClock struct {
	opts  Options
	off   *offsetEstimator
	errUS int64 // how far the server clock may still be off
	tolUS int64 // matching window tolerance before the request
	// endTolUS is the matching window's tolerance after the response,
	// fitTolUS how much clamping makes a match doubtful.
	endTolUS, fitTolUS int64
	norm               *sqltext.Normalizer // fingerprints rows' texts while the clock is learnt (rowShape)
	// holding: the claimed calibration looks wrong and the origin is not
	// learnt yet, so matching waits (since holdSince, at most LearnWait);
	// holdDone: it will not wait again.
	holding, holdDone bool
	holdSince         int64
	moved             int64 // estimate change not yet applied to buffered rows
}

// newJoinClock starts from collect's claimed calibration error.
func newJoinClock(opts Options) joinClock {
	c := joinClock{opts: opts, off: newOffsetEstimator(opts.CalibrationErrorUS)}
	c.retune()
	return c
}

// retune sets the matching tolerances from how uncertain the server clock
// is: collect's claim at first, the learnt error later.
func (c *joinClock) retune() {
	c.errUS = c.off.errUS
	c.tolUS = c.errUS + c.opts.SlackUS
	c.fitTolUS = c.errUS + c.opts.FitSlackUS
	c.endTolUS = c.errUS + c.opts.SlackUS + c.opts.PostSendUS
}

// offset is the learnt residual offset, how far the truth may lie from
// it, and how many pairs agree on it.
func (c *joinClock) offset() (offsetUS, errUS int64, samples int) {
	return c.off.shift(c.off.base), c.errUS, c.off.samples
}

// current is the shift the current estimate applies to rows of collect's
// newest origin.
func (c *joinClock) current() int64 { return c.off.shift(c.off.base) }

// holdExpired reports whether holding has lasted LearnWait at nowUS:
// matching then goes on with the claimed calibration.
func (c *joinClock) holdExpired(nowUS int64) bool {
	if c.holding && nowUS-c.holdSince >= c.opts.LearnWait.Microseconds() {
		c.holding, c.holdDone = false, true
		return true
	}
	return false
}

// weigh lets the estimator weigh the votes at nowUS: moved is how much
// more the new estimate subtracts from rows (changed: it settled on an
// origin); released says matching no longer waits.
func (c *joinClock) weigh(nowUS int64) (changed bool, moved int64, released bool) {
	before := c.current()
	changed, suspect := c.off.decide()
	if changed {
		c.holding, c.holdDone = false, true
		c.retune()
		return true, c.current() - before, false
	}
	switch {
	case c.holdDone:
	case suspect && !c.holding:
		c.holding, c.holdSince = true, nowUS
	case !suspect && c.holding:
		c.holding = false
		return false, 0, true
	}
	return false, 0, false
}

// track feeds one join's pair (the row's raw start and the window the
// wire allows) to the estimator while it tracks; a change is kept in
// moved until the buffered rows catch up.
func (c *joinClock) track(window interval, raw int64) {
	before := c.current()
	if c.off.observe(window.minus(raw)) {
		c.retune()
		c.moved += c.current() - before
	}
}

// reset forgets what was learnt (a server restart: a new timer origin).
func (c *joinClock) reset() { *c = newJoinClock(c.opts) }

// clockOf returns collect's origin for a row (0 when the row does not
// say: its times are then taken as they are) and what to subtract from
// its times to put them on the capture clock with the current estimate.
func (c *joinClock) clockOf(r *collect.ServerStatement) (base, shift int64) {
	base, shift = c.shiftOf(r)
	if r.StartUS != 0 {
		c.off.base = base
	}
	return base, shift
}

// shiftOf is clockOf without noting the row's origin as the current one:
// for rows only looked at, not buffered.
func (c *joinClock) shiftOf(r *collect.ServerStatement) (base, shift int64) {
	if r.StartUS == 0 {
		return 0, 0 // not calibrated at all: nothing to correct
	}
	if r.TimerStart != 0 {
		base = r.StartUS - int64(r.TimerStart/collect.PicosPerMicro)
	}
	return base, c.off.shift(base)
}

// reshift re-applies the current estimate to a buffered row.
func (c *joinClock) reshift(it *rowItem) {
	if !it.timed {
		return
	}
	d := c.off.shift(it.base) - it.shift
	it.r.StartUS -= d
	it.r.EndUS -= d
	it.shift += d
}

// pairInterval is the range of timer origins under which row it can be the
// record of the i-th pending wire statement of c; ok is false when the
// statement bounds nothing (no answer yet).
func pairInterval(c *connState, i int, it *rowItem) (iv interval, ok bool) {
	s := c.wires.at(i).s
	answer := latestStart(c, i)
	if answer == noEnd || !it.timed {
		return interval{}, false
	}
	return startWindow(s, answer).minus(it.raw()), true
}

// startWindow is when the server can have started statement s, in capture
// time: after its first request byte reached the server (a long request
// is read while the statement's timer runs) and before its first answer
// byte left it. Across a link each is a transit away from what the
// capture saw (the measured round trip, assumed symmetric); a transit
// longer than half the statement is cut to that.
func startWindow(s *event.Statement, answer int64) interval {
	reqLast := max(s.TReqLast, s.TReqFirst)
	d := min(max(s.TransitUS, 0), max(answer-reqLast, 0)/2)
	return interval{lo: s.TReqFirst + d, hi: answer - d}
}

// minus moves an interval of capture times to timer origins (raw is a
// timer reading in µs).
func (iv interval) minus(raw int64) interval { return interval{lo: iv.lo - raw, hi: iv.hi - raw} }

// plausible reports whether a row could be the record of the i-th pending
// wire statement if the clock were off by up to SearchUS. A pipelined
// statement never votes: its window is bounded by another statement's
// answer, as long as the statement and touching its neighbours', so a
// row paired one off votes for the origins next to the true one, and the
// pairs of a pipeline alone taught the clock an origin half a statement
// off (pipeline.go).
func (j *Joiner) plausible(c *connState, i int, it *rowItem) bool {
	s, r := c.wires.at(i).s, &it.r
	return !pipelined(c.wires.at(i)) && r.StartUS >= s.TReqFirst-j.opts.SearchUS && r.StartUS <= latestStart(c, i)+j.opts.SearchUS &&
		cmdCompatible(s.Cmd, r.EventName) && textCompatible(s.SQL, r.SQLText) && j.sameShape(s, it)
}

// sameShape reports whether a row and a wire statement can be the same
// statement by their texts' shapes (gapscope's fingerprint of each), when
// both texts give one. Votes need more than the leading keyword: most of a
// workload is SELECTs, and each row that pairs with a neighbour of another
// shape is a vote for an origin a statement or two off, which on a busy
// connection can tie with the true one. Matching itself keeps to the
// keyword: a shape the two normalisations disagree on (a text the server
// cut at performance_schema_max_sql_text_length) must not leave a
// statement unjoined, only cost a vote.
func (j *Joiner) sameShape(s *event.Statement, it *rowItem) bool {
	if s.Fingerprint == "" || mayHoldMore(s.SQL) {
		return true // no shape, or one text for several rows
	}
	shape := j.clk.rowShape(it)
	return shape == "" || shape == s.Fingerprint
}

// maxShapeText: a longer SQL_TEXT may have been cut by the server (1,024
// characters by default), and a cut text has another shape.
const maxShapeText = 1000

// rowShape is the fingerprint of the row's SQL_TEXT ("" when it has none,
// or one too long to trust), computed once per row and only while the
// clock is learnt.
func (c *joinClock) rowShape(it *rowItem) string {
	if it.shaped {
		return it.shape
	}
	it.shaped = true
	if t := it.r.SQLText; t != "" && len(t) < maxShapeText {
		if c.norm == nil {
			c.norm = sqltext.NewNormalizer(1000)
		}
		_, it.shape = c.norm.Normalize([]byte(t))
	}
	return it.shape
}

// voteRow lets a new row vote for the origins under which it fits each
// pending wire statement of its connection.
func (j *Joiner) voteRow(c *connState, it *rowItem) {
	for i := j.firstAnsweredAfter(c, it.r.StartUS-j.opts.SearchUS); i < c.wires.len(); i++ {
		if c.wires.at(i).s.TReqFirst-j.opts.SearchUS > it.r.StartUS {
			break // later statements start even later
		}
		if !j.plausible(c, i, it) {
			continue
		}
		if iv, ok := pairInterval(c, i, it); ok {
			j.clk.off.vote(iv)
		}
	}
}

// firstAnsweredAfter is the first pending wire statement whose answer
// began at or after t. The server answers a connection's commands in
// order, so answers only grow along the queue; statements answered before
// t cannot be the record of a row that started after t, and while the
// clock is being learned a connection holds thousands of them, which
// every new row would otherwise walk.
func (j *Joiner) firstAnsweredAfter(c *connState, t int64) int {
	return sort.Search(c.wires.len(), func(i int) bool { return latestStart(c, i) >= t })
}

// voteWire lets the pending rows of a connection vote on the i-th wire
// statement, which just arrived after them. Statements without an answer
// just before it gained their bound (this one's answer) only now, so rows
// vote on them too.
func (j *Joiner) voteWire(c *connState, i int) {
	from := i
	for from > 0 && !c.wires.at(from-1).s.HasResponse() {
		from--
	}
	for k := from; k <= i; k++ {
		for n := 0; n < c.rows.len(); n++ {
			it := c.rows.at(n)
			if it.done || !j.plausible(c, k, it) {
				continue
			}
			if iv, ok := pairInterval(c, k, it); ok {
				j.clk.off.vote(iv)
			}
		}
	}
}

// decide lets the estimator weigh the votes. When it settles on an origin,
// every buffered row moves onto it and every connection is settled; it
// returns whether that happened. Until then matching waits while the
// claimed calibration looks wrong, at most LearnWait.
func (j *Joiner) decide(nowUS int64) bool {
	changed, moved, released := j.clk.weigh(nowUS)
	if changed {
		j.reshiftAll(moved)
	}
	if changed || released {
		j.settleAll()
	}
	return changed
}

// observe feeds a join's pair to the estimator while it tracks. A new
// estimate applies to the rows that arrive from now on, and to buffered
// ones at the next catchUp (not while a connection is being settled).
func (j *Joiner) observe(it *rowItem, s *event.Statement) {
	if j.clk.off.learning() || !it.timed || !s.HasResponse() {
		return // a statement without an answer bounds nothing by itself
	}
	answer := s.TRespLast
	if s.TRespFirst != 0 {
		answer = min(s.TRespFirst, s.TRespLast)
	}
	j.clk.track(startWindow(s, answer), it.raw())
}

// catchUp moves the buffered rows onto an estimate that changed while
// tracking (drift), once the matching that produced the change is done.
func (j *Joiner) catchUp() {
	if j.clk.moved != 0 {
		j.reshiftAll(j.clk.moved)
		j.clk.moved = 0
	}
}

// reshiftAll moves every buffered row onto the current estimate; d is how
// much more is subtracted from rows of the newest collect origin, which
// moves each connection's newest row start along.
func (j *Joiner) reshiftAll(d int64) {
	for _, c := range j.conns {
		for i := 0; i < c.rows.len(); i++ {
			j.clk.reshift(c.rows.at(i))
		}
		if c.lastRowStart != 0 {
			c.lastRowStart -= d
		}
	}
}

// settleAll settles every connection (after the estimate or the holding
// changed).
func (j *Joiner) settleAll() {
	for _, c := range j.conns {
		j.settle(c, false)
	}
}
