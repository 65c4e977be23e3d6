package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// BenchmarkJoin measures one wire statement plus its server row through
// the joiner, over 1,000 connections, rows polled in batches of 256.
func BenchmarkJoin(b *testing.B) {
	const conns, batch = 1000, 256
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	stmts := make([]event.Statement, 4*batch)
	rows := make([]collect.ServerStatement, 0, batch)
	b.ReportAllocs()
	var t0 int64
	for i := 0; b.Loop(); i++ {
		t0 += 100
		s := &stmts[i%len(stmts)]
		*s = event.Statement{Conn: "10.0.0.1:4000>10.0.0.2:3306", ConnID: uint64(i%conns + 1), Cmd: "COM_STMT_EXECUTE",
			SQL: "SELECT c FROM sbtest1 WHERE id=?", TReqFirst: t0, TReqLast: t0, TRespLast: t0 + 90}
		j.AddWire(s, t0)
		rows = append(rows, collect.ServerStatement{ConnID: s.ConnID, EventName: "statement/com/Execute",
			StartUS: t0 + 10, EndUS: t0 + 80, TimerWait: 70_000_000})
		if len(rows) == batch {
			j.AddServer(rows, t0)
			j.Flush(t0)
			rows = rows[:0]
		}
	}
	if st := j.Stats(); st.Joined < st.Wire-batch {
		b.Fatalf("joined %d of %d", st.Joined, st.Wire)
	}
}

// BenchmarkJoinQueryText is BenchmarkJoin with text queries (COM_QUERY):
// each row's text is hashed once and compared with its query's, which
// costs what the statement-id executes do not.
func BenchmarkJoinQueryText(b *testing.B) {
	const conns, batch = 1000, 256
	j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
	stmts := make([]event.Statement, 4*batch)
	rows := make([]collect.ServerStatement, 0, batch)
	const text = "SELECT c FROM sbtest1 WHERE id=5012"
	hash := sqltext.TextHashString(text)
	b.ReportAllocs()
	var t0 int64
	for i := 0; b.Loop(); i++ {
		t0 += 100
		s := &stmts[i%len(stmts)]
		*s = event.Statement{Conn: "10.0.0.1:4000>10.0.0.2:3306", ConnID: uint64(i%conns + 1), Cmd: "COM_QUERY",
			SQL: "SELECT c FROM sbtest1 WHERE id=?", TextHash: hash, TReqFirst: t0, TReqLast: t0, TRespLast: t0 + 90}
		j.AddWire(s, t0)
		rows = append(rows, collect.ServerStatement{ConnID: s.ConnID, EventName: "statement/sql/select", SQLText: text,
			StartUS: t0 + 10, EndUS: t0 + 80, TimerWait: 70_000_000})
		if len(rows) == batch {
			j.AddServer(rows, t0)
			j.Flush(t0)
			rows = rows[:0]
		}
	}
	if st := j.Stats(); st.Joined < st.Wire-batch {
		b.Fatalf("joined %d of %d", st.Joined, st.Wire)
	}
}

// BenchmarkJoinWrappedPoll is watch under load: 4 connections, their wire
// statements in first, then one poll of 10,000 rows in the order a wrapped
// history ring is read (its newest 40% first, then the older 60%). ns/stmt
// is the joiner's cost per statement; a joiner that sorted each row into
// place on arrival, or re-scanned its buffer on every match, goes
// quadratic here.
func BenchmarkJoinWrappedPoll(b *testing.B) {
	const conns, n = 4, 10_000
	stmts := make([]event.Statement, n)
	rows := make([]collect.ServerStatement, n)
	b.ReportAllocs()
	for b.Loop() {
		j := New(Options{CalibrationErrorUS: 10}, func(*event.Statement) {})
		for i := range n {
			t0 := int64(i) * 100
			stmts[i] = event.Statement{Conn: "10.0.0.1:4000>10.0.0.2:3306", ConnID: uint64(i%conns + 1), Cmd: "COM_STMT_EXECUTE",
				SQL: "SELECT c FROM sbtest1 WHERE id=?", TReqFirst: t0, TReqLast: t0, TRespLast: t0 + 90}
			j.AddWire(&stmts[i], t0)
		}
		split := n * 6 / 10 // ring storage order after a wrap: newest first
		for k := range n {
			i := (k + split) % n
			t0 := int64(i) * 100
			rows[k] = collect.ServerStatement{ConnID: uint64(i%conns + 1), EventID: uint64(i), EventName: "statement/com/Execute",
				StartUS: t0 + 10, EndUS: t0 + 80, TimerWait: 70_000_000}
		}
		j.AddServer(rows, n*100)
		if st := j.Stats(); st.Joined != n {
			b.Fatalf("joined %d of %d", st.Joined, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/stmt")
}
