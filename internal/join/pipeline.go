package join

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// Pipelines. A driver that pipelines (MariaDB Connector/J's
// useBatchMultiSend, Node mariadb's pipelining) writes a batch's requests
// on one connection without waiting for answers: every request is at the
// server before the first answer. The server still runs a connection's
// commands one at a time, in order: it starts the k-th once it has
// finished the one before, which it finished after it began answering it.
// So on the wire the previous answer marks (nearly) the k-th statement's
// server start, and its own answer its end; its request's time says
// nothing of when it started.
//
// Bounded by its request alone, the k-th statement's window spans the k
// statements before it, and every earlier row fits it: once a row was
// missing (a thread's 10-row history turned over before a read) or came
// out of order (a read of an outlier's thread), rows went to the wrong
// statements, and as votes those wide windows taught the clock an origin
// half a statement off. Each wire statement therefore keeps its
// connection's previous answer (wireItem.prev*), which bounds its server
// start from below.

// answerSpan is a connection's latest answer on the wire: the first and last
// byte (capture clock); zero when unknown, or when the client's zero
// window may have held the answer back (the server then wrote it before
// the wire shows it, and it bounds nothing).
type answerSpan struct{ first, last int64 }

// answeredOf is what s's answer says of the server's progress.
func answeredOf(s *event.Statement) answerSpan {
	if !s.HasResponse() || s.ZeroWindowUS > 0 || len(s.ZeroWindows) > 0 || s.Retransmits > 0 {
		return answerSpan{}
	}
	return answerSpan{first: AnswerStart(s), last: s.TRespLast}
}

// maxAnswered bounds the connections whose latest answer is kept while
// they hold nothing (a cache: forgetting one costs only a bound).
const maxAnswered = 65_536

// keepAnswered remembers c's latest answer when c is released, for its
// next statement.
func (j *Joiner) keepAnswered(c *connState) {
	if c.id == 0 || c.last == (answerSpan{}) {
		return
	}
	if j.answers == nil || len(j.answers) >= maxAnswered {
		j.answers = map[uint64]answerSpan{}
	}
	j.answers[c.id] = c.last
}

// pipelined reports whether w's request was at the server before the
// server began answering the statement before it on its connection: the
// server started it when it had finished that one.
func pipelined(w *wireItem) bool {
	d := max(w.s.TransitUS, 0)
	return w.prev.first != 0 && max(w.s.TReqLast, w.s.TReqFirst)+d < w.prev.first-d
}

// startFloor is the earliest the server can have started the i-th pending
// wire statement (capture clock): its first request byte, or, when later,
// when the server began answering the statement before it.
func startFloor(c *connState, i int) int64 {
	w := c.wires.at(i)
	lo := w.s.TReqFirst
	if w.prev.first != 0 {
		lo = max(lo, w.prev.first-max(w.s.TransitUS, 0))
	}
	return lo
}

// SourceWire is the JoinSource of a pipelined statement split from the
// wire alone (splitFromWire).
const SourceWire = "wire (pipelined: from the previous answer to its own)"

// splitFromWire gives a pipelined statement whose row no read returned the
// split the wire shows: the server started it once it had sent the
// previous answer's last byte (its request was there already) and ended
// it when it sent its own answer's last byte. What the server did in
// between that is not this statement (its bookkeeping, µs) counts as
// exec. False, and s untouched, when the wire does not show it: the first
// statement of a batch (nothing before it on its connection), an answer
// held back by the client's window, a request that arrived after the
// previous answer began.
func (j *Joiner) splitFromWire(w *wireItem) bool {
	s := w.s
	if !pipelined(w) || answeredOf(s) == (answerSpan{}) || w.prev.last < w.prev.first {
		return false
	}
	d := max(s.TransitUS, 0)
	start, end := w.prev.last-d, s.TRespLast-d
	if end <= start {
		return false
	}
	decompose(s, start, end, s.ZeroWindows, 1, 1)
	s.JoinSource = SourceWire
	s.Notes = append(s.Notes, fmt.Sprintf("join: no server row (no read returned it); a pipelined statement: its request was at the server %d us before the previous answer began, so the server ran it from that answer's last byte to its own (from the wire)",
		w.prev.first-d-(max(s.TReqLast, s.TReqFirst)+d)))
	j.stats.WireSplit++
	j.deliver(s)
	return true
}

// giveUpWire gives up c's oldest pending wire statement: split from the
// wire when it shows the split (a pipelined statement), unjoined for why
// otherwise.
func (j *Joiner) giveUpWire(c *connState, why event.Reason) {
	j.held.pending--
	j.giveUpItem(c.wires.pop(), why)
}

// giveUpWireAt is giveUpWire for the i-th pending wire statement (the
// outliers before it wait on).
func (j *Joiner) giveUpWireAt(c *connState, i int, why event.Reason) {
	j.held.pending--
	j.giveUpItem(c.wires.take(i), why)
}

func (j *Joiner) giveUpItem(w wireItem, why event.Reason) {
	if j.splitFromWire(&w) {
		return
	}
	j.unjoined(w.s, why)
}

// endBeforeAnswer reports whether the server's end of s (a row's, capture
// clock) lies before the server can have begun to answer it, by more than
// tolUS: the server ends a statement after its first answer byte left (a
// client's zero window holds an answer back: then nothing is judged). Such
// a row is not s's (its predecessor's, in a pipeline whose rows would be
// paired one off), or the clock is off by more than it claims: either way
// its split would be a confident wrong answer, however short the delivery
// it shows (Node's pipelined SELECT SLEEP(0.05): 19 ms of "delivery" on
// loopback, under the delivery guard's 20 ms floor). wireFit never pairs
// it. A request that may run several statements is not judged: the server
// holds back the OK of each but the last (SERVER_MORE_RESULTS_EXISTS: no
// flush), so its first row may end before the first answer byte leaves.
func endBeforeAnswer(s *event.Statement, endUS, tolUS int64) bool {
	if !s.HasResponse() || s.ZeroWindowUS > 0 || len(s.ZeroWindows) > 0 || MayRunSeveral(s) {
		return false
	}
	return endUS < AnswerStart(s)-max(s.TransitUS, 0)-tolUS
}

// MayRunSeveral reports whether s's request may run several statements (a
// multi-statement COM_QUERY, or one whose text is unknown): the server
// then sends the answers of all but the last with the next, so the first
// answer byte may leave after the first statement ended.
func MayRunSeveral(s *event.Statement) bool {
	return multiStatement(s.Cmd) && mayHoldMore(s.SQL)
}
