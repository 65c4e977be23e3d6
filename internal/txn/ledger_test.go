package txn

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

const ms = 1_000

// stmt builds a wire statement of conn: its request at req, its response
// first and last byte at resp; joined with no queue when joined is set
// (exec spans from the request to the response).
func stmt(conn string, id uint64, sql string, req, resp int64, info event.TxnInfo) *event.Statement {
	s := &event.Statement{
		Conn: conn, ConnID: id, User: "app", Cmd: "COM_QUERY", SQL: sql, DigestText: sql, Digest: "d:" + sql,
		TReqFirst: req, TReqLast: req, TRespFirst: resp, TRespLast: resp, TxnInfo: info,
	}
	s.ClientUS = resp - req
	return s
}

func joined(s *event.Statement) *event.Statement {
	s.Joined = true
	s.ExecUS = s.TRespFirst - s.TReqLast
	s.ServerUS = s.ExecUS
	return s
}

// feed hands statements to the ledger as watch does: each through Wire in
// wire order, then through Finished.
func feed(l *Ledger, stmts ...*event.Statement) {
	for _, s := range stmts {
		l.Wire(s)
	}
	for _, s := range stmts {
		l.Finished(s, false, func(*event.Statement) {})
	}
}

// The field report's case: a transaction updates row 7 and its
// application idles 1.3 s before COMMIT; another connection's update of
// row 7 waits those 1.3 s.
func rowLockCase() (blocker []*event.Statement, victim *event.Statement) {
	a, b := "10.0.0.1:5001>10.0.0.9:3306", "10.0.0.2:5002>10.0.0.9:3306"
	blocker = []*event.Statement{
		joined(stmt(a, 10, "begin", 0, 100, event.TxnInfo{TxnSeq: 1, TxnStartUS: 0})),
		joined(stmt(a, 10, "update t set v = v + ? where id = ?", 1*ms, 1*ms+200, event.TxnInfo{TxnSeq: 1, TxnStartUS: 0, TxnIdleBeforeUS: 900})),
		joined(stmt(a, 10, "commit", 1301*ms, 1301*ms+150, event.TxnInfo{TxnSeq: 1, TxnStartUS: 0, TxnIdleBeforeUS: 1300*ms - 200, TxnEnd: event.TxnEndCommit})),
	}
	victim = joined(stmt(b, 11, "update t set v = v + ? where id = ?", 100*ms, 1301*ms+250, event.TxnInfo{}))
	return blocker, victim
}

func TestRowLockAfterTheFact(t *testing.T) {
	for _, c := range []struct {
		name       string
		counter    func(int64, int64) (int64, bool)
		want       bool
		confidence string
	}{
		{"no counters", nil, true, event.ConfidenceLow},
		{"counted", func(int64, int64) (int64, bool) { return 1, true }, true, event.ConfidenceHigh},
		{"counted none", func(int64, int64) (int64, bool) { return 0, true }, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var txns []*event.Transaction
			l := New(Options{RowLockWaits: c.counter, Emit: func(x *event.Transaction) { txns = append(txns, x) }})
			blocker, victim := rowLockCase()
			feed(l, append(blocker, victim)...)
			l.Tick(1301*ms + 150 + 1_000*ms) // within the grace: not written yet
			if len(txns) != 0 {
				t.Fatalf("transaction written %d µs after its end, before the grace", 1_000*ms)
			}
			l.Tick(1301*ms + 150 + 2_001*ms)
			if !c.want {
				if victim.LockWait != nil {
					t.Fatalf("attributed a wait the server did not count: %+v", victim.BlockedBy)
				}
				return
			}
			if victim.LockWait == nil {
				t.Fatal("no lock wait attributed")
			}
			if want := int64(1301*ms+150) - 100*ms; victim.LockWaitUS != want {
				t.Errorf("lock wait %d µs, want %d", victim.LockWaitUS, want)
			}
			b := victim.BlockedBy
			if b.ConnID != 10 || b.Kind != event.LockRow || b.State != event.BlockerIdleInTxn || b.Confidence != c.confidence || b.Source != event.LockSourceWire {
				t.Errorf("blocker %+v", b)
			}
			if b.SQL != "update t set v = v + ? where id = ?" || b.IdleUS != 1300*ms-200 || b.HeldUS != 1301*ms+150 {
				t.Errorf("blocker's statement %q idle %d held %d", b.SQL, b.IdleUS, b.HeldUS)
			}
			if len(txns) != 1 {
				t.Fatalf("%d transactions emitted", len(txns))
			}
			x := txns[0]
			if x.Blocked != 1 {
				t.Errorf("blocked %d, want 1", x.Blocked)
			}
			if x.Statements != 3 || x.EndKind != "commit" || x.InAppUS != 900+1300*ms-200 || x.MaxIdleUS != 1300*ms-200 || x.LeadSQL != "update t set v = v + ? where id = ?" || x.ServerUS != 450 {
				t.Errorf("transaction %+v", x)
			}
		})
	}
}

