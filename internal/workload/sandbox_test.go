package workload

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// Two sandboxes serve the package: a default one (performance_schema on,
// to read statement times back) and a thread-pool one (the thread-pool case's
// settings). Each starts on first use and stops in TestMain.
type sharedServer struct {
	once sync.Once
	inst *sandbox.Instance
	err  error
	opts sandbox.Options
}

var (
	plain = &sharedServer{opts: sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history-long=ON"}}}
	pooled = &sharedServer{opts: sandbox.Options{ExtraPort: -1, ServerArgs: []string{"--thread-handling=pool-of-threads",
		"--thread-pool-size=2", "--thread-pool-oversubscribe=1", "--thread-pool-stall-limit=60000"}}}
)

func (s *sharedServer) get(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	s.once.Do(func() { s.inst, s.err = sandbox.Start(context.Background(), s.opts) })
	if s.err != nil {
		t.Fatalf("starting sandbox: %v", s.err)
	}
	return s.inst
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*sharedServer{plain, pooled} {
		if s.inst != nil {
			_ = s.inst.Stop()
		}
	}
	os.Exit(code)
}

func openTest(t *testing.T, inst *sandbox.Instance) *sql.DB {
	t.Helper()
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// status reads a global status counter.
func status(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var n string
	var v int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&n, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func schemaExists(t *testing.T, db *sql.DB, schema string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestCanary(t *testing.T) {
	inst := plain.get(t)
	db := openTest(t, inst)
	ins, trunc := status(t, db, "Com_insert"), status(t, db, "Com_truncate")
	res, err := Canary(context.Background(), inst.DSN(""), CanaryOptions{Schema: "canary_t", Repeat: 3, Inserts: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reps) != 3 || res.Statements != 33 || res.Max < res.Median || res.Median <= 0 || res.Avg <= 0 {
		t.Fatalf("result %+v", res)
	}
	if d := status(t, db, "Com_insert") - ins; d != 30 {
		t.Errorf("server counted %d inserts, want 30", d)
	}
	if d := status(t, db, "Com_truncate") - trunc; d != 3 {
		t.Errorf("server counted %d truncates, want 3", d)
	}
	if schemaExists(t, db, "canary_t") {
		t.Error("scratch schema left behind")
	}
}

func TestCanaryCancelledDropsSchema(t *testing.T) {
	inst := plain.get(t)
	db := openTest(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := Canary(ctx, inst.DSN(""), CanaryOptions{Schema: "canary_c", Repeat: 1_000_000})
	if err == nil {
		t.Fatal("a cancelled canary reported success")
	}
	if schemaExists(t, db, "canary_c") {
		t.Error("scratch schema left behind after cancel")
	}
}

func TestConcurrent(t *testing.T) {
	inst := plain.get(t)
	db := openTest(t, inst)
	q := status(t, db, "Com_stmt_execute")
	res, err := Concurrent(context.Background(), inst.DSN(""), ConcurrentOptions{Conns: 4, Count: 50, Rows: 500, Schema: "slap_t"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Statements != 200 || res.Errors != 0 || res.Latency.Count != 200 || res.QPS <= 0 {
		t.Fatalf("result %+v (first error %v)", res, res.FirstError)
	}
	if d := status(t, db, "Com_stmt_execute") - q; d < 200 {
		t.Errorf("server executed %d prepared statements, want >= 200", d)
	}
	if schemaExists(t, db, "slap_t") {
		t.Error("scratch schema left behind")
	}
	// A duration-bounded run of a user script.
	res, err = Concurrent(context.Background(), inst.DSN(""), ConcurrentOptions{Conns: 2, Duration: 300 * time.Millisecond,
		Statements: StatementsFromSQL("SELECT 1; DO 2")})
	if err != nil || res.Statements == 0 || res.Errors != 0 {
		t.Fatalf("script run: %+v, %v", res, err)
	}
}

func TestOLTP(t *testing.T) {
	inst := plain.get(t)
	db := openTest(t, inst)
	ctx := context.Background()
	opts := OLTPOptions{Schema: "oltp_t", Tables: 2, TableSize: 1000, Threads: 2, Events: 40, Seed: 3}
	if err := OLTPPrepare(ctx, inst.DSN(""), opts); err != nil {
		t.Fatal(err)
	}
	exec := status(t, db, "Com_stmt_execute")
	res, err := OLTP(ctx, inst.DSN(""), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Transactions+res.Errors != 40 || res.Latency.Count != int(res.Transactions) || res.TPS <= 0 {
		t.Fatalf("result %+v", res)
	}
	if res.Errors == 0 && (res.Queries != 800 || res.Reads != 560 || res.Writes != 160 || res.Other != 80) {
		t.Errorf("per-transaction mix differs from oltp_read_write: %+v", res)
	}
	if d := status(t, db, "Com_stmt_execute") - exec; d < 18*res.Transactions {
		t.Errorf("server executed %d prepared statements for %d transactions", d, res.Transactions)
	}
	for _, tbl := range []string{"sbtest1", "sbtest2"} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM oltp_t." + tbl).Scan(&n); err != nil || n != 1000 {
			t.Errorf("%s has %d rows after the run (%v), want 1000", tbl, n, err)
		}
	}
	if err := OLTPCleanup(ctx, inst.DSN(""), opts); err != nil || schemaExists(t, db, "oltp_t") {
		t.Errorf("cleanup: %v", err)
	}
}

func TestSysbenchBinary(t *testing.T) {
	inst := plain.get(t)
	if !SysbenchAvailable() {
		t.Skip("sysbench is not installed; the built-in OLTP covers the workload")
	}
	ctx := context.Background()
	opts := OLTPOptions{Schema: "sb_t", Tables: 1, TableSize: 500, Threads: 1, Events: 20}
	if _, err := Sysbench(ctx, inst.DSN(""), opts, "prepare"); err != nil {
		t.Fatal(err)
	}
	res, err := Sysbench(ctx, inst.DSN(""), opts, "run")
	if err != nil {
		t.Fatal(err)
	}
	if res.Transactions != 20 || res.Queries != 400 || res.Driver != "sysbench" || res.Latency.Avg <= 0 {
		t.Fatalf("result %+v", res)
	}
	if _, err := Sysbench(ctx, inst.DSN(""), opts, "cleanup"); err != nil {
		t.Fatal(err)
	}
}

// serverTime reads the statement time the server recorded for a query.
func serverTime(t *testing.T, db *sql.DB, query string) time.Duration {
	t.Helper()
	var ps int64
	err := db.QueryRow("SELECT TIMER_WAIT FROM performance_schema.events_statements_history_long WHERE SQL_TEXT = ? ORDER BY EVENT_ID DESC LIMIT 1", query).Scan(&ps)
	if err != nil {
		t.Fatalf("reading the server's time of %q: %v", query, err)
	}
	return time.Duration(ps / 1000)
}

// TestSlowReader checks the slow-client case's effect, causally: a result larger than
// the socket buffers keeps the server inside the statement while the
// client sleeps; a small one does not.
func TestSlowReader(t *testing.T) {
	inst := plain.get(t)
	db := openTest(t, inst)
	const delay = time.Second
	big, err := SlowReader(context.Background(), inst.DSN(""), SlowReaderOptions{Rows: 100_000, RowBytes: 100, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	if big.Rows != 100_000 || big.Bytes < 100*100_000 || big.Slept < delay || big.Total < delay+big.Drain {
		t.Fatalf("big result: %+v", big)
	}
	if st := serverTime(t, db, big.Query); st < delay {
		t.Errorf("server time of a 10 MB result read after %v: %v; the server should have waited for the client", delay, st)
	}
	small, err := SlowReader(context.Background(), inst.DSN(""), SlowReaderOptions{Rows: 100, RowBytes: 100, Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	if small.Rows != 100 {
		t.Fatalf("small result: %+v", small)
	}
	if st := serverTime(t, db, small.Query); st >= delay {
		t.Errorf("server time of a 100-row result: %v; it fits the socket buffer and must not wait for the client", st)
	}
	t.Logf("big: server %v client %+v; small: server %v", serverTime(t, db, big.Query), big, serverTime(t, db, small.Query))
}

// TestThreadPoolHog checks the thread-pool case's effect by ordering, not timing: with
// the hog's group saturated, a victim in that group is answered only after
// a hog query ended; a victim in the other group is answered while a hog
// query runs, with no hog query ending in between.
func TestThreadPoolHog(t *testing.T) {
	inst := pooled.get(t)
	ctx := context.Background()
	dsn := inst.DSN("")
	v0, err := NewVictim(ctx, dsn, VictimOptions{Group: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer v0.Close()
	v1, err := NewVictim(ctx, dsn, VictimOptions{Group: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	if v0.ID%2 != 0 || v1.ID%2 != 1 {
		t.Fatalf("victims in the wrong groups: ids %d, %d", v0.ID, v1.ID)
	}
	hog, err := ThreadPoolHog(ctx, dsn, HogOptions{Conns: 2, Group: 0, Iterations: 2_000_000, AdminDSN: inst.ExtraDSN("")})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range hog.ConnIDs {
		if id%2 != 0 {
			t.Errorf("hog connection %d outside group 0", id)
		}
	}
	waitRunning(t, inst, hog.ConnIDs)
	r1, err := v1.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := v0.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := hog.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// A hog's end is stamped when its client goroutine runs, which on a
	// loaded machine can come after the victim (served the moment the hog's
	// query freed the group) has its answer: allow that much lateness.
	if n := endsWithin(res.Ends, r0, endStampSlack); n == 0 {
		t.Errorf("victim in the hogged group (%v) was answered without waiting for a hog query to end", r0.Latency())
	}
	if n := endsWithin(res.Ends, r1, 0); n != 0 {
		t.Errorf("victim in the free group (%v) waited while %d hog queries ended", r1.Latency(), n)
	}
	t.Logf("group 1 victim %v, group 0 victim %v, hog queries %d", r1.Latency(), r0.Latency(), res.Queries)
}

// endsWithin counts the hog queries that ended while r ran (stamped up to
// late after its end).
func endsWithin(ends []time.Time, r VictimRun, late time.Duration) int {
	n := 0
	for _, e := range ends {
		if e.After(r.Start) && !e.After(r.End.Add(late)) {
			n++
		}
	}
	return n
}

// endStampSlack bounds how late a hog's client stamps an end that freed
// the victim: far below a hog query (seconds), far above scheduling delays.
const endStampSlack = 250 * time.Millisecond

// waitRunning waits until the server shows a hog query executing, looking
// through the extra port (outside the pool). With oversubscribe=1 the two
// hog connections mostly take turns: the one waiting shows as Sleep.
func waitRunning(t *testing.T, inst *sandbox.Instance, ids []uint64) {
	t.Helper()
	db, err := sql.Open("mysql", inst.ExtraDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 1000 { // up to 10 s: the machine may be busy
		n := 0
		for _, id := range ids {
			var info sql.NullString
			err := db.QueryRow("SELECT INFO FROM information_schema.PROCESSLIST WHERE ID = " + strconv.FormatUint(id, 10)).Scan(&info)
			if err == nil && info.Valid && len(info.String) > 0 {
				n++
			}
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows, _ := db.Query("SELECT ID, COMMAND, COALESCE(STATE,''), COALESCE(INFO,'') FROM information_schema.PROCESSLIST")
	for rows.Next() {
		var id uint64
		var c, st, info string
		rows.Scan(&id, &c, &st, &info)
		t.Logf("%d %s %s %s", id, c, st, info)
	}
	t.Fatal("hog queries never showed up in the processlist")
}
