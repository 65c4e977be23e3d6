package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

const (
	idleConn = "10.0.0.7:45000>10.0.0.9:3306"
	idleSQL  = "UPDATE accounts SET balance = balance - ? WHERE id = ?"
)

// idleBlocker is a connection whose application opened a transaction,
// updated a row and then sat idle: read from the server's lock tables.
func idleBlocker() *event.Blocker {
	return &event.Blocker{Conn: idleConn, ConnID: 77, User: "batch", Kind: event.LockRow, State: event.BlockerIdleInTxn,
		Digest: digestOf(idleSQL), SQL: idleSQL, HeldUS: 12_000_000, IdleUS: 11_500_000,
		Source: "performance_schema.data_lock_waits", Confidence: event.ConfidenceCertain,
		Evidence: "data_lock_waits: the waiter's record lock request was blocked by thread 77's lock"}
}

// victim is a joined statement of exec µs, waitUS of them waiting for a
// lock held by by (nil: blocker unknown; waitUS 0: no lock wait known).
func victim(conn string, id uint64, sql string, t, exec, waitUS int64, by *event.Blocker) event.Statement {
	s := stmt(conn, id, sql, t, 20, 30, exec, 0, 40)
	if waitUS > 0 {
		s.LockWait = &event.LockWait{LockWaitUS: waitUS, BlockedBy: by}
	}
	return s
}

// lockedWindow is a healthy load plus n slow UPDATEs of 1 s whose
// execution was waitShare waiting for a lock held by by.
func lockedWindow(n int, waitShare float64, by func() *event.Blocker) *Window {
	w := &Window{Statements: healthy(), Vars: map[string]string{"innodb_lock_wait_timeout": "50", "lock_wait_timeout": "86400"}}
	for i := range n {
		var b *event.Blocker
		if by != nil {
			b = by()
		}
		conn := fmt.Sprintf("10.0.0.8:%d>10.0.0.9:3306", 46000+i)
		w.Statements = append(w.Statements, victim(conn, uint64(200+i), "UPDATE accounts SET balance = balance + ? WHERE id = ?",
			int64(i)*1000, 1_000_000, int64(waitShare*1_000_000), b))
	}
	return w
}

// The brief's case: slow statements whose execution is 95% lock wait are
// LOCK_WAIT's, not SERVER_EXEC's; the same statements without a lock wait
// are SERVER_EXEC's.
func TestLockWaitNotServerExec(t *testing.T) {
	w := lockedWindow(5, 0.95, idleBlocker)
	fs := Run(w, StatementRules()...)
	only(t, fs, CodeServerExec, 0)
	f := only(t, fs, CodeLockWait, 1)[0]
	checkFinding(t, f)

	for i := range w.Statements {
		w.Statements[i].LockWait = nil
	}
	fs = Run(w, StatementRules()...)
	only(t, fs, CodeLockWait, 0)
	if f := only(t, fs, CodeServerExec, 1)[0]; f.Evidence["slow_statements"] != 5 || f.Evidence["lock_wait_us"] != nil {
		t.Errorf("without lock waits: %v", f.Evidence)
	}
}

