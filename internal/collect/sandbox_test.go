package collect

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// The package's end-to-end tests share one MariaDB sandbox configured as the
// issue asks: performance_schema on with statement history (both rings),
// stages and socket waits instrumented, thread pool on with an extra port.
// The long ring is made small so that its wrap can be provoked quickly.
const testLongSize = 200

var testServerArgs = []string{
	"--performance-schema=ON",
	"--performance-schema-consumer-events-statements-current=ON",
	"--performance-schema-consumer-events-statements-history=ON",
	"--performance-schema-consumer-events-statements-history-long=ON",
	"--performance-schema-consumer-events-stages-current=ON",
	"--performance-schema-consumer-events-stages-history-long=ON",
	"--performance-schema-consumer-events-waits-current=ON",
	"--performance-schema-consumer-events-waits-history-long=ON",
	"--performance-schema-instrument=stage/%=ON",
	"--performance-schema-instrument=wait/io/socket/%=ON",
	fmt.Sprintf("--performance-schema-events-statements-history-long-size=%d", testLongSize),
	"--thread-handling=pool-of-threads",
}

var (
	shared    *sandbox.Instance
	sharedErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		shared, sharedErr = sandbox.Start(context.Background(), sandbox.Options{ServerArgs: testServerArgs, ExtraPort: -1})
	}
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// server returns the shared sandbox, skipping under -short and failing when
// it could not start (a missing server is never a pass).
func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	if sharedErr != nil {
		t.Fatalf("starting sandbox: %v", sharedErr)
	}
	return shared
}

// monitor opens gapscope's own connection pool (as collect.Open would).
func monitor(t *testing.T) *sql.DB {
	t.Helper()
	db, err := NewSecrets().Open(server(t).DSN(""), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// app opens one pinned "application" connection and returns it with its
// connection id.
func app(t *testing.T) (*sql.Conn, uint64) {
	t.Helper()
	db, err := server(t).Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id uint64
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	waitInHistory(t, id, 1)
	return conn, id
}

// waitSQLInHistory waits until connection id's statement text is in history.
func waitSQLInHistory(t *testing.T, id uint64, text string) {
	t.Helper()
	db := monitor(t)
	q := Mark + " SELECT COUNT(*) FROM performance_schema.events_statements_history h JOIN performance_schema.threads t USING (THREAD_ID) WHERE t.PROCESSLIST_ID = ? AND h.SQL_TEXT = ?"
	for i := 0; i < 400; i++ {
		var got int
		if err := db.QueryRow(q, id, text).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("connection %d: %q never reached history", id, text)
}

// waitInHistory waits until connection id has n statements in history:
// a statement reaches history only after the cleanup that follows its
// answer, and tests that count statements must not race with that.
func waitInHistory(t *testing.T, id uint64, n int) {
	t.Helper()
	db := monitor(t)
	q := Mark + " SELECT COUNT(*) FROM performance_schema.events_statements_history h JOIN performance_schema.threads t USING (THREAD_ID) WHERE t.PROCESSLIST_ID = ?"
	for i := 0; i < 400; i++ {
		var got int
		if err := db.QueryRow(q, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("connection %d never had %d statements in history", id, n)
}

func execAll(t *testing.T, conn *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		rows, err := conn.QueryContext(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
}

func ofConn(stmts []ServerStatement, conn uint64) []ServerStatement {
	var out []ServerStatement
	for _, s := range stmts {
		if s.ConnID == conn {
			out = append(out, s)
		}
	}
	return out
}

func TestDetectServerSandbox(t *testing.T) {
	db := monitor(t)
	info, err := DetectServer(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if info.Flavor != "mariadb" || info.Major < 10 || !info.PerformanceSchema {
		t.Errorf("info = %+v, want mariadb >= 10 with performance_schema", info)
	}
	if !info.ThreadPool || !info.ThreadPoolTables || info.ThreadPoolSize < 1 || info.ExtraPort != shared.ExtraPort {
		t.Errorf("thread pool not detected: %+v", info)
	}
	if info.HistoryLongSize != testLongSize || info.HistorySize <= 0 {
		t.Errorf("history sizes = %d/%d, want %d/>0", info.HistorySize, info.HistoryLongSize, testLongSize)
	}
	if info.Timers["statement"] != "NANOSECOND" {
		t.Errorf("timers = %v", info.Timers)
	}
}

func TestStatusVariablesSandbox(t *testing.T) {
	db := monitor(t)
	st, err := GlobalStatus(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Threads_running", "Threads_connected", "Questions", "Com_select", "Uptime"} {
		if _, ok := st[k]; !ok {
			t.Errorf("status lacks %s", k)
		}
	}
	vars, err := GlobalVariables(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if vars["thread_handling"] != "pool-of-threads" {
		t.Errorf("thread_handling = %q", vars["thread_handling"])
	}
}
