package watch

import (
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/txn"
)

// The benchmarks here measure, per statement, the part of watch's path that
// needs no server: the capture callback's hand-off (wireStage.take), the joiner and
// the sink (profile, window, pool groups, worst list). Capture decoding has
// its own benchmarks in internal/capture; scripts/bench-watch.sh measures the
// whole process against a server.
//
// The synthetic traffic looks like sysbench oltp_point_select at 20k
// statements/s seen through a 200 ms poll: 64 connections, prepared point
// selects over 16 digests, 4,000 wire statements then their 4,000 server rows
// per batch.

const (
	benchConns   = 64
	benchDigests = 16
	benchBatch   = 4000 // 20k statements/s x 200 ms poll interval
	benchServer  = "127.0.0.1:3306"
)

// cpuClock reports the process's CPU time per operation beside ns/op: on a
// shared machine (load average above the core count) wall time per op
// mostly measures waiting for a core, CPU time what the code costs. It
// counts every thread of the process, so GC work is included.
type cpuClock struct{ start time.Duration }

func startCPU(b *testing.B) *cpuClock {
	b.Helper()
	return &cpuClock{start: processCPU(b)}
}

func (c *cpuClock) report(b *testing.B) {
	b.Helper()
	if b.N > 0 {
		b.ReportMetric(float64(processCPU(b)-c.start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// synth builds matching wire statements and server rows for one batch that
// starts at t0 (µs); statement i runs on connection i % benchConns.
type synth struct {
	conns   []string // "client>server" per connection
	sqls    []string
	digests []string
	wire    []event.Statement // templates, copied before each use
	rows    []collect.ServerStatement
	eventID []uint64 // per connection
}

func newSynth() *synth {
	s := &synth{eventID: make([]uint64, benchConns)}
	for c := range benchConns {
		s.conns = append(s.conns, "127.0.0.1:"+strconv.Itoa(40000+c)+">"+benchServer)
	}
	for d := range benchDigests {
		s.sqls = append(s.sqls, fmt.Sprintf("SELECT c FROM sbtest%d WHERE id=?", d+1))
		s.digests = append(s.digests, fmt.Sprintf("%032x", d+1))
	}
	s.wire = make([]event.Statement, benchBatch)
	s.rows = make([]collect.ServerStatement, benchBatch)
	return s
}

// fill lays out one batch: each connection's statements follow each other
// with 50 µs between them; the server starts 10 µs after the request and
// ends 40 µs later, before the response's last byte.
func (s *synth) fill(t0 int64) {
	for i := range benchBatch {
		c := i % benchConns
		t := t0 + int64(i/benchConns)*50
		d := i % benchDigests
		s.wire[i] = event.Statement{Conn: s.conns[c], ConnID: uint64(c + 1), Cmd: "COM_STMT_EXECUTE",
			SQL: s.sqls[d], TReqFirst: t, TReqLast: t + 2, TRespFirst: t + 30, TRespLast: t + 35,
			Parts: event.Parts{ClientUS: 35}, Rows: 1, ReqBytes: 30, RespBytes: 200}
		s.eventID[c] += 2
		s.rows[i] = collect.ServerStatement{ThreadID: uint64(c + 100), EventID: s.eventID[c],
			EndEventID: s.eventID[c] + 1, ConnID: uint64(c + 1), EventName: "statement/com/Execute",
			Digest: s.digests[d], DigestText: s.sqls[d], StartUS: t + 12, EndUS: t + 33, TimerWait: 21_000_000, RowsSent: 1}
	}
}

// wireCopies returns fresh statements for a batch: the joiner keeps the
// pointers it is given until it emits them, as the capture hands over a new
// statement each time.
func wireCopies(tmpl []event.Statement, into []event.Statement) []event.Statement {
	into = into[:len(tmpl)]
	copy(into, tmpl)
	return into
}

// BenchmarkSinkAdd is the sink alone, per joined statement, in the steady
// state (window full, digests known).
func BenchmarkSinkAdd(b *testing.B) {
	s := newSynth()
	s.fill(1_700_000_000_000_000)
	group := 1
	for i := range s.wire {
		s.wire[i].Joined, s.wire[i].Digest, s.wire[i].PoolGroup = true, s.rows[i].Digest, &group
	}
	k := testTally(benchBatch, newOutputQueue(nil), false)
	for i := range s.wire {
		k.add(&s.wire[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	for i := 0; b.Loop(); i++ {
		k.add(&s.wire[i%benchBatch])
	}
	cpu.report(b)
}

// TestSinkAddAllocFree pins the sink's steady state as allocation-free: at
// 20k statements/s an allocation per statement is garbage the collector
// must chase while the capture runs.
func TestSinkAddAllocFree(t *testing.T) {
	s := newSynth()
	s.fill(1_700_000_000_000_000)
	for i := range s.wire {
		s.wire[i].Joined, s.wire[i].Digest = true, s.rows[i].Digest
	}
	k := testTally(benchBatch, newOutputQueue(nil), false)
	for i := range s.wire {
		k.add(&s.wire[i])
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		k.add(&s.wire[i%benchBatch])
		i++
	})
	if allocs != 0 {
		t.Fatalf("sink.add allocates %.2f times per statement in the steady state, want 0", allocs)
	}
	if k.total != 10_001+benchBatch {
		t.Fatalf("sink counted %d statements, want %d", k.total, 10_001+benchBatch)
	}
}

// joinBench runs b.N statements through joiner + sink in batches: the wire
// statements of a batch, then (withServer) their server rows, then the
// joiner's periodic flush. It checks every statement came out, joined when
// the server rows were given.
func joinBench(b *testing.B, withServer bool) {
	s := newSynth()
	k := testTally(50_000, newOutputQueue(nil), false)
	j := join.New(join.Options{MaxWait: 5 * time.Second}, func(st *event.Statement) { k.add(st) })
	fresh := make([]event.Statement, benchBatch)
	t0 := int64(1_700_000_000_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU(b)
	// The input is built inside the timed loop: b.StopTimer stops the world
	// to read memory stats, which on a loaded machine costs more than what
	// is measured. BenchmarkSynthFill is that input cost alone.
	for done := 0; done < b.N; {
		n := min(benchBatch, b.N-done)
		s.fill(t0)
		fresh = wireCopies(s.wire[:n], fresh)
		for i := range fresh {
			j.AddWire(&fresh[i], t0)
		}
		if withServer {
			j.AddServer(s.rows[:n], t0+200_000)
			j.Flush(t0 + 200_000) // the engine flushes every 100 ms
		} else {
			j.Flush(t0 + 6_000_000) // past MaxWait: all of the batch leaves unjoined
		}
		done += n
		t0 += 200_000
	}
	j.FlushAll()
	b.StopTimer()
	cpu.report(b)
	checkJoinBench(b, k, j, withServer)
}

// BenchmarkSynthFill is the cost of building the joiner benchmarks' input
// (per statement), to subtract from theirs.
func BenchmarkSynthFill(b *testing.B) {
	s := newSynth()
	fresh := make([]event.Statement, benchBatch)
	t0 := int64(1_700_000_000_000_000)
	b.ReportAllocs()
	cpu := startCPU(b)
	for done := 0; done < b.N; done += benchBatch {
		n := min(benchBatch, b.N-done)
		s.fill(t0)
		fresh = wireCopies(s.wire[:n], fresh)
		t0 += 200_000
	}
	cpu.report(b)
}

func checkJoinBench(b *testing.B, k *tally, j *join.Joiner, withServer bool) {
	st := j.Stats()
	if k.total != int64(b.N) || st.Wire != int64(b.N) {
		b.Fatalf("sink saw %d statements, joiner %d, want %d", k.total, st.Wire, b.N)
	}
	if withServer && st.Joined != int64(b.N) {
		b.Fatalf("joined %d of %d (stats %+v)", st.Joined, b.N, st)
	}
	if !withServer && st.UnjoinedWire != int64(b.N) {
		b.Fatalf("unjoined %d of %d (stats %+v)", st.UnjoinedWire, b.N, st)
	}
}

// BenchmarkJoinSink is a wire statement's way through the joiner to the
// sink when its server row arrives: the healthy case.
func BenchmarkJoinSink(b *testing.B) { joinBench(b, true) }

// BenchmarkJoinSinkUnjoined is the same when no server row comes (no
// performance_schema, or the ring lost it): statements leave by expiry.
func BenchmarkJoinSinkUnjoined(b *testing.B) { joinBench(b, false) }

// BenchmarkWireTake is the capture callback's hand-off: the own-connection
// filter, the outlier rule and the non-blocking queue send, with the engine
// loop's receive.
func BenchmarkWireTake(b *testing.B) {
	own := newOwnAddrs()
	w := newWireStage(own, 1024, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1))
	for p := range 4 { // watch's own pool connections
		own.add("127.0.0.1:" + strconv.Itoa(50000+p))
	}
	s := newSynth()
	s.fill(1_700_000_000_000_000)
	b.ReportAllocs()
	cpu := startCPU(b)
	for i := 0; b.Loop(); i++ {
		w.take(&s.wire[i%benchBatch])
		<-w.out
	}
	cpu.report(b)
	if w.queueDrops.Load() != 0 || w.ownHits.Load() != 0 {
		b.Fatalf("drops %d, own %d: the hand-off lost statements", w.queueDrops.Load(), w.ownHits.Load())
	}
}

// TestWireTakeAllocFree: the capture goroutine's callback must not
// allocate (it runs once per statement on the goroutine that drains the
// ring).
func TestWireTakeAllocFree(t *testing.T) {
	own := newOwnAddrs()
	w := newWireStage(own, 1, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1))
	own.add("127.0.0.1:50000")
	st := &event.Statement{Conn: "127.0.0.1:40000>" + benchServer}
	mine := &event.Statement{Conn: "127.0.0.1:50000>" + benchServer}
	allocs := testing.AllocsPerRun(1000, func() {
		w.take(st)
		<-w.out
		w.take(mine)
	})
	if allocs != 0 {
		t.Fatalf("take allocates %.2f times per call, want 0", allocs)
	}
	if w.ownHits.Load() != 1001 {
		t.Fatalf("own statements filtered: %d, want 1001", w.ownHits.Load())
	}
}