func TestLockWaitIdleRoot(t *testing.T) {
	f := only(t, Run(lockedWindow(5, 0.95, idleBlocker), StatementRules()...), CodeLockWait, 1)[0]
	ev := f.Evidence
	if ev["victims"] != 5 || ev["lock_wait_us"] != int64(4_750_000) || ev["max_lock_wait_us"] != int64(950_000) || ev["exec_us"] != int64(5_000_000) {
		t.Errorf("victim numbers: %v %v %v %v", ev["victims"], ev["lock_wait_us"], ev["max_lock_wait_us"], ev["exec_us"])
	}
	if ev["lock_wait_share"] != 0.95 || ev["unattributed"] != 0 || ev["innodb_lock_wait_timeout"] != "50" {
		t.Errorf("share %v unattributed %v timeout %v", ev["lock_wait_share"], ev["unattributed"], ev["innodb_lock_wait_timeout"])
	}
	if f.Severity != event.SeverityCritical {
		t.Errorf("severity %s, want critical for 4.75 s of lock wait", f.Severity)
	}
	roots := ev["blockers"].([]blockerTally)
	if len(roots) != 1 {
		t.Fatalf("blockers %+v, want the one idle connection", roots)
	}
	r := roots[0]
	if r.ConnID != 77 || r.User != "batch" || r.State != event.BlockerIdleInTxn || r.SQL != idleSQL || r.Victims != 5 ||
		r.LockWaitUS != 4_750_000 || r.HeldUS != 12_000_000 || r.IdleUS != 11_500_000 || r.Confidence != event.ConfidenceCertain ||
		!slices.Equal(r.Kinds, []string{event.LockRow}) || len(r.Via) != 0 {
		t.Errorf("root blocker %+v", r)
	}
	kinds := ev["kinds"].([]kindTally)
	if len(kinds) != 1 || kinds[0].Kind != event.LockRow || kinds[0].Statements != 5 {
		t.Errorf("kinds %+v", kinds)
	}
	if d := ev["digests"].([]digestTally); len(d) != 1 || d[0].Calls != 5 || d[0].TimeUS != 4_750_000 {
		t.Errorf("victim digests %+v", d)
	}
	if ex := ev["examples"].([]Example); len(ex) != 3 || ex[0].LockWaitUS != 950_000 {
		t.Errorf("examples %+v", ex)
	}
	if a := ev["attribution"].(map[string]int); a[event.ConfidenceCertain] != 5 || len(a) != 1 {
		t.Errorf("attribution %v", a)
	}
	for _, want := range []string{"5 statement(s) waited 4.75 s", "connection 77 (user batch), idle in its transaction (open 12.00 s", idleSQL} {
		if !strings.Contains(f.Summary, want) {
			t.Errorf("summary %q lacks %q", f.Summary, want)
		}
	}
	if strings.Contains(f.Summary, "likely") {
		t.Errorf("a certain attribution presented as likely: %q", f.Summary)
	}
	if !strings.HasPrefix(f.Fix, "the lock was held by a transaction its application left open and idle: commit") ||
		!strings.Contains(f.Fix, "innodb_lock_wait_timeout (now 50 s)") || strings.Contains(f.Fix, "gh-ost") {
		t.Errorf("fix %q", f.Fix)
	}
}

// A low-confidence attribution (the wire's coincidence) is "likely", with
// its evidence, never stated as fact.
func TestLockWaitLowConfidenceIsLikely(t *testing.T) {
	wire := func() *event.Blocker {
		b := idleBlocker()
		b.Source, b.Confidence, b.Evidence = event.LockSourceWire, event.ConfidenceLow, "the waiter's response followed connection 77's COMMIT by 0.2 ms"
		return b
	}
	f := only(t, Run(lockedWindow(3, 0.9, wire), StatementRules()...), CodeLockWait, 1)[0]
	if !strings.Contains(f.Summary, "behind likely connection 77") || !strings.Contains(f.Summary, "[low confidence: the waiter's response followed connection 77's COMMIT by 0.2 ms]") {
		t.Errorf("summary %q should say likely and give the evidence", f.Summary)
	}
	r := f.Evidence["blockers"].([]blockerTally)[0]
	if r.Confidence != event.ConfidenceLow || !slices.Equal(r.Sources, []string{event.LockSourceWire}) || r.Evidence == "" {
		t.Errorf("root %+v", r)
	}
	// One low attribution among certain ones makes the blocker's low.
	w := lockedWindow(3, 0.9, idleBlocker)
	w.Statements[len(w.Statements)-1].BlockedBy = wire()
	r = only(t, Run(w, StatementRules()...), CodeLockWait, 1)[0].Evidence["blockers"].([]blockerTally)[0]
	if r.Confidence != event.ConfidenceLow || r.Victims != 3 {
		t.Errorf("mixed attributions: %+v", r)
	}
}

