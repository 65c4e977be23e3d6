package join

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func sumParts(s *event.Statement) int64 {
	return s.RequestUS + s.QueueUS + s.ExecUS + s.SendStallUS + s.DeliveryUS
}

// TestDecomposeExactSum feeds random, often inconsistent, times: the five
// parts must still be non-negative and sum exactly to client_us.
func TestDecomposeExactSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200_000 {
		base := rng.Int64N(1 << 50)
		r := func() int64 { return base + rng.Int64N(2_000_000) - 500_000 }
		s := &event.Statement{TReqFirst: r(), TReqLast: r(), TRespFirst: r()}
		if rng.IntN(10) > 0 {
			s.TRespLast = r()
		}
		var spans []event.Span
		for range rng.IntN(4) {
			a := r()
			spans = append(spans, event.Span{Start: a, End: a + rng.Int64N(500_000) - 50_000})
		}
		start, end := r(), r()
		decompose(s, start, end, spans, 1, 1)
		if got := sumParts(s); got != s.ClientUS {
			t.Fatalf("case %d: parts sum %d != client_us %d (%+v)", i, got, s.ClientUS, s)
		}
		for name, v := range map[string]int64{"client": s.ClientUS, "request": s.RequestUS, "queue": s.QueueUS,
			"exec": s.ExecUS, "stall": s.SendStallUS, "delivery": s.DeliveryUS, "server": s.ServerUS} {
			if v < 0 {
				t.Fatalf("case %d: %s_us = %d < 0 (%+v)", i, name, v, s)
			}
		}
		if !s.Joined {
			t.Fatalf("case %d: Joined not set", i)
		}
	}
}

func TestDecomposeParts(t *testing.T) {
	cases := []struct {
		name                                 string
		reqFirst, reqLast, respLast          int64
		start, end                           int64
		spans                                []event.Span
		request, queue, exec, stall, deliver int64
		notes                                int
	}{
		{name: "inside", reqFirst: 1000, reqLast: 1010, respLast: 2000, start: 1100, end: 1900,
			request: 10, queue: 90, exec: 800, deliver: 100},
		{name: "pool queue", reqFirst: 0, reqLast: 0, respLast: 23_290_000, start: 23_289_000, end: 23_289_120,
			queue: 23_289_000, exec: 120, deliver: 880},
		{name: "stall inside exec", reqFirst: 0, reqLast: 5, respLast: 10_000, start: 10, end: 9_000,
			spans:   []event.Span{{Start: 1_000, End: 4_000}, {Start: 8_500, End: 9_500}},
			request: 5, queue: 5, exec: 8_990 - 3_500, stall: 3_500, deliver: 1_000},
		{name: "overlapping spans counted once", reqFirst: 0, reqLast: 0, respLast: 100, start: 0, end: 100,
			spans: []event.Span{{Start: 10, End: 50}, {Start: 20, End: 60}}, exec: 50, stall: 50},
		{name: "start before last request byte", reqFirst: 1000, reqLast: 1500, respLast: 3000, start: 1200, end: 2000,
			request: 500, queue: 0, exec: 500, deliver: 1000, notes: 1},
		{name: "end after last response byte", reqFirst: 0, reqLast: 10, respLast: 1000, start: 500, end: 1500,
			request: 10, queue: 490, exec: 500, deliver: 0, notes: 1},
		{name: "rounding is no news", reqFirst: 0, reqLast: 10, respLast: 1000, start: 9, end: 1001,
			request: 10, exec: 990, notes: 0},
		{name: "server entirely after", reqFirst: 0, reqLast: 10, respLast: 100, start: 5_000, end: 6_000,
			request: 10, queue: 90, notes: 2},
		{name: "no response", reqFirst: 0, reqLast: 40, respLast: 0, start: 50, end: 60,
			request: 40, notes: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &event.Statement{TReqFirst: c.reqFirst, TReqLast: c.reqLast, TRespLast: c.respLast}
			decompose(s, c.start, c.end, c.spans, 1, 1)
			got := [5]int64{s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS}
			want := [5]int64{c.request, c.queue, c.exec, c.stall, c.deliver}
			if got != want {
				t.Errorf("parts (request queue exec stall delivery) = %v, want %v", got, want)
			}
			if len(s.Notes) != c.notes {
				t.Errorf("notes = %q, want %d", s.Notes, c.notes)
			}
			if s.ServerUS != max(c.end-c.start, 0) {
				t.Errorf("server_us = %d, want %d", s.ServerUS, c.end-c.start)
			}
			if sumParts(s) != s.ClientUS {
				t.Errorf("sum %d != client %d", sumParts(s), s.ClientUS)
			}
		})
	}
}

