package collect

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// A thread's own history and current statement are read by connection,
// each row saying where it came from; and a cursor that leaves a
// connection out still returns its slow rows (ExceptBelow), not its fast
// ones.
func TestThreadStatementsAndExceptBelowSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	conn, id := app(t)
	cur := NewJoinCursor(SourceHistoryLong)
	if err := cur.Prime(ctx, db); err != nil {
		t.Fatal(err)
	}
	cur.ExceptConns([]uint64{id})
	cur.ExceptBelow(10 * time.Millisecond)
	execAll(t, conn, "SELECT 'fast one'", "SELECT SLEEP(0.05)")
	waitSQLInHistory(t, id, "SELECT SLEEP(0.05)")
	clock, err := CalibrateWith(ctx, db, CalibrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The cursor learns the connection's thread from its first read.
	if _, _, err := cur.Poll(ctx, db, clock); err != nil {
		t.Fatal(err)
	}
	execAll(t, conn, "SELECT 'fast two'", "SELECT SLEEP(0.03)")
	waitSQLInHistory(t, id, "SELECT SLEEP(0.03)")
	rows, _, err := cur.Poll(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	var slow, fast int
	for _, r := range ofConn(rows, id) {
		if r.SQLText == "SELECT SLEEP(0.03)" {
			slow++
		} else {
			fast++
		}
	}
	if slow != 1 || fast != 0 {
		t.Errorf("a left-out connection's rows: %d slow, %d fast; want its slow one only", slow, fast)
	}

	threads, err := ThreadsOf(ctx, db, []uint64{id})
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads of connection %d: %v, %v", id, threads, err)
	}
	var ts ThreadStatements
	got, err := ts.Read(ctx, db, threads, clock, 0)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]int{}
	found := false
	for _, r := range got {
		if r.ConnID != id || r.StartUS == 0 {
			t.Errorf("row %+v: connection %d, start %d", r.SQLText, r.ConnID, r.StartUS)
		}
		sources[r.Source]++
		found = found || (r.SQLText == "SELECT SLEEP(0.03)" && r.TimerWait >= 30_000_000_000)
	}
	if !found || sources[SourceHistory] == 0 {
		t.Errorf("the thread's rows by source %v; its last slow statement found: %v", sources, found)
	}
}

// A statement its thread's own history no longer holds (ten later ones on
// the same connection) is read from history_long, for that thread and from
// the time given only; without a time, history_long is not read.
func TestThreadStatementsFromHistoryLongSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	clock, err := CalibrateWith(ctx, db, CalibrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, id := app(t)
	execAll(t, conn, "SELECT 'before the span'")
	time.Sleep(50 * time.Millisecond) // more than the calibration's error on a loaded host
	since := time.Now().UnixMicro()
	execAll(t, conn, "SELECT SLEEP(0.03)")
	fast := make([]string, 12)
	for i := range fast {
		fast[i] = "SELECT 'after " + string(rune('a'+i)) + "'"
	}
	execAll(t, conn, fast...)
	waitSQLInHistory(t, id, fast[len(fast)-1])
	threads, err := ThreadsOf(ctx, db, []uint64{id})
	if err != nil || len(threads) != 1 {
		t.Fatalf("threads of connection %d: %v, %v", id, threads, err)
	}
	var ts ThreadStatements
	find := func(sinceUS int64) (map[string]string, int) {
		t.Helper()
		rows, err := ts.Read(ctx, db, threads, clock, sinceUS)
		if err != nil {
			t.Fatal(err)
		}
		source, long := map[string]string{}, 0
		for _, r := range rows {
			if r.ConnID != id {
				t.Errorf("row %q of connection %d, want %d", r.SQLText, r.ConnID, id)
			}
			source[r.SQLText] = r.Source
			if r.Source == SourceHistoryLong {
				long++
			}
		}
		return source, long
	}
	if got, long := find(0); long != 0 || got["SELECT SLEEP(0.03)"] != "" {
		t.Errorf("without a time: %d history_long rows, the slow one from %q; want none", long, got["SELECT SLEEP(0.03)"])
	}
	got, _ := find(since - clock.ErrorUS)
	if got["SELECT SLEEP(0.03)"] != SourceHistoryLong {
		t.Errorf("the slow statement pushed out of its thread's history came from %q, want %s (rows %v)", got["SELECT SLEEP(0.03)"], SourceHistoryLong, got)
	}
	if src := got["SELECT 'before the span'"]; src != "" {
		t.Errorf("a statement that ended before the time given was read (from %s)", src)
	}
}

// ReadRunning returns the statements running beyond a threshold, each with
// its connection; a thread first met on a later read is looked up then
// (the connections of the threads met before are remembered).
func TestReadRunningSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	clock, err := CalibrateWith(ctx, db, CalibrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ts ThreadStatements
	sleeping := func() map[uint64]ServerStatement {
		t.Helper()
		rows, err := ts.ReadRunning(ctx, db, 50*time.Millisecond, clock)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint64]ServerStatement{}
		for _, r := range rows {
			if r.SQLText == "SELECT SLEEP(2)" {
				out[r.ConnID] = r
			}
		}
		return out
	}
	start := func(conn *sql.Conn) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := conn.ExecContext(ctx, "SELECT SLEEP(2)"); done <- err }()
		return done
	}
	first, firstID := app(t)
	done := start(first)
	time.Sleep(200 * time.Millisecond)
	before := time.Now().UnixMicro()
	got := sleeping()
	if r, ok := got[firstID]; !ok || r.Source != SourceRunning || r.EndUS != 0 || r.StartUS == 0 || r.StartUS > before {
		t.Fatalf("first read: %+v", got)
	}
	second, secondID := app(t) // a thread the first read could not know
	done2 := start(second)
	time.Sleep(200 * time.Millisecond)
	got = sleeping()
	if _, ok := got[firstID]; !ok {
		t.Errorf("second read lost connection %d: %+v", firstID, got)
	}
	if _, ok := got[secondID]; !ok {
		t.Errorf("second read: the thread of connection %d, new, not looked up: %+v", secondID, got)
	}
	for _, d := range []<-chan error{done, done2} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
}