// Selects wait for an ALTER that waits for an idle transaction: the root
// is the idle transaction, the ALTER is on the way, and the fix is DDL's;
// the chain is as sure as its weakest link.
func TestLockWaitMetadataChain(t *testing.T) {
	const alter = "ALTER TABLE accounts ADD COLUMN note TEXT"
	chain := func() *event.Blocker {
		root := idleBlocker()
		root.Confidence = event.ConfidenceHigh
		return &event.Blocker{Conn: "10.0.0.3:47000>10.0.0.9:3306", ConnID: 90, User: "dba", Kind: event.LockMetadata,
			State: event.BlockerRunning, SQL: alter, Digest: digestOf(alter), Source: "performance_schema.metadata_locks",
			Confidence: event.ConfidenceCertain, Root: root}
	}
	w := &Window{Statements: healthy(), Vars: map[string]string{"lock_wait_timeout": "86400"}}
	for i := range 4 {
		w.Statements = append(w.Statements, victim(fmt.Sprintf("10.0.0.8:%d>10.0.0.9:3306", 48000+i), uint64(300+i),
			"SELECT * FROM accounts WHERE id = ?", int64(i)*100, 2_000_000, 1_990_000, chain()))
	}
	f := only(t, Run(w, StatementRules()...), CodeLockWait, 1)[0]
	roots := f.Evidence["blockers"].([]blockerTally)
	if len(roots) != 1 || roots[0].ConnID != 77 || roots[0].State != event.BlockerIdleInTxn || roots[0].Victims != 4 ||
		!slices.Equal(roots[0].Kinds, []string{event.LockMetadata}) || roots[0].Confidence != event.ConfidenceHigh {
		t.Fatalf("root %+v: want the idle transaction, high (its link's) confidence", roots)
	}
	if len(roots[0].Via) != 1 || roots[0].Via[0] != "connection 90: "+alter {
		t.Errorf("via %v, want the ALTER", roots[0].Via)
	}
	if !strings.Contains(f.Summary, "through connection 90: "+alter) || strings.Contains(f.Summary, "likely") {
		t.Errorf("summary %q", f.Summary)
	}
	if !strings.HasPrefix(f.Fix, "DDL and a metadata lock: find and end the idle or long transaction") ||
		!strings.Contains(f.Fix, "lock_wait_timeout=5") || !strings.Contains(f.Fix, "pt-online-schema-change") ||
		strings.Contains(f.Fix, "innodb_lock_wait_timeout") {
		t.Errorf("fix %q", f.Fix)
	}
	if f.Evidence["lock_wait_timeout"] != "86400" || f.Evidence["innodb_lock_wait_timeout"] != nil {
		t.Errorf("timeouts in evidence: %v %v", f.Evidence["lock_wait_timeout"], f.Evidence["innodb_lock_wait_timeout"])
	}

	// A weak link anywhere in the chain makes the attribution likely.
	for i := range w.Statements {
		if lw := w.Statements[i].LockWait; lw != nil {
			lw.BlockedBy.Root.Confidence = event.ConfidenceLow
		}
	}
	f = only(t, Run(w, StatementRules()...), CodeLockWait, 1)[0]
	if !strings.Contains(f.Summary, "likely connection 77") {
		t.Errorf("summary %q: a low link must make it likely", f.Summary)
	}
}

// A running blocker on rows: the index and smaller transactions; waits
// with no known blocker are counted and get the server's lock tables.
func TestLockWaitRunningRootAndUnattributed(t *testing.T) {
	running := func() *event.Blocker {
		return &event.Blocker{ConnID: 55, User: "app", Kind: event.LockRow, State: event.BlockerRunning,
			SQL: "UPDATE orders SET status = ? WHERE note LIKE ?", Source: "information_schema.INNODB_LOCK_WAITS", Confidence: event.ConfidenceCertain}
	}
	w := lockedWindow(4, 0.8, running)
	w.Statements = append(w.Statements, victim("10.0.0.8:49000>10.0.0.9:3306", 400, "DELETE FROM orders WHERE id = ?", 0, 500_000, 400_000, nil))
	f := only(t, Run(w, StatementRules()...), CodeLockWait, 1)[0]
	if f.Evidence["unattributed"] != 1 || f.Evidence["attribution"].(map[string]int)["none"] != 1 {
		t.Errorf("unattributed %v attribution %v", f.Evidence["unattributed"], f.Evidence["attribution"])
	}
	kinds := f.Evidence["kinds"].([]kindTally)
	if len(kinds) != 2 || kinds[0].Kind != event.LockRow || kinds[1].Kind != "unknown" || kinds[1].LockWaitUS != 400_000 {
		t.Errorf("kinds %+v", kinds)
	}
	if !strings.HasPrefix(f.Fix, "the blocker was running: give its statement an index") || !strings.Contains(f.Fix, "sys.innodb_lock_waits") ||
		strings.Index(f.Fix, "sys.innodb_lock_waits") < strings.Index(f.Fix, "an index") {
		t.Errorf("fix %q: the running blocker's fix first (more wait), then the unattributed one", f.Fix)
	}
	if !strings.Contains(f.Summary, `connection 55 (user app), running "UPDATE orders`) || !strings.Contains(f.Summary, "1 wait(s) have no known blocker") {
		t.Errorf("summary %q", f.Summary)
	}
}

