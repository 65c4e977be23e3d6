package report

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// TestReportStatementPagingAcrossTies: statements are read a page at a
// time; many share a start time across page boundaries, and none may be
// lost or counted twice.
func TestReportStatementPagingAcrossTies(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ties.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.StartRun(ctx, "watch", "", start)
	if err != nil {
		t.Fatal(err)
	}
	w := st.NewWriter(run, store.WriterOptions{BatchRows: 5000})
	const n = 2*statementPage + 1234
	for i := range n {
		// runs of 7 share a time; one run of 6000 straddles two pages
		tq := start + int64(i/7)
		if i >= 3000 && i < 9000 {
			tq = start + 3000
		}
		s := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "d", DigestText: "SELECT ?", TReqFirst: tq, Parts: event.Parts{ClientUS: 1, ExecUS: 1}, Joined: true}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := summarizeStoredStatements(ctx, st, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if sum == nil || sum.Len() != n {
		t.Fatalf("read %v statements, want %d", sum, n)
	}
	if rows := sum.TopDecomposed(10); len(rows) != 1 || rows[0].Calls != n {
		t.Errorf("digest rows %+v", rows)
	}
}

// TestReportTransactionsFromStore: the HTML report from a store shows its
// transactions (the count, the time held open in the application, the ten
// longest idle, longest first) and the lock waits per digest from the
// per-minute totals, which count the statements sampling left without a
// row.
func TestReportTransactionsFromStore(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "txns.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, _ := st.StartRun(ctx, "watch", "", start)
	w := st.NewWriter(run, store.WriterOptions{SampleEvery: 1000})
	for i := range 300 {
		s := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "dsel", DigestText: "SELECT * FROM `stock` WHERE `sku` = ? FOR UPDATE",
			TReqFirst: start + int64(i)*1000, Parts: event.Parts{ClientUS: 900, ExecUS: 800}, Joined: true}
		if i%3 == 0 { // waited 600 of its 800 µs of exec; its row is kept
			s.LockWait = &event.LockWait{LockWaitUS: 600, BlockedBy: &event.Blocker{ConnID: 42, Kind: event.LockRow, State: event.BlockerIdleInTxn,
				Source: event.LockSourceWire, Confidence: event.ConfidenceHigh}}
		}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
		other := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "dins", DigestText: "INSERT INTO `log` VALUES (?)", TReqFirst: s.TReqFirst + 1,
			Parts: event.Parts{ClientUS: 100, ExecUS: 50}, Joined: true}
		w.Add(&other)
	}
	for i := range 14 {
		tx := event.Transaction{Conn: "10.0.0.9:5000>10.0.0.1:3306", ConnID: uint64(40 + i), User: "app", DB: "shop", Seq: 1, Start: start + int64(i)*1e6,
			End: start + int64(i)*1e6 + 9e5, EndKind: "commit", Statements: 3, OpenUS: 9e5, InAppUS: 5e5, MaxIdleUS: int64(1000 * (i + 1)),
			FirstSQL: "BEGIN", LeadSQL: fmt.Sprintf("UPDATE stock SET qty = qty - 1 WHERE sku = %d", i), Tags: map[string]string{"route": "/checkout"}, Blocked: i % 2}
		if err := w.AddTransaction(&tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	d := &HTMLData{}
	if err := LoadStore(ctx, st, "txns.db", 0, d); err != nil {
		t.Fatal(err)
	}
	if d.Transactions == nil || d.Transactions.Count != 14 || d.Transactions.InAppUS != 14*5e5 || len(d.Transactions.LongestIdle) != 10 ||
		d.Transactions.LongestIdle[0].ConnID != 53 || d.Transactions.Blocked != 7 {
		t.Fatalf("transactions %+v", d.Transactions)
	}
	want := []LockWaitRow{{Digest: "dsel", DigestText: "SELECT * FROM `stock` WHERE `sku` = ? FOR UPDATE", Calls: 300, LockWaits: 100, LockWaitUS: 100 * 600, ExecUS: 300 * 800}}
	if !reflect.DeepEqual(d.LockWaits, want) {
		t.Fatalf("lock waits %+v\nwant %+v", d.LockWaits, want)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	txns := page[strings.Index(page, `<section id="transactions">`):]
	txns = txns[:strings.Index(txns, "</section>")]
	for _, want := range []string{"Transactions held open", "14 transactions", "7 statements of other connections", "top 10", "route /checkout",
		"UPDATE stock SET qty = qty - 1 WHERE sku = 13", "(53)"} {
		if !strings.Contains(txns, want) {
			t.Errorf("transactions section lacks %q:\n%s", want, txns)
		}
	}
	if strings.Contains(txns, "(40)") || strings.Index(txns, "(53)") > strings.Index(txns, "(52)") {
		t.Errorf("the longest idle are not the top 10 by max idle, longest first:\n%s", txns)
	}
	locks := page[strings.Index(page, `<section id="locks">`):]
	locks = locks[:strings.Index(locks, "</section>")]
	for _, want := range []string{"FOR UPDATE", ">300<", ">100<", "60", "25%", "per-minute totals"} {
		if !strings.Contains(locks, want) {
			t.Errorf("lock waits section lacks %q:\n%s", want, locks)
		}
	}
	if strings.Contains(locks, "INSERT INTO") {
		t.Errorf("a digest without lock waits is listed:\n%s", locks)
	}
	// The decomposition says which part of exec was lock wait, from the
	// rows kept (every one with a wait).
	if !strings.Contains(page, "<th>of which lock wait</th>") {
		t.Error("the decomposition table has no lock wait column")
	}
}

// TestReportLockWaitsFromEvents: without a store's totals, the lock waits
// per digest come from the statements.
func TestReportLockWaitsFromEvents(t *testing.T) {
	sum := NewStatementSummary()
	for i := range 4 {
		s := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "d", DigestText: "DELETE FROM t WHERE id = ?", TReqFirst: int64(i + 1),
			Parts: event.Parts{ClientUS: 2000, ExecUS: 1000}, Joined: true}
		if i == 0 {
			s.LockWait = &event.LockWait{LockWaitUS: 700}
		}
		sum.Add(&s)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, &HTMLData{Statements: sum}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if !strings.Contains(page, `<section id="locks">`) || !strings.Contains(page, "from the statements read") || !strings.Contains(page, "17.5%") {
		t.Errorf("no lock waits from the statements: %s", page[strings.Index(page, "<body>"):])
	}
	if strings.Contains(page, `id="transactions"`) {
		t.Error("a transactions section without transactions")
	}
}
