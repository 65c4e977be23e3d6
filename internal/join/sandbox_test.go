package join

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// One sandbox serves every test of the package (a start costs ~1 s).
var shared struct {
	once sync.Once
	inst *sandbox.Instance
	err  error
}

func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	shared.once.Do(func() {
		shared.inst, shared.err = sandbox.Start(context.Background(), sandbox.Options{ServerArgs: []string{
			"--performance-schema=ON",
			"--performance-schema-consumer-events-statements-current=ON",
			"--performance-schema-consumer-events-statements-history-long=ON",
		}})
	})
	if shared.err != nil {
		t.Fatalf("starting sandbox: %v", shared.err)
	}
	return shared.inst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.inst != nil {
		_ = shared.inst.Stop()
	}
	os.Exit(code)
}

func openDB(t *testing.T, inst *sandbox.Instance, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", inst.DSN("")+params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// threadOf returns the performance_schema thread and connection id of a
// pinned connection.
func threadOf(t *testing.T, ctx context.Context, c *sql.Conn) (tid, connID uint64) {
	t.Helper()
	err := c.QueryRowContext(ctx, "SELECT THREAD_ID, PROCESSLIST_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()").Scan(&tid, &connID)
	if err != nil {
		t.Fatal(err)
	}
	return tid, connID
}

// serverRows reads a thread's statements after event afterID from
// events_statements_history_long, as the collector would, converted with
// clock.
func serverRows(t *testing.T, db *sql.DB, tid, connID, afterID uint64, clock collect.Clock) []collect.ServerStatement {
	t.Helper()
	rows, err := db.Query(`SELECT EVENT_ID, END_EVENT_ID, EVENT_NAME, COALESCE(SQL_TEXT,''), COALESCE(DIGEST,''),
		COALESCE(DIGEST_TEXT,''), COALESCE(CURRENT_SCHEMA,''), TIMER_START, TIMER_END, TIMER_WAIT, ROWS_SENT,
		MYSQL_ERRNO, COALESCE(NESTING_EVENT_TYPE,''), COALESCE(NESTING_EVENT_ID,0)
		FROM performance_schema.events_statements_history_long WHERE THREAD_ID = ? AND EVENT_ID > ? ORDER BY EVENT_ID`, tid, afterID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []collect.ServerStatement
	for rows.Next() {
		r := collect.ServerStatement{ThreadID: tid, ConnID: connID}
		if err := rows.Scan(&r.EventID, &r.EndEventID, &r.EventName, &r.SQLText, &r.Digest, &r.DigestText, &r.Schema,
			&r.TimerStart, &r.TimerEnd, &r.TimerWait, &r.RowsSent, &r.MySQLErrno, &r.NestingType, &r.NestingEventID); err != nil {
			t.Fatal(err)
		}
		r.StartUS, r.EndUS = clock.UnixMicros(r.TimerStart), clock.UnixMicros(r.TimerEnd)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func lastEventID(t *testing.T, db *sql.DB, tid uint64) uint64 {
	t.Helper()
	var id sql.NullInt64
	if err := db.QueryRow("SELECT MAX(EVENT_ID) FROM performance_schema.events_statements_history_long WHERE THREAD_ID = ?", tid).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return uint64(id.Int64)
}

type recorded struct {
	cmd, event string // the wire command and the event MariaDB 10.11 records for it
	nested     bool
}

// TestServerRecordsCommands pins the table in compat.go: what MariaDB
// records for each client command, sent by go-sql-driver (and, for
// COM_INIT_DB, by the mariadb client, which go-sql-driver cannot send).
func TestServerRecordsCommands(t *testing.T) {
	inst := server(t)
	ctx := context.Background()
	mon := openDB(t, inst, "")
	mustExec(t, mon, "CREATE DATABASE IF NOT EXISTS rec", "CREATE TABLE IF NOT EXISTS rec.t (id INT PRIMARY KEY, v INT)",
		"INSERT IGNORE INTO rec.t VALUES (1, 1)", "CREATE PROCEDURE IF NOT EXISTS rec.p() BEGIN SELECT 1; SELECT 2; END")
	db := openDB(t, inst, "?multiStatements=true")
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := threadOf(t, ctx, c)
	from := lastEventID(t, mon, tid)
	var want []recorded
	run := func(cmd, event string, f func() error) {
		t.Helper()
		if err := f(); err != nil && event != "statement/sql/error" {
			t.Fatalf("%s: %v", cmd, err)
		}
		want = append(want, recorded{cmd: cmd, event: event})
	}
	run("COM_QUERY", "statement/sql/update", func() error { _, err := c.ExecContext(ctx, "UPDATE rec.t SET v = v + 1 WHERE id = 1"); return err })
	run("COM_QUERY", "statement/sql/error", func() error { _, err := c.ExecContext(ctx, "SELEC 1"); return err })
	var st *sql.Stmt
	run("COM_STMT_PREPARE", "statement/com/Prepare", func() (err error) { st, err = c.PrepareContext(ctx, "SELECT v FROM rec.t WHERE id = ?"); return err })
	var v int
	run("COM_STMT_EXECUTE", "statement/com/Execute", func() error { return st.QueryRowContext(ctx, 1).Scan(&v) })
	run("COM_STMT_CLOSE", "statement/com/Close stmt", st.Close)
	run("COM_PING", "statement/com/Ping", func() error { return c.PingContext(ctx) })
	run("COM_QUERY", "statement/sql/set_option", func() error { _, err := c.ExecContext(ctx, "SET @x = 1; SELECT 2; DO 3"); return err })
	want = append(want, recorded{"COM_QUERY", "statement/sql/select", false}, recorded{"COM_QUERY", "statement/sql/do", false})
	run("COM_QUERY", "statement/sql/call_procedure", func() error {
		rows, err := c.QueryContext(ctx, "CALL rec.p()")
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		for rows.NextResultSet() {
			for rows.Next() {
			}
		}
		return rows.Close()
	})
	want = append(want, recorded{"COM_QUERY", "statement/sp/stmt", true}, recorded{"COM_QUERY", "statement/sp/stmt", true})
	db.SetMaxIdleConns(0) // so that Close sends COM_QUIT instead of pooling the connection
	run("COM_QUIT", "statement/com/Quit", c.Close)

	got := waitRows(t, mon, tid, from, len(want))
	if len(got) != len(want) {
		t.Fatalf("server recorded %d statements, want %d: %v", len(got), len(want), names(got))
	}
	for i, w := range want {
		g := got[i]
		nested := g.NestingType == "STATEMENT"
		if g.EventName != w.event || nested != w.nested {
			t.Errorf("#%d %s: server recorded %s (nesting %q), table says %s", i, w.cmd, g.EventName, g.NestingType, w.event)
		}
		if !w.nested && !cmdCompatible(w.cmd, g.EventName) {
			t.Errorf("#%d: cmdCompatible(%s, %s) = false", i, w.cmd, g.EventName)
		}
		if strings.HasPrefix(g.EventName, "statement/com/") && (g.SQLText != "" || g.Digest != "") {
			t.Errorf("#%d %s: expected no SQL_TEXT/DIGEST, got %q %q", i, g.EventName, g.SQLText, g.Digest)
		}
	}
	initDBRecorded(t, inst, mon)
}

func initDBRecorded(t *testing.T, inst *sandbox.Instance, mon *sql.DB) {
	t.Helper()
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		t.Fatalf("the mariadb client (installed with the server) is needed to send COM_INIT_DB: %v", err)
	}
	marker := fmt.Sprintf("SELECT 'initdb-%d'", time.Now().UnixNano())
	cmd := exec.Command(cli, "--no-defaults", "-uroot", "-h127.0.0.1", fmt.Sprintf("-P%d", inst.Port), "-e", marker+"; use mysql; DO 1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb client: %v\n%s", err, out)
	}
	var tid uint64
	if err := mon.QueryRow("SELECT THREAD_ID FROM performance_schema.events_statements_history_long WHERE SQL_TEXT = ?", marker).Scan(&tid); err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, r := range serverRows(t, mon, tid, 0, 0, collect.Clock{}) {
		evs = append(evs, r.EventName)
	}
	// The client asks SELECT DATABASE() before sending COM_INIT_DB.
	if !strings.Contains(strings.Join(evs, ","), "statement/sql/select,statement/com/Init DB,statement/sql/do,statement/com/Quit") {
		t.Errorf("mariadb client session recorded %v", evs)
	}
	if !cmdCompatible("COM_INIT_DB", "statement/com/Init DB") {
		t.Error("COM_INIT_DB not compatible with statement/com/Init DB")
	}
}

func waitRows(t *testing.T, db *sql.DB, tid, from uint64, n int) []collect.ServerStatement {
	t.Helper()
	// COM_QUIT is recorded after the client closed; give the server a moment.
	var got []collect.ServerStatement
	for range 100 {
		got = serverRows(t, db, tid, 0, from, collect.Clock{})
		// threadOf's own row may have landed after from was read.
		got = slices.DeleteFunc(got, func(r collect.ServerStatement) bool {
			return strings.HasPrefix(r.SQLText, "SELECT THREAD_ID, PROCESSLIST_ID")
		})
		if len(got) >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got
}

func names(rows []collect.ServerStatement) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.EventName)
	}
	return out
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// clientStatement runs f and records it as the wire would see it, with
// times taken around the call by the client (a wider window than the
// capture's, which is what the clamping must cope with).
func clientStatement(t *testing.T, connID uint64, cmd, sqlText string, f func() error) *event.Statement {
	t.Helper()
	before := time.Now().UnixMicro()
	if err := f(); err != nil {
		t.Fatalf("%s %s: %v", cmd, sqlText, err)
	}
	after := time.Now().UnixMicro()
	return &event.Statement{Conn: "127.0.0.1:1>127.0.0.1:2", ConnID: connID, Cmd: cmd, SQL: sqlText,
		TReqFirst: before, TReqLast: before, TRespFirst: after, TRespLast: after}
}

// TestJoinRealServer joins statements timed by the client with what the
// server recorded for them, in both arrival orders, and checks the
// decomposition on real data.
func TestJoinRealServer(t *testing.T) {
	inst := server(t)
	ctx := context.Background()
	mon := openDB(t, inst, "")
	mustExec(t, mon, "CREATE DATABASE IF NOT EXISTS jreal", "CREATE TABLE IF NOT EXISTS jreal.t (id INT PRIMARY KEY, v INT)",
		"INSERT IGNORE INTO jreal.t VALUES (1, 1), (2, 2)")
	clock, err := collect.CalibrateWith(ctx, mon, collect.CalibrateOptions{})
	if err != nil {
		t.Fatalf("calibrating: %v", err)
	}
	t.Logf("clock: origin %d us, error %d us", clock.OriginUS, clock.ErrorUS)
	db := openDB(t, inst, "?multiStatements=true")
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tid, connID := threadOf(t, ctx, c)
	from := lastEventID(t, mon, tid)

	exec := func(q string) func() error { return func() error { _, err := c.ExecContext(ctx, q); return err } }
	st, err := c.PrepareContext(ctx, "SELECT v FROM jreal.t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	from = lastEventID(t, mon, tid) // after the prepare
	var v int
	wires := []*event.Statement{
		clientStatement(t, connID, "COM_QUERY", "SELECT SLEEP(?)", exec("SELECT SLEEP(0.2)")),
		clientStatement(t, connID, "COM_STMT_EXECUTE", "SELECT v FROM jreal.t WHERE id = ?", func() error { return st.QueryRowContext(ctx, 2).Scan(&v) }),
		clientStatement(t, connID, "COM_PING", "", func() error { return c.PingContext(ctx) }),
		clientStatement(t, connID, "COM_QUERY", "UPDATE jreal.t SET v = v + ? WHERE id = ?", exec("UPDATE jreal.t SET v = v + 1 WHERE id = 1")),
		clientStatement(t, connID, "COM_QUERY", "SET @a = ?; DO SLEEP(?)", exec("SET @a = 1; DO SLEEP(0.05)")),
		clientStatement(t, connID, "COM_QUERY", "SELECT ?", exec("SELECT 1")),
	}
	// The server records a statement's end after sending its answer
	// (ServerTailUS): the last row may lag the client by a moment.
	// A multi-statement query's rows are trusted to be all in from a read
	// that began multiSettleUS after its answer: read after that.
	time.Sleep(multiSettleUS * time.Microsecond)
	var rows []collect.ServerStatement
	var readAt int64
	for range 100 {
		readAt = time.Now().UnixMicro()
		rows = serverRows(t, mon, tid, connID, from, clock)
		// The prepare's own row may itself have landed after from was read.
		rows = slices.DeleteFunc(rows, func(r collect.ServerStatement) bool { return r.EventName == "statement/com/Prepare" })
		if len(rows) >= 7 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(rows) != 7 {
		t.Fatalf("server rows: %v", names(rows))
	}

	for _, serverFirst := range []bool{false, true} {
		copies := make([]*event.Statement, len(wires))
		for i, w := range wires {
			cp := *w
			copies[i] = &cp
		}
		rec := newRecorder(t)
		j := New(Options{CalibrationErrorUS: clock.ErrorUS + 1}, rec.emit)
		if serverFirst {
			j.AddServer(rows, readAt)
		}
		for _, s := range copies {
			j.AddWire(s, 0)
		}
		if !serverFirst {
			j.AddServer(rows, readAt)
		}
		st := j.Stats()
		if len(rec.out) != len(copies) || st.Joined != int64(len(copies)) || st.UnmatchedServer != 0 || st.Merged != 1 {
			for _, w := range copies {
				t.Logf("wire: %s %q req %d..%d resp %d..%d joined %v server %d", w.Cmd, w.SQL, w.TReqFirst, w.TReqLast, w.TRespFirst, w.TRespLast, w.Joined, w.ServerUS)
			}
			for _, r := range rows {
				t.Logf("row: %s %q %d..%d", r.EventName, r.SQLText, r.StartUS, r.EndUS)
			}
			t.Fatalf("serverFirst=%v: emitted %d, stats %+v", serverFirst, len(rec.out), st)
		}
		// The server cannot start a statement before the client sent it:
		// a clamped start would mean a bad clock or a bad match. (Its end
		// may follow the client's receipt: see ServerTailUS.)
		if st.ClampedStart != 0 {
			t.Errorf("serverFirst=%v: a server start fell before the client sent by more than the calibration error: %+v", serverFirst, st)
		}
		for i, s := range copies {
			if sumParts(s) != s.ClientUS {
				t.Errorf("#%d: parts do not sum to client_us", i)
			}
			t.Logf("%-16s %-40q client %7d queue %5d exec %7d delivery %5d server %7d", s.Cmd, s.SQL, s.ClientUS, s.QueueUS, s.ExecUS, s.DeliveryUS, s.ServerUS)
		}
		sleep, exe, multi := copies[0], copies[1], copies[4]
		if sleep.ExecUS < 200_000 || sleep.ServerUS < 200_000 || sleep.Digest == "" {
			t.Errorf("SLEEP(0.2): exec %d us, server %d us, digest %q", sleep.ExecUS, sleep.ServerUS, sleep.Digest)
		}
		if multi.ExecUS < 50_000 {
			t.Errorf("multi-statement with SLEEP(0.05): exec %d us", multi.ExecUS)
		}
		if exe.Digest != "" {
			t.Errorf("COM_STMT_EXECUTE got a server digest %q; MariaDB records none", exe.Digest)
		}
	}
}