// Lock waits that add up to less than the limit are a healthy load's;
// between the limit and a second they are a warning.
func TestLockWaitThresholdAndSeverity(t *testing.T) {
	w := lockedWindow(1, 0.05, idleBlocker) // 50 ms
	only(t, Run(w, StatementRules()...), CodeLockWait, 0)
	w = lockedWindow(4, 0.05, idleBlocker) // 200 ms
	if f := only(t, Run(w, StatementRules()...), CodeLockWait, 1)[0]; f.Severity != event.SeverityWarning {
		t.Errorf("severity %s for 200 ms, want warning", f.Severity)
	}
	w.Limits.LockWaitUS = 500_000
	only(t, Run(w, StatementRules()...), CodeLockWait, 0)
}

// Lock wait inside a statement's execution is not the server's own work:
// SERVER_EXEC judges exec without it, and says how much it left out.
func TestServerExecSubtractsLockWait(t *testing.T) {
	mk := func(wait int64) *Window {
		w := &Window{Statements: healthy()}
		for i := range 5 {
			s := stmt("c1", 1, "SELECT * FROM orders WHERE note LIKE ?", int64(i)*10, 10, 350_000, 650_000, 0, 40)
			if wait > 0 {
				s.LockWait = &event.LockWait{LockWaitUS: wait}
			}
			w.Statements = append(w.Statements, s)
		}
		return w
	}
	only(t, Run(mk(0), StatementRules()...), CodeServerExec, 1)
	// 300 ms of 650 ms exec waited (under half: not LOCK_WAIT's alone), and
	// the 350 ms left are not half of the client time.
	only(t, Run(mk(300_000), StatementRules()...), CodeServerExec, 0)

	w := &Window{Statements: healthy()}
	for i := range 3 {
		s := stmt("c1", 1, "SELECT * FROM orders WHERE note LIKE ?", int64(i)*10, 10, 20, 2_000_000, 0, 40)
		s.LockWait = &event.LockWait{LockWaitUS: 200_000}
		w.Statements = append(w.Statements, s)
	}
	mostly := stmt("c2", 2, "UPDATE t SET v = ?", 0, 10, 20, 3_000_000, 0, 40)
	mostly.LockWait = &event.LockWait{LockWaitUS: 2_900_000}
	w.Statements = append(w.Statements, mostly)
	f := only(t, Run(w, StatementRules()...), CodeServerExec, 1)[0]
	ev := f.Evidence
	if ev["slow_statements"] != 3 || ev["lock_wait_us"] != int64(600_000) || ev["left_to_lock_wait"] != 1 || ev["exec_us"] != int64(6_000_000) {
		t.Errorf("evidence %v", ev)
	}
	if d := ev["digests"].([]digestTally); len(d) != 1 || d[0].TimeUS != 5_400_000 || d[0].MaxUS != 1_800_000 {
		t.Errorf("digests %+v: want exec without the lock wait", d)
	}
	if !strings.Contains(f.Summary, "spent 5.40 s executing") || !strings.Contains(f.Summary, "600.0 ms of lock wait left out") {
		t.Errorf("summary %q", f.Summary)
	}
}

// txn builds a transaction of one statement per gap+1 on conn: each
// statement runs serverUS, the application waits gaps[i] between them.
func txn(conn string, id uint64, user string, seq uint32, start int64, lead, route string, serverUS int64, gaps ...int64) event.Transaction {
	t := event.Transaction{Conn: conn, ConnID: id, User: user, DB: "shop", Seq: seq, Start: start, EndKind: "commit",
		Statements: len(gaps) + 1, FirstDigest: digestOf("BEGIN"), FirstSQL: "BEGIN", LeadDigest: digestOf(lead), LeadSQL: lead}
	t.ServerUS = int64(t.Statements) * serverUS
	for _, g := range gaps {
		t.InAppUS += g
		t.MaxIdleUS = max(t.MaxIdleUS, g)
	}
	t.OpenUS = t.ServerUS + t.InAppUS
	t.End = start + t.OpenUS
	if route != "" {
		t.Tags = map[string]string{"route": route, "framework": "django"}
	}
	return t
}

