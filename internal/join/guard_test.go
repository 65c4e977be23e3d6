package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// A two-statement request whose second row never arrives (the ring lost
// it): joined with its first row alone, 100 ms of the server's work would
// read as delivery for 121 bytes on loopback. The split is withheld, the
// client and server times kept, the reason typed.
func TestGuardWithholdsAnUnexplainedDelivery(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT ?; SELECT SLEEP(?)", 0, 100_300)
	s.RespBytes = 121
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT 1; SELECT SLEEP(0.1)", 100, 150)}, readAfter)
	if len(rec.out) != 1 {
		t.Fatalf("emitted %d", len(rec.out))
	}
	if s.Joined || s.Why != event.UnexplainedDelivery || s.DeliveryUS != 0 || s.ExecUS != 0 {
		t.Fatalf("joined %v reason %v exec %d delivery %d: the missing row's 100 ms must not read as delivery", s.Joined, s.Why, s.ExecUS, s.DeliveryUS)
	}
	if s.ClientUS != 100_300 || s.ServerUS != 50 {
		t.Errorf("client %d server %d: what was measured is kept", s.ClientUS, s.ServerUS)
	}
	if st := j.Stats(); st.Withheld != 1 || st.Wire != st.Joined+st.UnjoinedWire {
		t.Errorf("stats %+v", st)
	}
}

// What the wire explains is never withheld: a slow client's zero window,
// a retransmit, a big response across a slow link, or a short delivery.
func TestGuardKeepsExplainedDeliveries(t *testing.T) {
	base := func() *event.Statement {
		return &event.Statement{TReqFirst: 0, TReqLast: 0, TRespFirst: 1_000, TRespLast: 500_000, Parts: event.Parts{ClientUS: 500_000, ExecUS: 1_000, DeliveryUS: 499_000}, RespBytes: 200}
	}
	for name, s := range map[string]*event.Statement{
		"zero window": func() *event.Statement { s := base(); s.ZeroWindowUS = 400_000; return s }(),
		"retransmit":  func() *event.Statement { s := base(); s.Retransmits = 1; return s }(),
		"big across a link": func() *event.Statement {
			s := base()
			s.TransitUS, s.RespBytes = 20_000, 10<<20
			return s
		}(),
		"short": func() *event.Statement { s := base(); s.DeliveryUS = 15_000; return s }(),
	} {
		if unexplainedDelivery(s) {
			t.Errorf("%s: withheld, though the wire explains it", name)
		}
	}
	if !unexplainedDelivery(base()) {
		t.Error("half a second to deliver 200 bytes on the server's host, with nothing on the wire to show for it: not caught")
	}
}
