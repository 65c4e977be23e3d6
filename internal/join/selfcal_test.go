package join

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// busyStream describes a synthetic capture + performance_schema run shaped
// like sysbench on a loaded host: back-to-back prepared statements (10-100
// µs, 10-300 µs apart), a server tail after the answer (rarely ms long),
// rows polled every 100 ms, wire statements emitted in 20 ms batches, and
// the server clock off by offset(t) after collect's calibration.
type busyStream struct {
	conns, perConn int
	gapUS          int64                 // upper bound of the client's think time
	offset         func(tUS int64) int64 // server clock error at capture time t
	lostRow        int                   // 1 in lostRow rows is lost (0: none)
	lostWire       int                   // 1 in lostWire statements is not captured
	origin         int64                 // collect's origin, so rows carry TimerStart
	noLongTails    bool                  // no ms-long server tails (they add notes)
}

// statement truth: the id of a row is its ServerUS (TimerWait), so a join's
// pairing can be checked exactly.
type streamOut struct {
	events []streamEvent
	want   map[*event.Statement]int64 // wire -> id of its row, absent when lost
}

type streamEvent struct {
	at   int64
	wire *event.Statement
	rows []collect.ServerStatement
}

func (b busyStream) generate(rng *rand.Rand) streamOut {
	out := streamOut{want: map[*event.Statement]int64{}}
	var rows []collect.ServerStatement
	var id int64
	for conn := uint64(1); conn <= uint64(b.conns); conn++ {
		t := int64(1_000_000) + rng.Int64N(1000)
		for range b.perConn {
			id++
			req := t
			start := req + 3 + rng.Int64N(30)
			answer := start + 5 + rng.Int64N(100)
			respLast := answer + rng.Int64N(20)
			end := answer + rng.Int64N(10)
			if !b.noLongTails && rng.IntN(200) == 0 {
				end += rng.Int64N(8000) // descheduled between send and TIMER_END
			}
			d := b.offset(start)
			r := collect.ServerStatement{ConnID: conn, ThreadID: conn + 100, EventName: "statement/com/Execute",
				EventID: uint64(id), StartUS: start + d, EndUS: end + d, TimerWait: uint64(id) * collect.PicosPerMicro}
			if b.origin != 0 {
				r.TimerStart = uint64(r.StartUS-b.origin) * collect.PicosPerMicro
				r.TimerEnd = uint64(r.EndUS-b.origin) * collect.PicosPerMicro
			}
			s := &event.Statement{Conn: fmt.Sprintf("10.0.0.1:%d>10.0.0.2:3306", 40000+conn), ConnID: conn,
				Cmd: "COM_STMT_EXECUTE", SQL: "SELECT c FROM t WHERE id=?",
				TReqFirst: req, TReqLast: req, TRespFirst: answer, TRespLast: respLast}
			rowLost := b.lostRow > 0 && rng.IntN(b.lostRow) == 0
			wireLost := b.lostWire > 0 && rng.IntN(b.lostWire) == 0
			if !rowLost {
				rows = append(rows, r)
			}
			if !wireLost {
				if !rowLost {
					out.want[s] = id
				}
				// The capture emits a statement when its answer is complete,
				// in batches flushed every 20 ms.
				out.events = append(out.events, streamEvent{at: ceilTo(respLast, 20_000), wire: s})
			}
			t = max(respLast, end) + 10 + rng.Int64N(b.gapUS)
		}
	}
	// The poller reads, every 100 ms, the rows that completed by then.
	slices.SortFunc(rows, func(a, b collect.ServerStatement) int { return int(a.EndUS - b.EndUS) })
	for len(rows) > 0 {
		poll := ceilTo(rows[0].EndUS-b.offset(rows[0].EndUS), 100_000) + 1
		n := 0
		for n < len(rows) && rows[n].EndUS-b.offset(rows[n].EndUS) < poll {
			n++
		}
		out.events = append(out.events, streamEvent{at: poll, rows: rows[:n:n]})
		rows = rows[n:]
	}
	slices.SortStableFunc(out.events, func(a, b streamEvent) int { return int(a.at - b.at) })
	return out
}