// shortTxns are n transactions of a healthy OLTP load: four statements,
// a few milliseconds of application time between them.
func shortTxns(n int) []event.Transaction {
	var out []event.Transaction
	for i := range n {
		conn := fmt.Sprintf("10.0.0.5:%d>10.0.0.9:3306", 40001+i%4)
		out = append(out, txn(conn, uint64(100+i%4), "app", uint32(i/4+1), int64(i)*10_000, "UPDATE sbtest1 SET k=k+? WHERE id=?", "/api/item",
			400, int64(1_000+i%5*1_000), 2_000, int64(500+i%3*2_000)))
	}
	return out
}

// The baseline: many fast statements in short transactions give neither
// lock nor idle-in-transaction finding (nor any other statement finding).
func TestBaselineNoLockOrIdleFinding(t *testing.T) {
	w := healthyWindow(t)
	w.Transactions = shortTxns(1000)
	fs := Run(w)
	only(t, fs, CodeLockWait, 0)
	only(t, fs, CodeIdleInTransaction, 0)
	if len(fs) != 0 {
		t.Errorf("contention-free window gave findings: %v", codes(fs))
	}
}

func heldWindow() *Window {
	w := &Window{Transactions: shortTxns(200), Vars: map[string]string{"idle_write_transaction_timeout": "0"}}
	for i := range 20 {
		w.Transactions = append(w.Transactions, txn(fmt.Sprintf("10.0.1.1:%d>10.0.0.9:3306", 50000+i%5), uint64(500+i%5), "web", uint32(i+1),
			int64(i)*1_000_000, "UPDATE stock SET qty = qty - ? WHERE sku = ?", "/checkout", 500, 2_000, 300_000))
	}
	for i := range 5 {
		w.Transactions = append(w.Transactions, txn("10.0.1.2:51000>10.0.0.9:3306", 600, "web", uint32(i+1),
			int64(i)*1_000_000, "SELECT * FROM cart WHERE user_id = ? FOR UPDATE", "/cart", 500, 150_000))
	}
	for i := range 2 {
		b := txn("10.0.1.3:52000>10.0.0.9:3306", 700, "batch", uint32(i+1), int64(i)*5_000_000, "INSERT INTO ledger VALUES (...)", "", 500, 2_000_000)
		b.Blocked, b.EndKind = 7, "open"
		w.Transactions = append(w.Transactions, b)
	}
	return w
}

func TestIdleInTransactionRanksGroups(t *testing.T) {
	f := only(t, Run(heldWindow(), StatementRules()...), CodeIdleInTransaction, 1)[0]
	checkFinding(t, f)
	if f.Severity != event.SeverityCritical {
		t.Errorf("severity %s, want critical: a 2 s gap held locks others waited for", f.Severity)
	}
	ev := f.Evidence
	if ev["transactions"] != int64(227) || ev["held_transactions"] != 27 || ev["blocked"] != 14 || ev["max_idle_us"] != int64(2_000_000) ||
		ev["in_app_us"] != int64(20*302_000+5*150_000+2*2_000_000) || ev["idle_limit_us"] != int64(100_000) {
		t.Errorf("evidence %v", ev)
	}
	g := ev["groups"].([]txnGroup)
	if len(g) != 3 {
		t.Fatalf("groups %+v", g)
	}
	if g[0].Route != "/checkout" || g[0].User != "web" || g[0].Transactions != 20 || g[0].Connections != 5 || g[0].InAppUS != 20*302_000 ||
		g[0].MaxIdleUS != 300_000 || g[0].SQL != "UPDATE stock SET qty = qty - ? WHERE sku = ?" || g[0].Ends["commit"] != 20 {
		t.Errorf("first group %+v", g[0])
	}
	if g[1].User != "batch" || g[1].Route != "" || g[1].Blocked != 14 || g[1].Ends["open"] != 2 || g[2].Route != "/cart" {
		t.Errorf("other groups %+v %+v", g[1], g[2])
	}
	ex := ev["examples"].([]event.Transaction)
	if len(ex) != 3 || ex[0].User != "batch" || ex[0].MaxIdleUS != 2_000_000 {
		t.Errorf("examples %+v", ex)
	}
	for _, want := range []string{"27 of 227 transaction(s)", "14 statement(s) of other connections", "user web, route /checkout"} {
		if !strings.Contains(f.Summary, want) {
			t.Errorf("summary %q lacks %q", f.Summary, want)
		}
	}
	if !strings.HasPrefix(f.Fix, "commit (or roll back) before slow application work") || !strings.Contains(f.Fix, "routes in the evidence") ||
		!strings.Contains(f.Fix, "idle_write_transaction_timeout (now 0, 0 = off)") || ev["idle_write_transaction_timeout"] != "0" {
		t.Errorf("fix %q", f.Fix)
	}
}