// The metadata-lock pile-up: a transaction read m and idles; an ALTER of
// m waits for it; selects of m queue behind the ALTER. Each select's
// blocker is the ALTER, their root the idle transaction.
func TestMetadataChainAfterTheFact(t *testing.T) {
	a, d := "10.0.0.1:5001>10.0.0.9:3306", "10.0.0.3:5003>10.0.0.9:3306"
	var stmts []*event.Statement
	stmts = append(stmts,
		joined(stmt(a, 10, "begin", 0, 100, event.TxnInfo{TxnSeq: 1})),
		joined(stmt(a, 10, "select * from m where id = ?", 1*ms, 1*ms+300, event.TxnInfo{TxnSeq: 1, TxnIdleBeforeUS: 900})),
		joined(stmt(a, 10, "commit", 1500*ms, 1500*ms+100, event.TxnInfo{TxnSeq: 1, TxnIdleBeforeUS: 1499*ms - 300, TxnEnd: event.TxnEndCommit})),
		joined(stmt(d, 12, "alter table m add column x int", 200*ms, 1530*ms, event.TxnInfo{})),
	)
	var selects []*event.Statement
	for i := range 5 {
		c := fmt.Sprintf("10.0.0.4:%d>10.0.0.9:3306", 6000+i)
		s := joined(stmt(c, uint64(20+i), "select * from m where id = ?", int64(400+i)*ms, 1530*ms+int64(50+10*i), event.TxnInfo{}))
		selects = append(selects, s)
	}
	feed(New(Options{}), append(stmts, selects...)...)
	alter := stmts[3]
	if alter.LockWait == nil || alter.BlockedBy.ConnID != 10 || alter.BlockedBy.Kind != event.LockMetadata || alter.BlockedBy.State != event.BlockerIdleInTxn {
		t.Fatalf("the ALTER's wait: %+v", alter.LockWait)
	}
	if want := int64(1500*ms+100) - 200*ms; alter.LockWaitUS != want {
		t.Errorf("the ALTER waited %d, want %d", alter.LockWaitUS, want)
	}
	for i, s := range selects {
		if s.LockWait == nil {
			t.Fatalf("select %d: no lock wait", i)
		}
		b := s.BlockedBy
		if b.ConnID != 12 || b.Kind != event.LockMetadata || b.Root == nil || b.Root.ConnID != 10 || b.Root.State != event.BlockerIdleInTxn {
			t.Errorf("select %d: blocker %+v root %+v", i, b, b.Root)
		}
		if want := 1530*ms - int64(400+i)*ms; s.LockWaitUS != want {
			t.Errorf("select %d waited %d, want %d", i, s.LockWaitUS, want)
		}
	}
}

// Contention-free: many connections run short transactions on their own
// rows; some statements are slow (the host was busy), and end near other
// connections' commits. With the server's counters saying no row-lock
// wait happened, nothing is attributed; without counters, a slow plain
// read is never attributed to a commit.
func TestNoAttributionWithoutContention(t *testing.T) {
	l := New(Options{RowLockWaits: func(int64, int64) (int64, bool) { return 0, true }})
	var all []*event.Statement
	for i := range 200 {
		c := fmt.Sprintf("10.0.0.5:%d>10.0.0.9:3306", 7000+i%8)
		t0 := int64(i) * 3 * ms
		slow := int64(0)
		if i%10 == 0 {
			slow = 30 * ms
		}
		seq := uint32(i/8 + 1)
		all = append(all,
			joined(stmt(c, uint64(100+i%8), "begin", t0, t0+50, event.TxnInfo{TxnSeq: seq})),
			joined(stmt(c, uint64(100+i%8), "update sbtest1 set k = k + ? where id = ?", t0+100, t0+400+slow, event.TxnInfo{TxnSeq: seq, TxnIdleBeforeUS: 50})),
			joined(stmt(c, uint64(100+i%8), "commit", t0+500+slow, t0+600+slow, event.TxnInfo{TxnSeq: seq, TxnIdleBeforeUS: 100, TxnEnd: event.TxnEndCommit})),
		)
	}
	feed(l, all...)
	for _, s := range all {
		if s.LockWait != nil {
			t.Fatalf("%s %q attributed: %+v", s.Conn, s.SQL, s.BlockedBy)
		}
	}
}

