package join

import (
	"cmp"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
)

// Reset forgets every connection and thread identity and the learnt clock
// offset, for a server restart: connection and thread ids start over, and
// the timers have a new origin, so what was learned before would pair new
// statements with old ones or shift them by the downtime. Pending wire
// statements are emitted unjoined and pending server rows counted
// unmatched, as at the end of a run.
func (j *Joiner) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.resetLocked()
}

// ResetSince is Reset for a server that restarted at sinceUS (capture
// clock): the wire statements that began since then are kept, waiting
// MaxWait from nowUS for their rows, which the restarted server's history
// still holds; everything older is given up as Reset gives it up.
func (j *Joiner) ResetSince(sinceUS, nowUS int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	kept := j.takeWiresSince(sinceUS)
	j.resetLocked()
	for _, it := range kept {
		var c *connState
		if it.s.ConnID != 0 {
			c = j.conn(it.s.ConnID)
		} else {
			c = j.orphan(clientAddr(it.s.Conn))
		}
		j.repushWire(c, it, nowUS)
	}
}

// takeWiresSince removes the wire statements that began at or after
// sinceUS from every connection and returns them in arrival order. A
// connection's statements are in time order, so they are its queue's tail.
func (j *Joiner) takeWiresSince(sinceUS int64) []wireItem {
	var kept []wireItem
	take := func(c *connState) {
		n := c.wires.len()
		i := n
		for i > 0 && c.wires.at(i-1).s.TReqFirst >= sinceUS {
			i--
		}
		for k := i; k < n; k++ {
			kept = append(kept, *c.wires.at(k))
		}
		c.wires.truncate(i)
		j.held.pending -= n - i
	}
	for _, c := range j.conns {
		take(c)
	}
	for _, c := range j.orphans {
		take(c)
	}
	slices.SortFunc(kept, func(a, b wireItem) int { return cmp.Compare(a.seq, b.seq) })
	return kept
}

func (j *Joiner) resetLocked() {
	for j.held.age.len() > 0 {
		j.giveUp(event.Restart, event.RowRunEnd, j.held.age.pop())
	}
	j.expireAnon(1<<62 - 1)
	j.thr.reset()
	clear(j.addrs.ids)
	clear(j.answers) // connection ids start over
	j.clk.reset()
}
