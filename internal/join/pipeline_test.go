package join

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// pipeline is a pipelined batch on one connection as a driver sends it
// (Connector/J's useBatchMultiSend, Node mariadb's pipelining): every
// request written at t0, before the first answer; the server runs them in
// order, each ~20 ms, starting the next a few µs after it sent the
// previous one's answer and recorded its end.
type pipeline struct {
	wires []*event.Statement
	rows  []collect.ServerStatement // on the capture's clock, shifted by the test's clock error
	start []int64                   // each statement's true server start
	end   []int64                   // and end
}

const (
	pipeConn = 9
	pipeT0   = 1_000_000_000
	pipeExec = 20_000
)

// newPipeline builds n statements; shift is added to the rows' times (a
// clock error the calibration did not see).
func newPipeline(n int, shift int64) *pipeline {
	p := &pipeline{}
	s := int64(pipeT0 + 60) // the server reads the first request 60 µs after it was sent
	for k := range n {
		req := int64(pipeT0 + 4*k) // the driver writes the requests one after the other
		e := s + pipeExec + int64(k*37%300)
		answer := e - 5 // the server sends the OK, then records the end
		w := wire(pipeConn, "COM_QUERY", "DO SLEEP(?)", req, answer)
		w.RespBytes = 11
		p.wires = append(p.wires, w)
		r := row(pipeConn, "statement/sql/do", "DO SLEEP(0.02)", s+shift, e+shift)
		r.EventID, r.EndEventID, r.ThreadID = uint64(10*k+1), uint64(10*k+9), pipeConn+100
		p.rows = append(p.rows, r)
		p.start, p.end = append(p.start, s), append(p.end, e)
		s = e + 12
	}
	return p
}

// rowsOf returns the rows of statements [from, to) not in missing, read
// from source (a targeted read when it is a thread's own table).
func (p *pipeline) rowsOf(from, to int, missing map[int]bool, source string) []collect.ServerStatement {
	var out []collect.ServerStatement
	for k := from; k < min(to, len(p.rows)); k++ {
		if missing[k] {
			continue
		}
		r := p.rows[k]
		r.Source, r.Targeted = source, source != collect.SourceHistoryLong
		out = append(out, r)
	}
	return out
}

func span(from, to int) map[int]bool {
	m := map[int]bool{}
	for k := from; k < to; k++ {
		m[k] = true
	}
	return m
}