// A wait the lock tables showed is certain, and names the blocker the
// server named even when the wire saw its end.
func TestLiveObservation(t *testing.T) {
	l := New(Options{RowLockWaits: func(int64, int64) (int64, bool) { return 0, true }})
	blocker, victim := rowLockCase()
	for _, s := range blocker[:2] {
		l.Wire(s)
	}
	l.Observe(600*ms, []Seen{{WaiterID: 11, BlockerID: 10, RootID: 10, Kind: event.LockRow, Source: "information_schema.INNODB_LOCK_WAITS", BlockerIdle: true}})
	l.Wire(blocker[2])
	l.Wire(victim)
	for _, s := range append(blocker, victim) {
		l.Finished(s, false, func(*event.Statement) {})
	}
	if victim.LockWait == nil {
		t.Fatal("no lock wait")
	}
	b := victim.BlockedBy
	if b.Confidence != event.ConfidenceCertain || b.ConnID != 10 || b.State != event.BlockerIdleInTxn || b.Source != "information_schema.INNODB_LOCK_WAITS" {
		t.Errorf("blocker %+v", b)
	}
	if want := int64(1301*ms+150) - 100*ms; victim.LockWaitUS != want {
		t.Errorf("lock wait %d, want %d", victim.LockWaitUS, want)
	}
	if b.SQL != "update t set v = v + ? where id = ?" || b.IdleUS < 599*ms {
		t.Errorf("blocker's statement %q, idle %d", b.SQL, b.IdleUS)
	}
}

// Transactions that end on COM_QUIT or at Close are written open; the
// release list stays bounded.
func TestOpenTransactionsAndBounds(t *testing.T) {
	var txns []*event.Transaction
	l := New(Options{MaxReleases: 16, Emit: func(x *event.Transaction) { txns = append(txns, x) }})
	a := "10.0.0.1:5001>10.0.0.9:3306"
	feed(l,
		stmt(a, 10, "begin", 0, 10, event.TxnInfo{TxnSeq: 1}),
		stmt(a, 10, "update t set v = ?", 20, 30, event.TxnInfo{TxnSeq: 1, TxnIdleBeforeUS: 10}),
		&event.Statement{Conn: a, ConnID: 10, Cmd: "COM_QUIT", TReqFirst: 40, TxnInfo: event.TxnInfo{TxnSeq: 1}}, // the capture numbers a COM_QUIT inside a transaction
		stmt(a, 10, "begin", 50, 60, event.TxnInfo{TxnSeq: 2}),
	)
	l.Close()
	if len(txns) != 2 || txns[0].EndKind != "open" || txns[0].Statements != 2 || txns[1].EndKind != "open" {
		t.Fatalf("transactions %+v", txns)
	}
	for i := range 100 {
		l.Wire(stmt(a, 10, "commit", int64(i)*ms, int64(i)*ms+10, event.TxnInfo{TxnSeq: uint32(i + 3), TxnEnd: event.TxnEndCommit}))
	}
	if n := len(l.rel.live()); n > 16 {
		t.Errorf("%d releases kept, bound 16", n)
	}
}

// A waiter that finishes before the wire shows its release (a COMMIT's
// answer after the log's flush) is held, then attributed once it shows.
func TestHeldUntilTheReleaseShows(t *testing.T) {
	l := New(Options{})
	blocker, victim := rowLockCase()
	var out []*event.Statement
	deliver := func(s *event.Statement) { out = append(out, s) }
	for _, s := range blocker[:2] {
		l.Wire(s)
		l.Finished(s, true, deliver)
	}
	l.Wire(victim)
	l.Finished(victim, true, deliver)
	if len(out) != 2 {
		t.Fatalf("%d delivered, want the blocker's two: the victim is held", len(out))
	}
	l.Wire(blocker[2]) // the release shows: the victim goes, attributed
	if len(out) != 3 || out[2] != victim {
		t.Fatalf("%d delivered, the victim last: %v", len(out), out)
	}
	l.Finished(blocker[2], true, deliver)
	if victim.LockWait == nil || victim.BlockedBy.ConnID != 10 {
		t.Fatalf("victim's wait %+v", victim.LockWait)
	}
	// Nothing to wait for: a statement that takes no locks goes at once.
	quick := joined(stmt("c", 99, "commit", 0, 50*ms, event.TxnInfo{}))
	l.Finished(quick, true, deliver)
	if out[len(out)-1] != quick {
		t.Error("a COMMIT was held")
	}
}