// Held transactions must matter: one short gap among many transactions,
// blocking nobody, is silent; blocking someone or a gap of a second is a
// warning; not rare (≥ 1%) is info.
func TestIdleInTransactionMateriality(t *testing.T) {
	w := &Window{Transactions: shortTxns(1000)}
	w.Transactions = append(w.Transactions, txn("c9", 9, "app", 1, 0, "UPDATE t SET v = ?", "", 500, 200_000))
	only(t, Run(w, StatementRules()...), CodeIdleInTransaction, 0)

	w.Transactions[len(w.Transactions)-1].Blocked = 1
	if f := only(t, Run(w, StatementRules()...), CodeIdleInTransaction, 1)[0]; f.Severity != event.SeverityWarning {
		t.Errorf("severity %s, want warning when it blocked someone", f.Severity)
	}
	w.Transactions[len(w.Transactions)-1].Blocked = 0
	w.Transactions[len(w.Transactions)-1].MaxIdleUS = 1_500_000
	if f := only(t, Run(w, StatementRules()...), CodeIdleInTransaction, 1)[0]; f.Severity != event.SeverityWarning {
		t.Errorf("severity %s, want warning for a 1.5 s gap", f.Severity)
	}

	w = &Window{Transactions: shortTxns(50)}
	w.Transactions = append(w.Transactions, txn("c9", 9, "app", 1, 0, "UPDATE t SET v = ?", "", 500, 200_000))
	f := only(t, Run(w, StatementRules()...), CodeIdleInTransaction, 1)[0]
	if f.Severity != event.SeverityInfo {
		t.Errorf("severity %s, want info for 1 of 51 held 200 ms", f.Severity)
	}
	if strings.Contains(f.Fix, "routes") || strings.Contains(f.Fix, "MariaDB") {
		t.Errorf("fix %q: no route and no MariaDB known", f.Fix)
	}
	w.Limits.TxnIdleUS = 250_000
	only(t, Run(w, StatementRules()...), CodeIdleInTransaction, 0)
}

// A transaction without BEGIN (autocommit off) is named by its first
// statement.
func TestIdleInTransactionFirstStatementWithoutLead(t *testing.T) {
	tx := txn("c9", 9, "app", 1, 0, "", "", 500, 1_200_000)
	tx.LeadDigest, tx.LeadSQL, tx.FirstSQL, tx.FirstDigest = "", "", "SELECT * FROM t WHERE id = ?", "d1"
	f := only(t, Run(&Window{Transactions: []event.Transaction{tx}}, StatementRules()...), CodeIdleInTransaction, 1)[0]
	if g := f.Evidence["groups"].([]txnGroup); g[0].SQL != "SELECT * FROM t WHERE id = ?" || g[0].Digest != "d1" {
		t.Errorf("group %+v", g[0])
	}
}

// A capture's wire window keeps the statements with a lock wait and the
// held transactions, counting the others.
func TestWireWindowKeepsLocksAndHeldTransactions(t *testing.T) {
	var ww WireWindow
	for _, s := range lockedWindow(3, 0.9, idleBlocker).Statements {
		s.Joined = false
		ww.Add(&s)
	}
	w := heldWindow()
	for i := range w.Transactions {
		ww.AddTransaction(&w.Transactions[i])
	}
	if len(ww.w.Statements) != 3 || len(ww.w.Transactions) != 27 || ww.w.TxnSeen != 227 {
		t.Fatalf("kept %d statements, %d transactions of %d", len(ww.w.Statements), len(ww.w.Transactions), ww.w.TxnSeen)
	}
	fs := ww.Findings()
	only(t, fs, CodeLockWait, 1)
	if f := only(t, fs, CodeIdleInTransaction, 1)[0]; f.Evidence["transactions"] != int64(227) {
		t.Errorf("transactions seen %v", f.Evidence["transactions"])
	}
}