func ceilTo(v, step int64) int64 { return (v + step - 1) / step * step }

// run feeds the stream to j in arrival order, flushing as watch does.
func (o streamOut) run(j *Joiner) {
	last := int64(0)
	for _, e := range o.events {
		if e.at-last >= 100_000 {
			j.Flush(e.at)
			last = e.at
		}
		if e.wire != nil {
			j.AddWire(e.wire, e.at)
		} else {
			j.AddServer(e.rows, e.at)
		}
	}
	j.FlushAll()
}

// check asserts that ≥ 99.9% of the wire statements whose row exists were
// joined with their own row and that every part sums to client_us.
func (o streamOut) check(t *testing.T, j *Joiner) (right, wrong int) {
	t.Helper()
	for s, id := range o.want {
		switch {
		case !s.Joined:
		case s.ServerUS != id:
			wrong++
		default:
			right++
		}
		if s.Joined && sumParts(s) != s.ClientUS {
			t.Fatalf("parts do not sum: %+v", s)
		}
	}
	st := j.Stats()
	if right*1000 < len(o.want)*999 {
		t.Errorf("joined right %d, wrong %d of %d (%.3f%%), want >= 99.9%%; stats %+v",
			right, wrong, len(o.want), 100*float64(right)/float64(len(o.want)), st)
	}
	return right, wrong
}

func TestJoinSelfCalibratesConstantOffset(t *testing.T) {
	for _, off := range []int64{-2000, -300, -50, 0, 50, 300, 2000} {
		t.Run(fmt.Sprint(off), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(off+10_000)))
			b := busyStream{conns: 4, perConn: 5000, gapUS: 300, offset: func(int64) int64 { return off },
				lostRow: 2000, lostWire: 2000, origin: 1_000}
			out := b.generate(rng)
			j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
			out.run(j)
			out.check(t, j)
			st := j.Stats()
			if d := st.OffsetUS - off; d < -10 || d > 10 || st.OffsetErrorUS > 20 || st.OffsetSamples < offsetRing/2 {
				t.Errorf("learnt offset %d ± %d from %d pairs, true %d", st.OffsetUS, st.OffsetErrorUS, st.OffsetSamples, off)
			}
		})
	}
}

// Rows built without TimerStart (collect's origin unknown to the joiner)
// are corrected the same way.
func TestJoinSelfCalibratesWithoutTimerStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	b := busyStream{conns: 3, perConn: 3000, gapUS: 300, offset: func(int64) int64 { return 300 }}
	out := b.generate(rng)
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	out.run(j)
	out.check(t, j)
	if st := j.Stats(); st.OffsetUS < 290 || st.OffsetUS > 310 {
		t.Fatalf("offset %d, want ~300", st.OffsetUS)
	}
}

// The server clock drifts by 100 ppm (100 µs/s) away from the capture's,
// as an undisciplined crystal may (NTP-synchronised hosts stay within a
// few ppm; one host's own clocks do not drift): the estimate follows it.
func TestJoinSelfCalibratesDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	drift := func(tUS int64) int64 { return 100 + (tUS-1_000_000)/10_000 }
	b := busyStream{conns: 2, perConn: 15_000, gapUS: 300, offset: drift, lostRow: 2000, lostWire: 2000, origin: 1_000}
	out := b.generate(rng)
	var lastReq int64
	for s := range out.want {
		lastReq = max(lastReq, s.TReqFirst)
	}
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	out.run(j)
	out.check(t, j)
	if st, want := j.Stats(), drift(lastReq); st.OffsetUS < want-30 || st.OffsetUS > want+5 {
		t.Fatalf("offset %d at the end, drifted to %d", st.OffsetUS, want)
	}
	if drift(lastReq)-drift(1_000_000) < 250 {
		t.Fatalf("stream too short to drift: %d µs", drift(lastReq)-drift(1_000_000))
	}
}

