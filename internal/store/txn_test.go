package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// transaction returns a fully populated transaction i, so a round trip
// checks every column.
func transaction(i int) event.Transaction {
	t := event.Transaction{Conn: "10.0.0.1:40001>10.0.0.2:3306", ConnID: uint64(100 + i), User: "app", DB: "shop", Seq: uint32(i + 1),
		Start: 1_795_304_997_000_000 + int64(i)*1_000_000, End: 1_795_304_997_400_000 + int64(i)*1_000_000, EndKind: "commit",
		Statements: 4, OpenUS: 400_000, Joined: 3, ServerUS: 9_000, InAppUS: 350_000 + int64(i), MaxIdleUS: 300_000 + int64(i)*1000,
		LockWaitUS: 2_000, FirstDigest: "b1", FirstSQL: "BEGIN", LeadDigest: "u1", LeadSQL: "UPDATE stock SET qty = qty - ? WHERE sku = ?",
		Tags: map[string]string{"route": "/checkout", "framework": "django"}, Blocked: i % 3}
	if i%2 == 1 {
		t.Tags, t.EndKind = nil, "open"
	}
	return t
}

// lockedStatements are statements of one digest with the lock waits the
// store keeps: a wait behind an idle transaction at the head of a chain,
// a wait without a named blocker, and one in a transaction without a wait.
func lockedStatements() []event.Statement {
	a, b, c := statement(1), statement(2), statement(3)
	a.Error, b.Error, c.Error = nil, nil, nil
	a.TxnInfo = event.TxnInfo{TxnSeq: 3, TxnEnd: event.TxnEndCommit, TxnIdleBeforeUS: 1200, TxnStartUS: a.TReqFirst - 5000}
	a.LockWait = &event.LockWait{LockWaitUS: 300, BlockedBy: &event.Blocker{Conn: "10.0.0.1:40007>10.0.0.2:3306", ConnID: 7, User: "app",
		Kind: event.LockMetadata, State: event.BlockerRunning, Digest: "alter1", SQL: "ALTER TABLE t ADD COLUMN c INT",
		HeldUS: 9_000_000, Source: "performance_schema.metadata_locks", Confidence: event.ConfidenceCertain, Evidence: "read while it waited",
		Root: &event.Blocker{ConnID: 5, Kind: event.LockRow, State: event.BlockerIdleInTxn, HeldUS: 20_000_000, IdleUS: 19_000_000,
			Source: "performance_schema.data_lock_waits", Confidence: event.ConfidenceCertain}}}
	b.TxnInfo = event.TxnInfo{TxnSeq: 1, TxnStartUS: b.TReqFirst}
	b.LockWait = &event.LockWait{LockWaitUS: 200}
	c.TxnInfo = event.TxnInfo{TxnSeq: 2, TxnEnd: event.TxnEndRollback, TxnStartUS: c.TReqFirst - 10}
	return []event.Statement{a, b, c}
}

func TestTransactionsAndLockWaitsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, _ := s.StartRun(ctx, "watch", "", 1)
	w := s.NewWriter(run, WriterOptions{SampleEvery: 100})
	stmts := lockedStatements()
	for i := range stmts {
		if err := w.Add(&stmts[i]); err != nil {
			t.Fatal(err)
		}
	}
	var txns []event.Transaction
	for i := range 5 {
		txns = append(txns, transaction(i))
		if err := w.AddTransaction(&txns[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Statements(ctx, Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	// Sampled 1 in 100: the two with a lock wait always keep their row,
	// the third is the sample's first.
	if !reflect.DeepEqual(got, stmts) {
		t.Fatalf("statements differ after a round trip:\n got %+v\nwant %+v", got, stmts)
	}
	var blocker, root, kind, state, confidence sql.NullString
	if err := s.db.QueryRow(`SELECT blocker_conn_id, root_conn_id, blocker_kind, blocker_state, blocker_confidence FROM statements
 WHERE lock_wait_us = 300`).Scan(&blocker, &root, &kind, &state, &confidence); err != nil {
		t.Fatal(err)
	}
	if blocker.String != "7" || root.String != "5" || kind.String != "metadata" || state.String != "running" || confidence.String != "certain" {
		t.Errorf("queryable blocker columns: %v %v %v %v %v", blocker, root, kind, state, confidence)
	}
	var nulls int
	s.db.QueryRow("SELECT COUNT(*) FROM statements WHERE lock_wait_us IS NULL AND blocker_conn_id IS NULL AND blocked_by IS NULL").Scan(&nulls)
	if nulls != 1 {
		t.Errorf("%d statements without a lock wait have NULL lock columns, want 1", nulls)
	}

	back, err := s.Transactions(ctx, Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, txns) {
		t.Fatalf("transactions differ after a round trip:\n got %+v\nwant %+v", back, txns)
	}
	var route string
	s.db.QueryRow("SELECT route FROM transactions WHERE txn = 1").Scan(&route)
	if route != "/checkout" {
		t.Errorf("route column %q, want /checkout", route)
	}
	if page, _ := s.Transactions(ctx, Query{FromUS: txns[2].Start, Limit: 2}); len(page) != 2 || page[0].Seq != 3 {
		t.Errorf("a page from the third transaction: %+v", page)
	}

	tot, err := s.TransactionTotals(ctx, Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	want := TxnTotals{Count: 5, Open: 2, Statements: 20, Joined: 15, OpenUS: 5 * 400_000, ServerUS: 5 * 9_000, InAppUS: 5*350_000 + 10,
		MaxIdleUS: 304_000, LockWaitUS: 5 * 2_000, Blocked: 0 + 1 + 2 + 0 + 1, FromUS: txns[0].Start, ToUS: txns[4].End}
	if tot != want {
		t.Errorf("totals %+v\nwant %+v", tot, want)
	}
	if tot, _ := s.TransactionTotals(ctx, Query{RunID: run + 1}); tot != (TxnTotals{}) {
		t.Errorf("another run's totals: %+v", tot)
	}
	idle, err := s.LongestIdle(ctx, Query{RunID: run}, 3)
	if err != nil || len(idle) != 3 || idle[0].Seq != 5 || idle[1].Seq != 4 || idle[2].Seq != 3 {
		t.Errorf("longest idle: %+v (%v), want transactions 5, 4, 3", idle, err)
	}

	locks, err := s.LockWaitsByDigest(ctx, Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	wantLocks := []DigestLockWaits{{Digest: stmts[0].Digest, DigestText: stmts[0].DigestText, Calls: 3, LockWaits: 2, LockWaitUS: 500,
		ExecUS: 3 * stmts[0].ExecUS, ClientUS: 3 * stmts[0].ClientUS}}
	if !reflect.DeepEqual(locks, wantLocks) {
		t.Errorf("lock waits by digest %+v\nwant %+v", locks, wantLocks)
	}
	h, _ := s.Holdings(ctx)
	if h.TransactionsFromUS != txns[0].Start {
		t.Errorf("holdings: transactions from %d, want %d", h.TransactionsFromUS, txns[0].Start)
	}
}

// TestMigrationFromPreviousSchema opens a store written at schema 4 (the
// shipped migrations, frozen by TestMigrationsAreAppendOnly, and rows as
// the writer of that schema inserted them): Open adds the transactions and
// the lock wait columns, the old rows read back as they were, with no
// lock wait and outside any transaction, and the run goes on.
func TestMigrationFromPreviousSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	old := &Store{db: db, path: path}
	if _, err := db.Exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_us INTEGER NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	ms, _ := migrations()
	for _, m := range ms[:4] {
		if err := old.apply(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	st := statement(1)
	st.Error = nil
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec("INSERT INTO runs (start_us, command, dsn) VALUES (1, 'watch', '')")
	mustExec(`INSERT INTO statements (run_id, conn, conn_id, user, db, cmd, sql, digest, digest_text,
 t_req_first, t_req_last, t_resp_first, t_resp_last, client_us, request_us, queue_us, exec_us, send_stall_us,
 delivery_us, server_us, "rows", req_bytes, resp_bytes, error_code, error_state, error_msg, zero_window_us,
 retransmits, pool_group, joined, notes) VALUES (1,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,NULL,NULL,NULL,?,?,?,?,?)`,
		st.Conn, int64(st.ConnID), st.User, st.DB, st.Cmd, st.SQL, st.Digest, st.DigestText, st.TReqFirst, st.TReqLast,
		st.TRespFirst, st.TRespLast, st.ClientUS, st.RequestUS, st.QueueUS, st.ExecUS, st.SendStallUS, st.DeliveryUS,
		st.ServerUS, st.Rows, st.ReqBytes, st.RespBytes, st.ZeroWindowUS, st.Retransmits, *st.PoolGroup, st.Joined, `["note 1"]`)
	mustExec(`INSERT INTO digest_minutes (run_id, minute_us, digest, digest_text, calls, kept, exec_us) VALUES (1, 0, 'd', 'SELECT ?', 4, 1, 900)`)
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("opening a schema 4 store: %v", err)
	}
	defer s.Close()
	if v, _ := s.Version(ctx); v != len(ms) {
		t.Fatalf("version %d after opening, want %d", v, len(ms))
	}
	got, err := s.Statements(ctx, Query{})
	if err != nil || len(got) != 1 {
		t.Fatalf("old statements: %+v (%v)", got, err)
	}
	if !reflect.DeepEqual(got[0], st) || got[0].LockWait != nil || got[0].TxnSeq != 0 {
		t.Errorf("the old row reads back as\n%+v\nwant\n%+v", got[0], st)
	}
	if locks, err := s.LockWaitsByDigest(ctx, Query{}); err != nil || len(locks) != 0 {
		t.Errorf("old minutes show lock waits: %+v (%v)", locks, err)
	}
	if tot, err := s.TransactionTotals(ctx, Query{}); err != nil || tot.Count != 0 {
		t.Errorf("transactions in an old store: %+v (%v)", tot, err)
	}
	// The new schema takes a run's transactions and lock waits at once,
	// and the old minute adds up with a new one.
	w := s.NewWriter(1, WriterOptions{})
	tx := transaction(0)
	locked := lockedStatements()[0]
	locked.TReqFirst, locked.Digest, locked.DigestText = 5, "d", "SELECT ?"
	if err := errors.Join(w.AddTransaction(&tx), w.Add(&locked), w.Close()); err != nil {
		t.Fatal(err)
	}
	if back, err := s.Transactions(ctx, Query{}); err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], tx) {
		t.Errorf("transaction after the migration: %+v (%v)", back, err)
	}
	locks, err := s.LockWaitsByDigest(ctx, Query{})
	if err != nil || len(locks) != 1 || locks[0].Calls != 5 || locks[0].LockWaits != 1 || locks[0].LockWaitUS != 300 || locks[0].ExecUS != 900+locked.ExecUS {
		t.Errorf("minutes after the migration: %+v (%v)", locks, err)
	}
	if err := s.Check(ctx); err != nil {
		t.Error(err)
	}
}

// TestRetentionRemovesOldTransactions: age and size both remove
// transactions; a run whose only rows were old transactions goes too.
func TestRetentionRemovesOldTransactions(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	now := time.UnixMicro(transaction(0).Start).Add(48 * time.Hour)
	old, _ := s.StartRun(ctx, "watch", "", now.Add(-47*time.Hour).UnixMicro())
	s.EndRun(ctx, old, now.Add(-46*time.Hour).UnixMicro(), "")
	cur, _ := s.StartRun(ctx, "watch", "", now.Add(-time.Hour).UnixMicro())
	w := s.NewWriter(old, WriterOptions{})
	for i := range 4 {
		tx := transaction(i) // started 48 h before now
		w.AddTransaction(&tx)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = s.NewWriter(cur, WriterOptions{})
	recent := transaction(9)
	recent.Start, recent.End = now.Add(-time.Minute).UnixMicro(), now.Add(-time.Minute).UnixMicro()+400_000
	w.AddTransaction(&recent)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	n, err := s.Retain(ctx, 24*time.Hour, now)
	if err != nil || n != 5 { // 4 transactions and their run
		t.Fatalf("retention removed %d rows (%v), want 4 transactions and 1 run", n, err)
	}
	got, _ := s.Transactions(ctx, Query{})
	runs, _ := s.Runs(ctx)
	if len(got) != 1 || got[0].Seq != recent.Seq || len(runs) != 1 || runs[0].ID != cur {
		t.Errorf("after retention: transactions %+v, runs %+v", got, runs)
	}

	// Past the size limit the oldest transactions go (after the
	// statements, before the per-minute totals).
	big := openTemp(t)
	w = big.NewWriter(1, WriterOptions{BatchRows: 500, Limits: Limits{MaxBytes: 1 << 20}})
	for i := range 20_000 {
		tx := transaction(i)
		tx.LeadSQL = tx.LeadSQL + " /* padding to fill pages faster: " + time.UnixMicro(tx.Start).String() + " */"
		if err := w.AddTransaction(&tx); err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(w.Close(), w.TrimError()); err != nil {
		t.Fatal(err)
	}
	if size, _ := big.Size(ctx); size > 1<<20*11/10 {
		t.Errorf("store of transactions at %d bytes, over its 1 MiB limit", size)
	}
	h, _ := big.Holdings(ctx)
	last, _ := big.Transactions(ctx, Query{FromUS: transaction(19_999).Start})
	if h.Trims == 0 || h.TransactionsFromUS <= transaction(0).Start || len(last) != 1 {
		t.Errorf("size trim: %+v, newest kept %d", h, len(last))
	}
}
