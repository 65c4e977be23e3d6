package join

import (
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// Giving up: what waited longer than MaxWait (Flush), what exceeds
// MaxPending (enforceBound), and everything at the end of a run
// (FlushAll) or a server restart (Reset) leaves the joiner unjoined or
// unmatched, with the reason of the give-up in progress.

// Flush gives up what waited longer than MaxWait: wire statements are
// emitted with joined=false, server rows are counted as unmatched.
func (j *Joiner) Flush(nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.clk.off.learning() {
		j.decide(nowUS)
	}
	if j.clk.holdExpired(nowUS) { // go on with the claimed calibration
		j.settleAll()
	}
	j.attributeAnon(nowUS, false)
	cutoff := nowUS - j.opts.MaxWait.Microseconds()
	for j.held.age.len() > 0 && j.held.age.front().added <= cutoff {
		before := j.stats.UnjoinedWire + j.stats.UnmatchedServer
		j.giveUp(event.Expired, event.RowExpired, j.held.age.pop())
		j.stats.Expired += j.stats.UnjoinedWire + j.stats.UnmatchedServer - before
	}
	j.held.dropStaleRefs()
	j.expireAnon(cutoff)
}

// AddServerLost is AddServer for a read that found the server's ring had
// overwritten rows since the last one. The read holds every row the ring
// kept, so a wire statement that ended before the oldest of them and is
// not joined by them will never get its row from the ring: it is given
// up now (NoRow; the caller knows the loss) rather than held for MaxWait.
// On a busy server with MariaDB's 1,000-row ring, most of a connection's
// statements can be lost between two reads, and held for MaxWait they
// were most of watch's memory. Outliers wait on: a read of their
// thread's history may still bring their rows.
func (j *Joiner) AddServerLost(rows []collect.ServerStatement, nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.readAt = max(j.readAt, nowUS)
	oldest := int64(noEnd)
	for i := range rows {
		if r := &rows[i]; r.StartUS != 0 && r.EndUS != 0 {
			_, shift := j.clk.shiftOf(r)
			oldest = min(oldest, r.EndUS-shift)
		}
	}
	j.addServer(rows, nowUS)
	if oldest == noEnd || j.clk.holding {
		return
	}
	cutoff := oldest - max(j.clk.endTolUS, multiSettleUS)
	for i := range j.thr.anon { // rows of ended threads, not attributed yet: theirs may be among them
		if r := &j.thr.anon[i].r; r.StartUS != 0 {
			_, shift := j.clk.shiftOf(r)
			cutoff = min(cutoff, r.StartUS-shift-j.clk.tolUS)
		}
	}
	j.giveUpLost(cutoff)
}

// giveUpLost gives up, per connection and in order, the wire statements
// but outliers that ended before cutoff with no pending row that could
// still be theirs.
func (j *Joiner) giveUpLost(cutoff int64) {
	for _, c := range j.conns {
		for c.wires.len() > 0 {
			end := windowEnd(c, 0)
			if c.wires.at(0).s.Outlier || end >= cutoff || j.rowWithin(c, end+j.clk.tolUS) {
				break
			}
			j.giveUpWire(c, event.NoRow)
		}
		j.release(c)
	}
}

// FlushAll gives up everything still buffered (end of a run).
func (j *Joiner) FlushAll() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.attributeAnon(0, true)
	for j.held.age.len() > 0 {
		j.giveUp(event.RunEnd, event.RowRunEnd, j.held.age.pop())
	}
	j.expireAnon(1<<62 - 1)
}

// heldItems is the joiner's bookkeeping for giving up: every buffered
// item in arrival order (age), how many are held (pending), and the
// reasons an expiry or eviction in progress gives things up for (none
// otherwise). The items themselves live in their connections' queues.
type heldItems struct {
	age       fifo[ageRef]
	pending   int
	wire, row event.Reason
}

// wireReason is why a wire statement is left unjoined: the give-up in
// progress overrides the reason its caller saw, but for a statement
// without a connection.
func (h *heldItems) wireReason(why event.Reason) event.Reason {
	if h.wire != event.ReasonNone && why != event.NoConn {
		return h.wire
	}
	return why
}