func TestDecomposeUsesStatementSpans(t *testing.T) {
	s := &event.Statement{TReqFirst: 0, TReqLast: 0, TRespLast: 1000,
		ZeroWindows: []event.Span{{Start: 100, End: 700}}}
	decompose(s, 0, 800, s.ZeroWindows, 1, 1+ServerTailUS)
	if s.SendStallUS != 600 || s.ExecUS != 200 || s.DeliveryUS != 200 {
		t.Fatalf("stall/exec/delivery = %d/%d/%d, want 600/200/200", s.SendStallUS, s.ExecUS, s.DeliveryUS)
	}
}

func TestDecomposeNoteNamesDirection(t *testing.T) {
	s := &event.Statement{TReqFirst: 1000, TReqLast: 1500, TRespLast: 3000}
	decompose(s, 700, 2000, nil, 100, 300)
	if len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "+800 us") || !strings.Contains(s.Notes[0], "100 us") {
		t.Fatalf("notes = %q", s.Notes)
	}
}

// A server start inside the request's own transfer (a long request, read
// while the statement's timer runs) is no clock error: the overlap is
// request time, said as such, and not counted as a clamp.
func TestDecomposeStartDuringLongRequest(t *testing.T) {
	s := &event.Statement{TReqFirst: 1000, TReqLast: 1500, TRespLast: 3000, ReqBytes: 4 << 20}
	c := decompose(s, 1200, 2000, nil, 100, 300)
	if s.RequestUS != 500 || s.QueueUS != 0 || s.ExecUS != 500 || s.DeliveryUS != 1000 || c.startMovedUS != 0 {
		t.Errorf("request/queue/exec/delivery %d/%d/%d/%d, clamp %+v", s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS, c)
	}
	if len(s.Notes) != 1 || !strings.Contains(s.Notes[0], "300 us before the request's last byte") || strings.Contains(s.Notes[0], "moved") {
		t.Errorf("notes = %q", s.Notes)
	}
}

// A statement seen on the application's host across a 5 ms link: the
// request reaches the server 5 ms after it left, the answer left the server
// 5 ms before it arrived.
func linkStatement() *event.Statement {
	return &event.Statement{TReqFirst: 1000, TReqLast: 1000, TRespFirst: 11_200, TRespLast: 11_210, TransitUS: 5000}
}

func checkSum(t *testing.T, s *event.Statement) {
	t.Helper()
	if sum := s.RequestUS + s.QueueUS + s.ExecUS + s.SendStallUS + s.DeliveryUS; sum != s.ClientUS {
		t.Errorf("parts sum to %d, client_us %d", sum, s.ClientUS)
	}
}

func TestDecomposeAcrossALink(t *testing.T) {
	cases := []struct {
		name                           string
		start, end, calErr             int64
		request, queue, exec, delivery int64
		startMovedUS                   int64
	}{
		// The server started 50 µs after the request arrived.
		{"queue beyond the clock error", 6050, 6200, 1, 5001, 49, 150, 5010, 0},
		// A start 200 µs before the request can have arrived is a clock
		// error: clamped to the arrival, nothing becomes queue.
		{"start before arrival", 5800, 6100, 1, 5000, 0, 100, 5110, 200},
		// A queue within the clock error stays in request.
		{"queue within the clock error", 6100, 6180, 300, 5100, 0, 80, 5030, 0},
		// The server's end after its last send (its tail) is delivery.
		{"end after the answer left", 6050, 6300, 1, 5001, 49, 160, 5000, 0},
	}
	for _, tc := range cases {
		s := linkStatement()
		c := decompose(s, tc.start, tc.end, nil, tc.calErr, tc.calErr+ServerTailUS)
		if s.RequestUS != tc.request || s.QueueUS != tc.queue || s.ExecUS != tc.exec || s.DeliveryUS != tc.delivery {
			t.Errorf("%s: request %d queue %d exec %d delivery %d, want %d %d %d %d", tc.name,
				s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS, tc.request, tc.queue, tc.exec, tc.delivery)
		}
		if c.startMovedUS != tc.startMovedUS {
			t.Errorf("%s: start moved %d, want %d", tc.name, c.startMovedUS, tc.startMovedUS)
		}
		checkSum(t, s)
	}
}

func TestDecomposeTransitLongerThanTheStatement(t *testing.T) {
	s := linkStatement()
	s.TransitUS = 8000 // more than half of the 10.21 ms: cut to half
	decompose(s, 6000, 6100, s.ZeroWindows, 1, 1+ServerTailUS)
	if s.RequestUS != 5105 || s.QueueUS != 0 || s.ExecUS != 0 || s.DeliveryUS != 5105 {
		t.Errorf("request %d queue %d exec %d delivery %d", s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS)
	}
	checkSum(t, s)
}

func TestStartWindowAcrossALink(t *testing.T) {
	s := linkStatement()
	if iv := startWindow(s, s.TRespFirst); iv.lo != 6000 || iv.hi != 6200 {
		t.Errorf("window %+v, want [6000, 6200]", iv)
	}
	s.TransitUS = 0
	if iv := startWindow(s, s.TRespFirst); iv.lo != 1000 || iv.hi != 11_200 {
		t.Errorf("local window %+v", iv)
	}
}