// A pipeline of 30 fed to the joiner as watch feeds it: the capture hands
// the statements over as their answers come; history_long's periodic read
// returns the rows that ended since the last one, but the ring turned over
// while the batch ran and some were lost; the read of the last outlier's
// thread returns that thread's 10-row history. Each statement's queue is
// its wait behind the connection's earlier requests, its exec its own
// server time, its delivery its transfer (0 here: loopback, 11 bytes).
// A statement whose row no read returned is split from the wire when the
// wire alone shows it: its request was at the server before the previous
// answer began, so the server ran it from the previous answer to its own.
// The first of a batch has nothing before it on its connection: its start,
// and so its queue, the wire cannot tell; without its row it stays
// unjoined.
func TestJoinPipelineOfThirty(t *testing.T) {
	const n = 30
	cases := []struct {
		name     string
		lost     map[int]bool // rows no read returns
		early    int          // rows 0..early-1 reach the joiner through a history_long read during the batch
		shift    int64        // the rows' clock error
		claimErr int64        // the calibration's claimed error
	}{
		{name: "all rows", lost: map[int]bool{}, early: 8, claimErr: 30},
		{name: "ring turned over mid-batch", lost: span(8, 18), early: 8, claimErr: 30},
		{name: "first rows lost", lost: span(0, 10), early: 0, claimErr: 30},
		{name: "rows late by the clock's error", lost: span(8, 18), early: 8, shift: 25, claimErr: 30},
		{name: "rows early by the clock's error", lost: span(8, 18), early: 8, shift: -25, claimErr: 30},
		// The calibration is off by ten times what it claims (a loaded
		// host): the rows still fit their statements, and the joiner
		// must not learn an origin from the pipeline's wide windows.
		{name: "claim off by 300 us", lost: span(8, 18), early: 8, shift: 300, claimErr: 30},
		{name: "claim off by -300 us", lost: map[int]bool{}, early: 8, shift: -300, claimErr: 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPipeline(n, c.shift)
			rec := newRecorder(t)
			j := New(Options{CalibrationErrorUS: c.claimErr}, rec.emit)
			// The capture hands the statements over in chunks as their
			// answers come (its pace); history_long's read during the
			// batch returns the first rows.
			for k := range 9 {
				j.AddWire(p.wires[k], p.wires[k].TRespLast+25_000)
			}
			if c.early > 0 {
				j.AddServer(p.rowsOf(0, c.early, c.lost, collect.SourceHistoryLong), p.wires[8].TRespLast+1000)
			}
			for k := 9; k < n; k++ {
				j.AddWire(p.wires[k], p.wires[k].TRespLast+25_000)
			}
			// The last outlier's thread: its history keeps the last 10.
			last := p.wires[n-1].TRespLast
			j.AddThreadRows(p.rowsOf(n-10, n, c.lost, collect.SourceHistory), last+30_000)
			// history_long's next read: the ring lost what is in c.lost;
			// watch drops the rows the thread's read fed already.
			j.AddServerLost(p.rowsOf(c.early, n-10, c.lost, collect.SourceHistoryLong), last+500_000)
			j.Flush(last + 6_000_000)
			j.FlushAll()
			if len(rec.out) != n {
				t.Fatalf("emitted %d of %d", len(rec.out), n)
			}
			for k, s := range p.wires {
				checkPipelined(t, p, k, s, c.lost[k], c.shift)
			}
			if st := j.Stats(); st.Withheld != 0 || st.Joined+st.WireSplit+st.UnjoinedWire != n {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// checkPipelined holds statement k to the truth: its row's times when the
// row was read, the wire's when it was lost.
func checkPipelined(t *testing.T, p *pipeline, k int, s *event.Statement, lost bool, shift int64) {
	t.Helper()
	desc := fmt.Sprintf("statement %d: joined %v (%v, %s) request %d queue %d exec %d delivery %d server %d notes %v", k,
		s.Joined, s.Why, s.JoinSource, s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS, s.ServerUS, s.Notes)
	if s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
		t.Errorf("%s: the parts do not sum to client_us %d", desc, s.ClientUS)
	}
	if lost && k == 0 {
		// Nothing before it on the connection: the wire does not show
		// when the server started it.
		if s.Joined || s.Why != event.NoRow || s.QueueUS != 0 || s.ExecUS != 0 {
			t.Errorf("%s: want unjoined for want of its row", desc)
		}
		return
	}
	if !s.Joined {
		t.Errorf("%s: not joined", desc)
		return
	}
	wantStart := max(p.start[k]+shift, s.TReqLast) // a start before the request is a clock error: clamped
	wantEnd := min(p.end[k]+shift, s.TRespLast)
	if lost {
		if s.JoinSource != SourceWire {
			t.Errorf("%s: source %q, want %q", desc, s.JoinSource, SourceWire)
		}
		if !strings.Contains(strings.Join(s.Notes, " "), "pipelined") {
			t.Errorf("%s: the note does not say the split is the wire's", desc)
		}
		// From the previous answer's last byte to its own.
		wantStart, wantEnd = p.wires[k-1].TRespLast, s.TRespLast
	} else if s.JoinSource == SourceWire || s.ServerUS != (p.end[k]-p.start[k]) {
		t.Errorf("%s: not joined with its own row (server time %d)", desc, p.end[k]-p.start[k])
	}
	if want := wantStart - s.TReqLast; s.QueueUS != want {
		t.Errorf("%s: queue %d, want %d (its wait behind the %d requests before it)", desc, s.QueueUS, want, k)
	}
	if want := wantEnd - wantStart; s.ExecUS != want {
		t.Errorf("%s: exec %d, want %d", desc, s.ExecUS, want)
	}
	if want := s.TRespLast - wantEnd; s.DeliveryUS != want {
		t.Errorf("%s: delivery %d, want %d", desc, s.DeliveryUS, want)
	}
	if d := s.ExecUS - pipeExec; d < -pipeExec/20 || d > pipeExec/20 {
		t.Errorf("%s: exec not within 5%% of %d", desc, pipeExec)
	}
}

// Node's mariadb connector, ten pipelined SELECT SLEEP(0.05) on loopback
// (a 10 µs round trip): paired with its predecessor's row, a statement
// read 19 ms of delivery for a 60-byte answer, under the delivery guard's
// 20 ms floor. A row that ended 19 ms before the answer's first byte is
// not this statement's (the server ends a statement after it began to
// answer it): it is never paired, however short the delivery it would
// show, and the statement waits for its own row.
func TestJoinRowEndedBeforeTheAnswerIsNotItsRow(t *testing.T) {
	rec := newRecorder(t)
	j := New(Options{CalibrationErrorUS: 30}, rec.emit)
	s := wire(1, "COM_QUERY", "SELECT SLEEP(?)", 0, 100_000)
	s.TRespFirst, s.RespBytes = 99_990, 60
	j.AddWire(s, 0)
	j.AddServer([]collect.ServerStatement{row(1, "statement/sql/select", "SELECT SLEEP(0.05)", 31_000, 81_000)}, readAfter)
	j.Flush(10_000_000) // at expiry too
	if len(rec.out) != 1 {
		t.Fatalf("emitted %d", len(rec.out))
	}
	if s.Joined || s.QueueUS != 0 || s.DeliveryUS != 0 || s.ServerUS != 0 {
		t.Fatalf("joined %v reason %v queue %d delivery %d server %d notes %v: a row that ended 19 ms before the answer is not its row",
			s.Joined, s.Why, s.QueueUS, s.DeliveryUS, s.ServerUS, s.Notes)
	}
	// The server's end within the clock's error of the answer is normal.
	ok := wire(2, "COM_QUERY", "SELECT SLEEP(?)", 0, 50_100)
	j.AddWire(ok, 0)
	j.AddServer([]collect.ServerStatement{row(2, "statement/sql/select", "SELECT SLEEP(0.05)", 60, 50_080)}, readAfter)
	if !ok.Joined || ok.DeliveryUS != 20 {
		t.Errorf("a server end 20 us before the answer's last byte: joined %v delivery %d %v", ok.Joined, ok.DeliveryUS, ok.Notes)
	}
	j.FlushAll()
	if st := j.Stats(); st.UnmatchedServer != 1 || st.Joined != 1 || st.Withheld != 0 {
		t.Errorf("stats %+v: want the early row unmatched, the other joined", st)
	}
}
