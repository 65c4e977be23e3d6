package collect

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// loaded starts a sandbox whose global statement ring holds ring rows and
// runs sysbench oltp_read_write on it (server-side prepared statements,
// ~10k statements/s here) until the returned stop is called.
func loaded(tb testing.TB, ring, threads int) (*sandbox.Instance, func()) {
	tb.Helper()
	return loadedAt(tb, ring, threads, 0)
}

// loadedAt is loaded with sysbench capped at rate transactions per second
// (0: uncapped), for tests that need the ring to outlast the run whatever
// the machine's speed.
func loadedAt(tb testing.TB, ring, threads, rate int) (*sandbox.Instance, func()) {
	tb.Helper()
	if !workload.SysbenchAvailable() {
		tb.Fatal("sysbench is not installed (make deps installs it)")
	}
	inst := sandbox.ForTest(tb, sandbox.Options{ServerArgs: []string{
		"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history=ON",
		"--performance-schema-consumer-events-statements-history-long=ON",
		fmt.Sprintf("--performance-schema-events-statements-history-long-size=%d", ring),
	}})
	opts := workload.OLTPOptions{Tables: 2, TableSize: 10_000, Threads: threads, Duration: time.Hour, Rate: rate}
	if _, err := workload.Sysbench(context.Background(), inst.DSN(""), opts, "prepare"); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = workload.Sysbench(ctx, inst.DSN(""), opts, "run") // ends by cancel
	}()
	stop := func() { cancel(); <-done }
	tb.Cleanup(stop)
	return inst, stop
}