// rowReason is why a server row is left unmatched: the give-up in
// progress overrides its caller's.
func (h *heldItems) rowReason(why event.Reason) event.Reason {
	if h.row != event.ReasonNone {
		return h.row
	}
	return why
}

// ageOf returns the arrival time of the oldest reference still in the age
// queue for c, a conservative stand-in when items move between connections.
func (h *heldItems) ageOf(c *connState) int64 {
	for i := 0; i < h.age.len(); i++ {
		if a := h.age.at(i); a.c == c && a.gen == c.gen {
			return a.added
		}
	}
	return 0
}

// unjoined emits s without a server row, with the reason why (an expiry
// or an eviction in progress overrides the reason its caller saw; its
// sentence is written from it). The join's reason replaces the capture's
// (mid-stream, TLS...), whose own note stays: those statements can join,
// so when one does not, the join says why.
func (j *Joiner) unjoined(s *event.Statement, why event.Reason) {
	why = j.held.wireReason(why)
	s.Joined, s.Why = false, why
	j.stats.UnjoinedWire++
	j.deliver(s)
}

// unmatched counts a server row no wire statement took, by reason.
func (j *Joiner) unmatched(why event.Reason) {
	why = j.held.rowReason(why)
	j.stats.UnmatchedServer++
	j.unmatchedBy.Add(why)
}

// expire gives up the item a reference points to, with everything older on
// its connection (items leave a connection in order).
func (j *Joiner) expire(a ageRef) {
	c := a.c
	if c.gen != a.gen {
		return
	}
	if c.id != 0 {
		j.settle(c, true) // last chance for poorly fitting rows
		if c.gen != a.gen {
			return // settle emptied and released it
		}
	}
	if a.server {
		for c.rows.len() > 0 && c.rows.front().seq <= a.seq {
			if !c.rows.front().done {
				j.held.pending--
				j.unmatched(event.RowExpired)
			}
			c.rows.pop()
		}
	} else {
		why := event.Expired
		if c.id == 0 {
			why = event.NoConn
		}
		for c.wires.len() > 0 && c.wires.front().seq <= a.seq {
			j.giveUpWire(c, why)
		}
	}
	if c.id != 0 {
		j.settle(c, false) // what blocked the queue is gone: the rest may match now
	} else {
		j.release(c)
	}
}

// giveUp expires a, everything given up meanwhile noted as wire / row.
func (j *Joiner) giveUp(wire, row event.Reason, a ageRef) {
	j.held.wire, j.held.row = wire, row
	j.expire(a)
	j.held.wire, j.held.row = event.ReasonNone, event.ReasonNone
}

// stale reports whether the item a reference points to is gone already.
func (a *ageRef) stale() bool {
	c := a.c
	if c.gen != a.gen {
		return true
	}
	// Items leave a connection from the front. Rows reordered by
	// insertSorted may sit behind a newer one; they are then given up with
	// the newer one's reference, which expire handles by sequence.
	if a.server {
		return c.rows.len() == 0 || c.rows.front().seq > a.seq
	}
	return c.wires.len() == 0 || c.wires.front().seq > a.seq
}

// dropStaleRefs pops references to items that were matched meanwhile, so
// the age queue stays as small as what is really pending.
func (h *heldItems) dropStaleRefs() {
	for h.age.len() > 0 && h.age.front().stale() {
		h.age.pop()
	}
}

// enforceBound gives up the oldest items while more than MaxPending are
// held, and keeps the age queue itself bounded when Flush is rare.
func (j *Joiner) enforceBound() {
	j.held.dropStaleRefs()
	for j.held.pending > j.opts.MaxPending || j.held.age.len() > 4*j.opts.MaxPending {
		before := j.held.pending
		j.giveUp(event.Evicted, event.RowEvicted, j.held.age.pop())
		j.stats.Evicted += int64(before - j.held.pending)
		j.held.dropStaleRefs()
	}
}
