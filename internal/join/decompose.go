package join

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// clamp records how far decompose had to move the server's start and end
// to fit them inside the wire's view of the statement.
type clamp struct {
	startMovedUS, endMovedUS int64
}

// ServerTailUS is how long the server usually keeps a statement open after
// its last response byte left: it sends the final OK/EOF, then does its
// bookkeeping, then records TIMER_END: usually microseconds, rarely more
// on a busy host (docs/performance.md, "The server's tail after its
// answer"). An end clamped by less than this is normal, not a calibration
// problem.
const ServerTailUS = 200

// decompose splits a wire statement's client-seen time into the five parts
// (docs/decomposition.md), given the server's start S and end E of the same
// statement in Unix microseconds and the one-way transit d between the
// capture point and the server (s.TransitUS, 0 on the server's host):
//
//	request    = (t_req_last + d) − t_req_first   until the server has it
//	queue      = S − (t_req_last + d)
//	exec+stall = E − S, stall = client zero-window time inside [S, E)
//	delivery   = t_resp_last − E                  includes the way back
//
// S is clamped into [t_req_last + d, t_resp_last − d] and E into
// [S, t_resp_last − d], so the five parts always sum exactly to client_us
// (which it sets to t_resp_last − t_req_first); a transit too long for the
// statement is cut to half its time. It sets Joined and ServerUS (E − S
// before clamping) and adds a note when S moved by more than 1 µs (the
// timer rounding) or E by more than ServerTailUS.
//
// spans are the client's zero-window spans (the statement's own,
// s.ZeroWindows); a note is added when S moved by more than startNoteUS
// (the calibration error) or E by more than endNoteUS (that plus
// ServerTailUS). Across a link (a transit), a queue no longer than the
// calibration error cannot be told from a clock error: it stays in
// request_us, so calibration error never reads as queue.
func decompose(s *event.Statement, startUS, endUS int64, spans []event.Span, startNoteUS, endNoteUS int64) clamp {
	reqLast := max(s.TReqLast, s.TReqFirst)
	last := reqLast
	if s.HasResponse() {
		last = max(s.TRespLast, reqLast)
	}
	d := min(max(s.TransitUS, 0), (last-reqLast)/2)
	arrived, left := reqLast+d, last-d
	S := min(max(startUS, arrived), left)
	E := min(max(endUS, S), left)
	if d > 0 {
		arrived += min(S-arrived, startNoteUS)
	}

	s.ClientUS = last - s.TReqFirst
	s.RequestUS = arrived - s.TReqFirst
	s.QueueUS = S - arrived
	s.SendStallUS = stallWithin(spans, S, E)
	s.ExecUS = E - S - s.SendStallUS
	s.DeliveryUS = last - E
	s.ServerUS = max(endUS-startUS, 0)
	s.Joined, s.Why = true, event.ReasonNone

	c := clamp{startMovedUS: S - startUS, endMovedUS: endUS - E}
	if reqLast > s.TReqFirst && startUS >= s.TReqFirst+d-startNoteUS && startUS < arrived && c.startMovedUS > startNoteUS {
		// Expected, not a clock error: the server began while the rest
		// of a long request was still arriving; the overlap is request.
		s.Notes = append(s.Notes, fmt.Sprintf("join: the server started %d us before the request's last byte (a %d-byte request still arriving): the overlap counts as request", c.startMovedUS, s.ReqBytes))
		c.startMovedUS = 0
	} else if abs(c.startMovedUS) > startNoteUS {
		s.Notes = append(s.Notes, fmt.Sprintf("join: server start moved %+d us into the wire window (allowed %d us)", c.startMovedUS, startNoteUS))
	}
	if abs(c.endMovedUS) > endNoteUS {
		s.Notes = append(s.Notes, fmt.Sprintf("join: server end moved %+d us into the wire window (allowed %d us)", -c.endMovedUS, endNoteUS))
	}
	return c
}

// stallWithin returns how much of [from, to) the spans cover. Spans come
// from the capture in time order; the sweep counts each instant once even
// when spans overlap, and an unordered list can only be under-counted, so
// the result never exceeds to − from and the exact-sum identity holds.
func stallWithin(spans []event.Span, from, to int64) int64 {
	var total int64
	cur := from
	for _, sp := range spans {
		lo, hi := max(sp.Start, cur), min(sp.End, to)
		if hi > lo {
			total += hi - lo
			cur = hi
		}
	}
	return total
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