func openMonitor(tb testing.TB, inst *sandbox.Instance) *sql.DB {
	tb.Helper()
	db, err := NewSecrets().Open(inst.DSN(""), "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

type seenRow struct {
	conn      uint64
	sql, name string
}

// collectRows polls cur and records each returned row by its key, failing
// on a row returned twice.
func collectRows(t *testing.T, cur *StatementCursor, db *sql.DB, into map[eventKey]seenRow) {
	t.Helper()
	rows, _, err := cur.Poll(context.Background(), db, Clock{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rows {
		k := eventKey{s.ThreadID, s.EventID, s.EndEventID, s.TimerEnd}
		if _, dup := into[k]; dup {
			t.Errorf("row returned twice: thread %d event %d %q", s.ThreadID, s.EventID, s.SQLText)
		}
		into[k] = seenRow{s.ConnID, s.SQLText, s.EventName}
	}
}

// TestStatementCursorIncrementalSandbox reads a 100k-row ring under
// sysbench with an incremental cursor polling every 50 ms, and a
// whole-table cursor polling rarely for comparison. Sysbench runs for less
// than the ring holds, so a final read of the quiet ring is the truth: the
// incremental cursor must have returned exactly its statements (same
// connection ids and texts), none twice, none lost.
func TestStatementCursorIncrementalSandbox(t *testing.T) {
	// 500 transactions/s is ~9,000 statements/s: the 100k ring outlasts the
	// ~6 s run (uncapped, a quiet machine filled it in 5 s).
	inst, stop := loadedAt(t, 100_000, 2, 500)
	db := openMonitor(t, inst)
	full := newStatementCursor("events_statements_history_long", false)
	inc := NewStatementCursor("events_statements_history_long")
	ctx := context.Background()
	for _, c := range []*StatementCursor{full, inc} {
		if err := c.Prime(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	// Compare from one second (server time) after the Primes: statements
	// that completed between them are new to one cursor only.
	from := inc.r.ring.inc.hwm + PicosPerSec
	gotFull, gotInc := map[eventKey]seenRow{}, map[eventKey]seenRow{}
	end := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		collectRows(t, inc, db, gotInc)
		if i%10 == 9 {
			collectRows(t, full, db, gotFull)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	time.Sleep(500 * time.Millisecond) // statements still running finish
	collectRows(t, inc, db, gotInc)
	collectRows(t, full, db, gotFull)
	truth := map[eventKey]seenRow{}
	collectRows(t, newStatementCursor("events_statements_history_long", false), db, truth)
	oldest := ^uint64(0)
	for k := range truth {
		oldest = min(oldest, k.TimerEnd)
	}
	if oldest >= from {
		t.Fatalf("the ring no longer holds the start of the run (oldest row %d ps, run from %d): raise the ring or shorten the run", oldest, from)
	}
	st := inc.Stats()
	t.Logf("whole-table cursor: %d statements, %+v", len(gotFull), full.Stats())
	t.Logf("incremental cursor: %d statements, %+v", len(gotInc), st)
	if full.Lost != 0 || inc.Lost != 0 {
		t.Errorf("ring loss on a 100k ring: whole %d, incremental %d", full.Lost, inc.Lost)
	}
	for _, m := range []map[eventKey]seenRow{truth, gotFull, gotInc} {
		maps.DeleteFunc(m, func(k eventKey, _ seenRow) bool { return k.TimerEnd <= from })
	}
	if len(truth) < 10_000 {
		t.Fatalf("only %d statements in 5 s of sysbench", len(truth))
	}
	compareRows(t, "incremental", truth, gotInc)
	// The whole-table cursor trusts its thread marks and may miss rows
	// (see ringCursor); it is reported, not asserted.
	if n := missingFrom(truth, gotFull); n > 0 {
		t.Logf("the whole-table cursor missed %d of %d statements", n, len(truth))
	}
	if st.RowsRead >= full.Stats().RowsRead {
		t.Errorf("incremental cursor read %d rows in %d polls, the whole-table one %d in %d",
			st.RowsRead, st.Polls, full.Stats().RowsRead, full.Stats().Polls)
	}
}

func missingFrom(want, got map[eventKey]seenRow) int {
	n := 0
	for k := range want {
		if _, ok := got[k]; !ok {
			n++
		}
	}
	return n
}

// compareRows reports rows of want missing from got, rows of got not in
// want, and rows that differ or have no connection id. The truth is read
// after the clients have gone: its connection ids are 0, and the cursor's
// must have been filled while the clients were there.
func compareRows(t *testing.T, who string, want, got map[eventKey]seenRow) {
	t.Helper()
	var missing, extra, differ []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprintf("%+v %+v", k, w))
		case g.sql != w.sql || g.name != w.name || (w.conn != 0 && g.conn != w.conn) || g.conn == 0:
			differ = append(differ, fmt.Sprintf("%+v: %+v vs %+v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%+v %+v", k, g))
		}
	}
	for what, l := range map[string][]string{"missing": missing, "extra": extra, "different": differ} {
		if len(l) > 0 {
			slices.Sort(l)
			t.Errorf("%d of %d rows %s in the %s read, first: %v", len(l), len(want), what, who, l[:min(len(l), 5)])
		}
	}
}

// TestWindowSQLSandbox evaluates the window condition on the server,
// including its wrapped form (a window start past 2^63, as after 107 days
// of uptime), and checks it selects each row exactly when admits does.
func TestWindowSQLSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	var hi uint64
	q := Mark + " SELECT COALESCE(MAX(TIMER_END), 0) FROM performance_schema.events_statements_history_long"
	if err := db.QueryRowContext(ctx, q).Scan(&hi); err != nil || hi == 0 {
		t.Fatalf("max TIMER_END = %d, %v", hi, err)
	}
	for _, w := range []window{{from: 0}, {from: hi / 2}, {from: hi}, {from: hi - halfRange}, {from: ^uint64(0) - 5}} {
		// One scan evaluates the condition beside each value, so rows the
		// ring evicts meanwhile do not matter.
		q := Mark + " SELECT TIMER_END, " + w.sql("TIMER_END") +
			" FROM performance_schema.events_statements_history_long WHERE TIMER_END IS NOT NULL"
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		in, n := 0, 0
		for rows.Next() {
			var te uint64
			var sel bool
			if err := rows.Scan(&te, &sel); err != nil {
				t.Fatal(err)
			}
			n++
			if sel {
				in++
			}
			if sel != w.admits(te) {
				t.Errorf("window from %d, TIMER_END %d: server selects %v, admits %v", w.from, te, sel, w.admits(te))
			}
		}
		rows.Close()
		if n == 0 || (w.from > hi && w.from-hi > halfRange && in != n) {
			t.Errorf("window from %d: %d of %d rows selected", w.from, in, n)
		}
	}
}

// BenchmarkStatementCursorSandbox polls rings of 1k, 10k and 100k rows
// under sysbench, with the whole-table read and the incremental one, 100 ms
// apart (the watch poll interval): ns/op is one poll, rows/poll what the
// server sent, new/poll what was new. whole-join is the whole-table read of
// the join cursor's columns (watch's), against whole's every column. It
// also times the single-scan queries
// a loss check could add (the incremental cursor adds none).
//
//	go test -run '^$' -bench StatementCursorSandbox -benchtime 40x ./internal/collect
func BenchmarkStatementCursorSandbox(b *testing.B) {
	for _, ring := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ring=%d", ring), func(b *testing.B) {
			inst, _ := loaded(b, ring, 2)
			db := openMonitor(b, inst)
			time.Sleep(time.Duration(ring/10) * time.Millisecond) // the ring fills (~10k statements/s)
			for _, mode := range []string{"whole", "whole-join", "incremental"} {
				b.Run(mode, func(b *testing.B) {
					cur := newStatementCursor("events_statements_history_long", mode == "incremental")
					if mode == "whole-join" {
						cur.r.want = joinFields
					}
					benchPolls(b, db, cur)
				})
			}
			for name, q := range extraQueries {
				b.Run(name, func(b *testing.B) { benchQuery(b, db, q) })
			}
		})
	}
}

