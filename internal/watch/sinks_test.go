package watch

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func TestUnjoinedReason(t *testing.T) {
	cases := []struct {
		s    event.Statement
		want string
	}{
		{event.Statement{Joined: true, TRespLast: 5}, ""},
		{event.Statement{Cmd: "COM_QUIT"}, UnjoinedNoResponse},
		{event.Statement{TRespLast: 5, Notes: []string{"tls: no sql text"}}, UnjoinedTLS},
		{event.Statement{TRespLast: 5, Notes: []string{"statement text unknown: prepared before the capture started"}}, UnjoinedNoText},
		{event.Statement{TRespLast: 5, Notes: []string{"capture started mid-connection"}}, UnjoinedMidStream},
		{event.Statement{TRespLast: 5, Notes: []string{"incomplete: the response did not complete before the connection ended"}}, UnjoinedIncomplete},
		{event.Statement{TRespLast: 5}, UnjoinedNoServerRow},
	}
	for _, c := range cases {
		if got := UnjoinedReason(&c.s); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

type recordingSink struct {
	stmts int
	snaps []*Snapshot
}

func (r *recordingSink) Statement(*event.Statement) { r.stmts++ }
func (r *recordingSink) Snapshot(s *Snapshot)       { r.snaps = append(r.snaps, s) }

// The watch sink hands every statement to the run's sinks and tallies the
// unjoined by reason for the snapshots.
func TestSinksGetStatements(t *testing.T) {
	rec := &recordingSink{}
	k := newSink(10, nil)
	k.out = newFanout([]Sink{rec})
	k.add(&event.Statement{Joined: true, TRespLast: 1})
	k.add(&event.Statement{TRespLast: 1})
	k.add(&event.Statement{Cmd: "COM_QUIT"})
	if rec.stmts != 3 || k.out.unjoined[UnjoinedNoServerRow] != 1 || k.out.unjoined[UnjoinedNoResponse] != 1 {
		t.Errorf("sink got %d statements, unjoined %v", rec.stmts, k.out.unjoined)
	}
	newSink(10, nil).add(&event.Statement{}) // no sinks: no fan-out
}
