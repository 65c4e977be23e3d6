package join

import "github.com/gapscope/gapscope/internal/event"

// The guard against a confident wrong answer. A joined statement's
// delivery is the time from the server's end to the response's last byte:
// the response's transfer and, across a link, the way back. When the
// server's rows behind a request are not all in the join (a statement of a
// multi-statement request the reads missed, a CALL's work recorded
// elsewhere), the server's end lies too early and the missing work reads
// as delivery: seconds of "network" for a few hundred bytes. The network
// cannot take that long without leaving evidence on the wire, so a
// delivery far beyond what the round trip and the bytes explain, with no
// zero window or retransmit behind it, is not given as a split.
const (
	// unexplainedFloorUS: a delivery shorter than this is never judged
	// (a busy host delays a last segment by milliseconds).
	unexplainedFloorUS = 20_000
	// unexplainedFactor: how many times what the bytes and the transit
	// explain a delivery must exceed to be unexplained.
	unexplainedFactor = 20
	// minBytesPerUS is the slowest throughput a response is assumed to
	// cross a link at (100 Mbit/s); with the factor, 5 Mbit/s.
	minBytesPerUS = 12
)

// unexplainedDelivery reports whether s's delivery is far longer than its
// response and the link explain, with no stall or retransmit behind it.
func unexplainedDelivery(s *event.Statement) bool {
	if s.ZeroWindowUS > 0 || s.SendStallUS > 0 || s.Retransmits > 0 {
		return false // the wire shows why the response was slow
	}
	explained := 2*max(s.TransitUS, 0) + s.RespBytes/minBytesPerUS
	return s.DeliveryUS > max(unexplainedFloorUS, unexplainedFactor*explained)
}

// withholdSplit keeps what the wire measured of s (client and request
// time, the server's own time) and withholds the split of the rest, which
// the evidence cannot explain: the statement reads as unjoined for that
// reason (its sentence written from it), and stays out of every
// per-digest split.
func withholdSplit(s *event.Statement, why event.Reason) {
	s.Joined, s.Why = false, why
	s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS = 0, 0, 0, 0
}