var extraQueries = map[string]string{
	"count+min(timer_end)":        "SELECT COUNT(*), MIN(TIMER_END) FROM performance_schema.events_statements_history_long",
	"min(end_event_id)/thread":    "SELECT THREAD_ID, MIN(END_EVENT_ID) FROM performance_schema.events_statements_history_long GROUP BY THREAD_ID",
	"oldest by order-by-limit-1":  "SELECT THREAD_ID, EVENT_ID FROM performance_schema.events_statements_history_long ORDER BY TIMER_END LIMIT 1",
	"live threads (mark pruning)": "SELECT THREAD_ID FROM performance_schema.threads",
}

func benchPolls(b *testing.B, db *sql.DB, cur *StatementCursor) {
	incremental := cur.r.incremental
	ctx := context.Background()
	if err := cur.Prime(ctx, db); err != nil {
		b.Fatal(err)
	}
	base := cur.Stats()
	var lost int64
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		time.Sleep(100 * time.Millisecond)
		b.StartTimer()
		_, l, err := cur.Poll(ctx, db, Clock{})
		if err != nil {
			b.Fatal(err)
		}
		lost += l
	}
	st := cur.Stats()
	polls := float64(st.Polls - base.Polls)
	b.ReportMetric(float64(st.RowsRead-base.RowsRead)/polls, "rows/poll")
	b.ReportMetric(float64(st.RowsNew-base.RowsNew)/polls, "new/poll")
	b.ReportMetric(float64(lost)/polls, "lost/poll")
	if incremental {
		b.ReportMetric(float64(st.MaxLateUS), "max-late-µs")
		b.ReportMetric(float64(st.SlackUS), "slack-µs")
	}
}

