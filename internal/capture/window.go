package capture

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// maxStallSpans bounds the stall intervals kept per connection between two
// statements; past it the last span is stretched instead.
const maxStallSpans = 1024

// windowTracker records intervals during which the client's receive window
// stopped the server from sending: the client advertised a zero window, or
// (when the window scale is known from both SYNs) the server had sent
// everything up to the window's right edge.
type windowTracker struct {
	known      bool // window scale known: right edges can be computed
	shift      uint8
	edge       uint32 // client's ack + scaled window
	edgeValid  bool
	srvEnd     uint32 // highest sequence number the server sent, +1
	srvValid   bool
	stallStart int64 // 0 when not stalled
	spans      []event.Span
}

// reset sets the scale from the SYN options: scaling is in effect only when
// both SYNs carried the option (RFC 7323), and the client's advertised
// windows are shifted by the scale the client announced.
func (w *windowTracker) reset(cli, srv *halfFlow) {
	*w = windowTracker{known: cli.sawSYN && srv.sawSYN}
	if w.known && cli.wscale >= 0 && srv.wscale >= 0 {
		w.shift = uint8(cli.wscale)
	}
}

// window updates stall tracking with one segment of the flow, counting it
// when the flow was or is stalled (Options.Stalls).
func (f *flow) window(dir mysqlproto.Direction, p *packet) {
	stalled := f.win.stallStart != 0
	f.advanceWindow(dir, p)
	if (stalled || f.win.stallStart != 0) && f.t.opts.Stalls != nil {
		f.t.opts.Stalls.Add(1)
	}
}

func (f *flow) advanceWindow(dir mysqlproto.Direction, p *packet) {
	w := &f.win
	if p.flags&tcpSYN != 0 {
		return // windows in SYNs are never scaled
	}
	if dir == toClient {
		w.serverSent(p)
		return
	}
	if p.flags&tcpACK != 0 {
		w.clientAdvertised(p)
	}
}

func (w *windowTracker) serverSent(p *packet) {
	if p.size == 0 {
		return
	}
	end := p.seq + uint32(p.size)
	if !w.srvValid || seqDiff(end, w.srvEnd) > 0 {
		w.srvEnd, w.srvValid = end, true
	}
	if w.stallStart == 0 && w.known && w.edgeValid && seqDiff(w.srvEnd, w.edge) >= 0 {
		w.stallStart = p.tsUS // the server filled the window
	}
}

func (w *windowTracker) clientAdvertised(p *packet) {
	win := uint32(p.window) << w.shift
	if w.known {
		w.edge, w.edgeValid = p.ack+win, true
	}
	switch {
	case win == 0 && w.stallStart == 0:
		w.stallStart = p.tsUS
	case win > 0 && w.stallStart != 0 && w.opened():
		w.addSpan(event.Span{Start: w.stallStart, End: p.tsUS})
		w.stallStart = 0
	}
}

// opened reports whether the latest window lets the server send again.
func (w *windowTracker) opened() bool {
	return !w.known || !w.srvValid || seqDiff(w.edge, w.srvEnd) > 0
}

func (w *windowTracker) addSpan(s event.Span) {
	if s.End <= s.Start {
		return
	}
	if n := len(w.spans); n >= maxStallSpans {
		w.spans[n-1].End = s.End
		return
	}
	w.spans = append(w.spans, s)
}

// stalls returns the stall intervals inside [from, to) — the time between a
// request's last byte and its response's last byte — and their total; an
// ongoing stall counts up to `to`. Spans ending by `to` are then forgotten.
func (w *windowTracker) stalls(from, to int64) ([]event.Span, int64) {
	var out []event.Span
	var total int64
	clip := func(s event.Span) {
		if n := s.Overlap(from, to); n > 0 {
			out = append(out, event.Span{Start: max(s.Start, from), End: min(s.End, to)})
			total += n
		}
	}
	for _, s := range w.spans {
		clip(s)
	}
	if w.stallStart != 0 {
		clip(event.Span{Start: w.stallStart, End: to})
	}
	kept := w.spans[:0]
	for _, s := range w.spans {
		if s.End > to {
			kept = append(kept, s)
		}
	}
	w.spans = kept
	return out, total
}