// With the server's counter configured, a wait is judged only once a
// reading past its end exists: held until then, and never attributed
// when none comes within CounterHoldUS.
func TestHeldForTheCounter(t *testing.T) {
	var known bool
	l := New(Options{RowLockWaits: func(int64, int64) (int64, bool) { return 1, known }})
	blocker, victim := rowLockCase()
	var out []*event.Statement
	deliver := func(s *event.Statement) { out = append(out, s) }
	for _, s := range blocker {
		l.Wire(s)
	}
	l.Wire(victim)
	l.Finished(victim, true, deliver)
	l.Tick(victim.TRespLast + 500*ms)
	if len(out) != 0 {
		t.Fatal("delivered before the counter was read past its end")
	}
	known = true
	l.Tick(victim.TRespLast + 600*ms)
	if len(out) != 1 || victim.LockWait == nil || victim.BlockedBy.Confidence != event.ConfidenceHigh {
		t.Fatalf("delivered %d, wait %+v", len(out), victim.LockWait)
	}

	known = false
	l2 := New(Options{RowLockWaits: func(int64, int64) (int64, bool) { return 1, known }})
	blocker, victim = rowLockCase()
	for _, s := range blocker {
		l2.Wire(s)
	}
	l2.Wire(victim)
	l2.Finished(victim, true, deliver)
	l2.Tick(victim.TRespLast + 1_501*ms)
	if len(out) != 2 || victim.LockWait != nil {
		t.Fatalf("delivered %d, wait %+v: unknown counters must not attribute", len(out), victim.LockWait)
	}
}

// The ledger is fed from several goroutines at once in watch: the wire's
// (Wire), the join's (Finished) and the poller's (Tick, Observe). Run
// under the race detector (make race).
func TestLedgerConcurrentFeeds(t *testing.T) {
	var emitted atomic.Int64
	l := New(Options{Emit: func(*event.Transaction) { emitted.Add(1) }, RowLockWaits: func(int64, int64) (int64, bool) { return 1, true }})
	const conns, txns = 8, 200
	stmts := make(chan *event.Statement, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the wire
		defer wg.Done()
		defer close(stmts)
		for i := range txns {
			for c := range conns {
				conn := fmt.Sprintf("10.0.0.%d:5000>10.0.0.9:3306", c)
				t0 := int64(i*10+c) * ms
				info := event.TxnInfo{TxnSeq: uint32(i + 1), TxnStartUS: t0}
				for _, s := range []*event.Statement{
					joined(stmt(conn, uint64(c+1), "begin", t0, t0+100, info)),
					joined(stmt(conn, uint64(c+1), "update t set v = ? where id = ?", t0+200, t0+7*ms, info)),
					joined(stmt(conn, uint64(c+1), "commit", t0+8*ms, t0+8*ms+100, event.TxnInfo{TxnSeq: uint32(i + 1), TxnStartUS: t0, TxnEnd: event.TxnEndCommit})),
				} {
					l.Wire(s)
					stmts <- s
				}
			}
		}
	}()
	wg.Add(1)
	go func() { // the poller
		defer wg.Done()
		for i := range 200 {
			l.Tick(int64(i) * 10 * ms)
			l.Observe(int64(i)*10*ms, []Seen{{WaiterID: uint64(i%conns + 1), BlockerID: uint64((i+1)%conns + 1), Kind: event.LockRow, Source: "test"}})
		}
	}()
	var delivered atomic.Int64
	for s := range stmts { // the join
		l.Finished(s, true, func(*event.Statement) { delivered.Add(1) })
	}
	wg.Wait()
	l.Close()
	if delivered.Load() != conns*txns*3 || emitted.Load() != conns*txns {
		t.Errorf("delivered %d statements and %d transactions, want %d and %d", delivered.Load(), emitted.Load(), conns*txns*3, conns*txns)
	}
}