func benchQuery(b *testing.B, db *sql.DB, q string) {
	ctx := context.Background()
	for b.Loop() {
		rows, err := db.QueryContext(ctx, Mark+" "+q)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStatementCursorForgetsEndedSandbox checks that an incremental cursor
// drops the mark of a connection that has closed (once its rows stop
// coming back), and keeps the mark of one that is only idle.
func TestStatementCursorForgetsEndedSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	cur := NewStatementCursor("events_statements_history_long")
	if err := cur.Prime(ctx, db); err != nil {
		t.Fatal(err)
	}
	idle, idleID := app(t)
	closing, closingID := app(t)
	threadOf := map[uint64]uint64{}
	for _, id := range []uint64{idleID, closingID} {
		q := Mark + " SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = ?"
		var th uint64
		if err := db.QueryRowContext(ctx, q, id).Scan(&th); err != nil {
			t.Fatal(err)
		}
		threadOf[id] = th
	}
	execAll(t, idle, "SELECT 'idle'")
	execAll(t, closing, "SELECT 'closing'") // then KILLed
	waitSQLInHistory(t, idleID, "SELECT 'idle'")
	pollFor(t, cur, Clock{}, closingID, 2) // SELECT CONNECTION_ID() and 'closing'
	if _, err := db.ExecContext(ctx, fmt.Sprintf("%s KILL %d", Mark, closingID)); err != nil {
		t.Fatal(err)
	}
	gone := threadOf[closingID]
	for i := 0; i < 200; i++ {
		cur.r.checkAt = 0 // look for ended threads on every poll
		if _, _, err := cur.Poll(ctx, db, Clock{}); err != nil {
			t.Fatal(err)
		}
		if _, ok := cur.r.ring.marks[gone]; !ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := cur.r.ring.marks[gone]; ok {
		t.Errorf("mark of closed connection %d (thread %d) kept", closingID, gone)
	}
	if _, ok := cur.r.ring.marks[threadOf[idleID]]; !ok {
		t.Errorf("mark of idle connection %d dropped", idleID)
	}
}

// TestJoinCursorExceptConnsSandbox reads the ring under sysbench with a
// join cursor told to leave out all but two of its connections: only the
// two come back, with the statement text cut to its start and no
// statistics columns; an empty list lifts the restriction.
func TestJoinCursorExceptConnsSandbox(t *testing.T) {
	inst, _ := loaded(t, 100_000, 4)
	db := openMonitor(t, inst)
	ctx := context.Background()
	var sysbench []uint64
	for deadline := time.Now().Add(20 * time.Second); len(sysbench) < 4 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var r ProcesslistReader
		procs, err := r.Read(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		sysbench = sysbench[:0]
		for _, p := range procs {
			if p.DB == "sbtest" {
				sysbench = append(sysbench, p.ID)
			}
		}
	}
	if len(sysbench) < 4 {
		t.Fatalf("%d sysbench connections in the processlist, want 4", len(sysbench))
	}
	want := map[uint64]bool{sysbench[0]: true, sysbench[1]: true}
	cur := NewJoinCursor("events_statements_history_long")
	if err := cur.Prime(ctx, db); err != nil {
		t.Fatal(err)
	}
	cur.ExceptConns(sysbench[2:])
	per := map[uint64]int{}
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		rows, _, err := cur.Poll(ctx, db, Clock{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			per[r.ConnID]++
			if !want[r.ConnID] {
				t.Fatalf("statement of connection %d returned, left out %v", r.ConnID, sysbench[2:])
			}
			// Rows examined and lock time are read (the server-only
			// profile shows them); sort and scan counts are not.
			if len(r.SQLText) > joinTextPrefix || r.SortRows != 0 || r.SelectScan != 0 || r.CreatedTmpTables != 0 {
				t.Fatalf("join cursor row has %d bytes of text, sort rows %d: not the narrow read", len(r.SQLText), r.SortRows)
			}
		}
	}
	if per[sysbench[0]] == 0 || per[sysbench[1]] == 0 {
		t.Fatalf("statements per kept connection: %v", per)
	}
	cur.ExceptConns(nil)
	time.Sleep(100 * time.Millisecond)
	rows, _, err := cur.Poll(ctx, db, Clock{})
	if err != nil {
		t.Fatal(err)
	}
	all := map[uint64]bool{}
	for _, r := range rows {
		all[r.ConnID] = true
	}
	if len(all) < 4 {
		t.Errorf("without a restriction, statements of %d connections", len(all))
	}
}

// BenchmarkHistoryThreadsJoinSandbox: why history reads map threads to
// connections themselves. A read of a full 1,000-row history with and
// without a join on performance_schema.threads (what reads did before), and
// the threads table alone (what they read now when a thread is new), as the
// number of open connections grows: the join is a nested loop on the server.
func BenchmarkHistoryThreadsJoinSandbox(b *testing.B) {
	inst := sandbox.ForTest(b, sandbox.Options{ServerArgs: []string{
		"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history-long=ON",
		"--performance-schema-events-statements-history-long-size=1000",
		"--max-connections=1000",
	}})
	db := openMonitor(b, inst)
	for i := range 1_200 { // fill the ring
		if _, err := db.Exec(fmt.Sprintf("SELECT %d", i)); err != nil {
			b.Fatal(err)
		}
	}
	const cols = "h.THREAD_ID, h.EVENT_ID, h.END_EVENT_ID, h.TIMER_START, h.TIMER_END, h.TIMER_WAIT, LEFT(h.SQL_TEXT, 128), h.DIGEST"
	queries := map[string]string{
		"history":              "SELECT " + cols + " FROM performance_schema.events_statements_history_long h",
		"history-join-threads": "SELECT " + cols + ", t.PROCESSLIST_ID FROM performance_schema.events_statements_history_long h LEFT JOIN performance_schema.threads t ON t.THREAD_ID = h.THREAD_ID",
		"threads":              "SELECT THREAD_ID, PROCESSLIST_ID FROM performance_schema.threads",
	}
	idle, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		b.Fatal(err)
	}
	defer idle.Close()
	var held []*sql.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for _, conns := range []int{10, 100, 600} {
		for len(held) < conns {
			c, err := idle.Conn(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, c)
		}
		for _, name := range []string{"history", "history-join-threads", "threads"} {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, name), func(b *testing.B) { benchQuery(b, db, queries[name]) })
		}
	}
}