// With a quiet connection (one statement every few ms) there is nothing to
// confuse, and the joiner must not hold statements back for long: the
// offset is still learnt.
func TestJoinSelfCalibratesQuietStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	b := busyStream{conns: 2, perConn: 400, gapUS: 20_000, offset: func(int64) int64 { return 300 }, origin: 1_000}
	out := b.generate(rng)
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	out.run(j)
	out.check(t, j)
	if st := j.Stats(); st.OffsetUS < 250 || st.OffsetUS > 350 {
		t.Fatalf("offset %d, want ~300", st.OffsetUS)
	}
}

// A burst of rows that fit no statement (one connection's rows shifted by
// 250 µs for 200 statements) is given up or matched poorly at expiry; it
// must not move the learnt offset.
func TestJoinMismatchBurstKeepsOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 19))
	b := busyStream{conns: 4, perConn: 4000, gapUS: 300, offset: func(int64) int64 { return 300 }, origin: 1_000}
	out := b.generate(rng)
	burst := 0
	for _, e := range out.events {
		for i := range e.rows {
			if r := &e.rows[i]; r.ConnID == 2 && r.EventID%4000 >= 2000 && r.EventID%4000 < 2200 {
				r.StartUS += 250
				r.EndUS += 250
				r.TimerStart += 250 * collect.PicosPerMicro
				burst++
			}
		}
	}
	j := New(Options{CalibrationErrorUS: 10, MaxWait: time.Second}, func(*event.Statement) {})
	var offsets []int64
	last := int64(0)
	for _, e := range out.events {
		if e.at-last >= 100_000 {
			j.Flush(e.at)
			last = e.at
			if st := j.Stats(); st.OffsetSamples > 0 {
				offsets = append(offsets, st.OffsetUS)
			}
		}
		if e.wire != nil {
			j.AddWire(e.wire, e.at)
		} else {
			j.AddServer(e.rows, e.at)
		}
	}
	j.FlushAll()
	if burst != 200 {
		t.Fatalf("burst of %d rows", burst)
	}
	for _, o := range offsets {
		if o < 290 || o > 310 {
			t.Fatalf("offset moved to %d during the run (%v)", o, offsets)
		}
	}
	right, wrong := 0, 0
	for s, id := range out.want {
		if s.Joined && s.ServerUS == id {
			right++
		} else if s.Joined {
			wrong++
		}
	}
	if right < len(out.want)-burst-len(out.want)/1000 {
		t.Fatalf("joined right %d of %d (burst %d, wrong %d)", right, len(out.want), burst, wrong)
	}
}

// Once the offset is learnt, joining a busy stream allocates nothing per
// statement: the estimator's ring and sort buffer are reused.
func TestJoinSelfCalibratedAllocations(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 21))
	b := busyStream{conns: 2, perConn: 40_000, gapUS: 300, offset: func(int64) int64 { return 300 },
		origin: 1_000, noLongTails: true}
	out := b.generate(rng)
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	i, last := 0, int64(0)
	step := func() {
		e := out.events[i]
		i++
		if e.at-last >= 100_000 {
			j.Flush(e.at)
			last = e.at
		}
		if e.wire != nil {
			j.AddWire(e.wire, e.at)
		} else {
			j.AddServer(e.rows, e.at)
		}
	}
	for i < len(out.events)/2 {
		step()
	}
	if st := j.Stats(); st.OffsetUS < 290 || st.OffsetUS > 310 || st.OffsetSamples < offsetRing/2 {
		t.Fatalf("offset not learnt by half-way: %+v", st)
	}
	n := (len(out.events) - i) / 2
	if allocs := testing.AllocsPerRun(n, step); allocs != 0 {
		t.Fatalf("%.2f allocations per event while tracking the offset", allocs)
	}
}
