package plans

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// The package's end-to-end tests share one MariaDB sandbox with statement
// history on (the catcher's source of fast executions) and a private
// tmpdir (SHOW EXPLAIN uses internal temporary tables).
var (
	shared    *sandbox.Instance
	sharedErr error
)

func TestMain(m *testing.M) {
	flag.Parse()
	var tmp string
	if !testing.Short() {
		tmp, sharedErr = os.MkdirTemp("", "gapscope-plans-test-")
		if sharedErr == nil {
			shared, sharedErr = sandbox.Start(context.Background(), sandbox.Options{ServerArgs: []string{
				"--performance-schema=ON",
				"--performance-schema-consumer-events-statements-current=ON",
				"--performance-schema-consumer-events-statements-history=ON",
				"--performance-schema-consumer-events-statements-history-long=ON",
				"--tmpdir=" + tmp,
			}})
		}
	}
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	if sharedErr != nil {
		t.Fatalf("starting the shared sandbox: %v", sharedErr)
	}
	return shared
}

func open(t *testing.T, inst *sandbox.Instance, db string, conns int) *sql.DB {
	t.Helper()
	d, err := inst.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(conns)
	t.Cleanup(func() { d.Close() })
	return d
}

func exec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// runCatcher runs a Catcher in the background until the returned stop is
// called; stop returns how long it ran.
func runCatcher(t *testing.T, c *Catcher) (stop func() time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- c.Run(ctx) }()
	return func() time.Duration {
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("catcher: %v", err)
		}
		return time.Since(start)
	}
}

// planStatements counts, on the server, the plan statements every client
// sent: the statement digests of EXPLAIN, SHOW EXPLAIN and SHOW ANALYZE.
func planStatements(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var n sql.NullInt64
	err := db.QueryRow(`SELECT SUM(COUNT_STAR) FROM performance_schema.events_statements_summary_by_digest
 WHERE DIGEST_TEXT LIKE 'EXPLAIN%' OR DIGEST_TEXT LIKE 'SHOW EXPLAIN%' OR DIGEST_TEXT LIKE 'SHOW ANALYZE%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n.Int64
}

func status(t *testing.T, db *sql.DB, name string) int64 {
	t.Helper()
	var k, v string
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		t.Fatalf("status %s: %v", name, err)
	}
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// writeCounters are the server's per-command counters of writes; a
// statement re-executed by gapscope would show in them.
var writeCounters = []string{"Com_insert", "Com_insert_select", "Com_update", "Com_delete", "Com_replace",
	"Com_replace_select", "Com_call_procedure"}

func writes(t *testing.T, db *sql.DB) map[string]int64 {
	out := map[string]int64{}
	for _, c := range writeCounters {
		out[c] = status(t, db, c)
	}
	return out
}

// TestDMLNeverPlanned runs slow and fast writes, locking reads, SELECT ...
// INTO, CALL and multi-statements, with comments and odd casing, under a
// catcher whose limiter lets everything through, and checks on the server
// that not one plan statement was sent and no write ran twice. A plain
// SELECT at the end proves the catcher was watching.
func TestDMLNeverPlanned(t *testing.T) {
	inst := server(t)
	root := open(t, inst, "", 2)
	exec(t, root, "CREATE DATABASE dmlt",
		"CREATE TABLE dmlt.w (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)",
		"INSERT INTO dmlt.w (v) VALUES (1), (2)",
		"CREATE PROCEDURE dmlt.slowp() BEGIN DO SLEEP(0.4); INSERT INTO dmlt.w (v) VALUES (9); END",
		"CREATE PROCEDURE dmlt.fastp() INSERT INTO dmlt.w (v) VALUES (8)")
	appDSN := inst.DSN("dmlt") + "&multiStatements=true"
	if !containsByte(inst.DSN("dmlt"), '?') {
		appDSN = inst.DSN("dmlt") + "?multiStatements=true"
	}
	app, err := sql.Open("mysql", appDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.SetMaxOpenConns(1)

	c := NewCatcher(open(t, inst, "", 4), Options{Threshold: 100 * time.Millisecond, PollInterval: 10 * time.Millisecond,
		PerDigestEvery: time.Nanosecond, Rate: 1e6, Burst: 1e6})
	sentBefore, writesBefore := planStatements(t, root), writes(t, root)
	stop := runCatcher(t, c)

	slow := []string{ // each runs ~0.4 s: seen in the processlist over the threshold
		"INSERT INTO w (v) SELECT SLEEP(0.4) + 3",
		"/* app */ uPdAtE w SET v = v + 1 WHERE SLEEP(0.2) = 0",
		"# hash\n  DeLeTe FROM w WHERE SLEEP(0.2) = 0 AND v = -1",
		"REPLACE INTO w (id, v) SELECT 1000, SLEEP(0.4)",
		"call slowp()",
		"SELECT * FROM w WHERE SLEEP(0.1) = 0 FOR UPDATE",
		"sElEcT sleep(0.4) INTO @x",
		"select v from w where id = 1 and sleep(0.4) = 0 lock in share mode",
		"UPDATE w SET v = v WHERE SLEEP(0.1) = 0; DELETE FROM w WHERE v = -7",
	}
	fast := []string{ // fast: seen completed in the statement history
		"INSERT INTO w (v) VALUES (5)",
		"insert into w set v = 6",
		"/*+ no hint */ UPDATE w SET v = 5 WHERE id = 1",
		"DELETE FROM w WHERE id = 99999",
		"REPLACE INTO w (id, v) VALUES (7, 7)",
		"CALL fastp()",
		"SELECT v FROM w WHERE id = 1 FOR UPDATE",
		"SELECT v INTO @y FROM w WHERE id = 1",
		"INSERT INTO w (v) VALUES (1); UPDATE w SET v = 2 WHERE id = 2",
	}
	for _, q := range append(slow, fast...) {
		if _, err := app.Exec(q); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
	}
	time.Sleep(200 * time.Millisecond) // one more history poll
	st := c.Stats()
	if st.LivePlans != 0 || st.LiveAnalyzes != 0 || st.Explains != 0 || st.Traces != 0 || len(c.Caught()) != 0 {
		t.Errorf("the catcher planned writes: %+v, caught %+v", st, c.Caught())
	}
	if st.Refused == 0 {
		t.Errorf("the catcher saw none of the writes (stats %+v): the test proves nothing", st)
	}
	if sent := planStatements(t, root) - sentBefore; sent != 0 {
		t.Errorf("the server received %d plan statements during the writes", sent)
	}
	checkWritesRanOnce(t, root, writesBefore)

	// Control: a slow and a fast plain SELECT are planned.
	exec(t, app, "SELECT COUNT(*) FROM w WHERE SLEEP(0.1) = 0", "SELECT v FROM w WHERE id = 2")
	time.Sleep(200 * time.Millisecond)
	stop()
	if st := c.Stats(); st.LivePlans == 0 || st.Explains == 0 {
		t.Errorf("control SELECTs were not planned: %+v", st)
	}
}

// checkWritesRanOnce compares the server's write counters with what the
// test itself ran (slow: 2 inserts/replaces via SELECT, 1 update+1 in
// multi, ...): any extra execution would show.
func checkWritesRanOnce(t *testing.T, db *sql.DB, before map[string]int64) {
	t.Helper()
	want := map[string]int64{"Com_insert": 3 + 2, "Com_insert_select": 1, "Com_update": 4, "Com_delete": 3,
		"Com_replace": 1, "Com_replace_select": 1, "Com_call_procedure": 2}
	// Com_insert counts the two procedure INSERTs too.
	after := writes(t, db)
	for _, c := range writeCounters {
		if got := after[c] - before[c]; got != want[c] {
			t.Errorf("%s went up by %d, the test ran %d", c, got, want[c])
		}
	}
}

func containsByte(s string, b byte) bool {
	for i := range len(s) {
		if s[i] == b {
			return true
		}
	}
	return false
}

// TestRateLimitUnder64Slow runs 64 slow SELECTs at once, 4 per digest over
// 16 digests, and counts on the server the SHOW EXPLAINs that arrive: one
// per digest per PerDigestEvery at most, and no more than the global
// bucket allows over the run.
func TestRateLimitUnder64Slow(t *testing.T) {
	inst := server(t)
	root := open(t, inst, "", 2)
	// SLEEP per row: MariaDB answers SHOW EXPLAIN between rows, so a
	// target must not sit in one long SLEEP.
	exec(t, root, "CREATE DATABASE IF NOT EXISTS ratet", "CREATE TABLE ratet.r (id INT PRIMARY KEY)",
		"INSERT INTO ratet.r SELECT seq FROM ratet.seq_1_to_1000")
	app := open(t, inst, "ratet", 64)
	app.SetMaxIdleConns(64)
	const rate, burst = 2.0, 4
	c := NewCatcher(open(t, inst, "", 4), Options{Threshold: 100 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		PerDigestEvery: 10 * time.Second, Rate: rate, Burst: burst})
	before := status(t, root, "Com_show_explain") + status(t, root, "Com_show_analyze")
	stop := runCatcher(t, c)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			_, err := app.Exec(fmt.Sprintf("SELECT COUNT(*) AS c%d FROM r WHERE SLEEP(0.002) = 0", i%16))
			errs <- err
		})
	}
	wg.Wait()
	elapsed := stop()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	sent := status(t, root, "Com_show_explain") + status(t, root, "Com_show_analyze") - before
	t.Logf("64 slow statements, 16 digests, %s: %d SHOW EXPLAIN on the server, stats %+v", elapsed.Round(time.Millisecond), sent, st)
	if sent != st.LivePlans+st.LiveAnalyzes {
		t.Errorf("the server got %d plan statements, the catcher counted %d", sent, st.LivePlans+st.LiveAnalyzes)
	}
	if limit := int64(burst + rate*elapsed.Seconds()); sent > limit {
		t.Errorf("%d SHOW EXPLAIN in %s, the global bucket allows %d", sent, elapsed, limit)
	}
	if sent < burst {
		t.Errorf("only %d SHOW EXPLAIN: the catcher did not catch the slow statements", sent)
	}
	perDigest := map[string]int{}
	for _, p := range c.Caught() {
		perDigest[p.Digest]++
	}
	for d, n := range perDigest {
		if n > 1 {
			t.Errorf("digest %s planned %d times within 10 s", d, n)
		}
	}
	if st.RateLimited == 0 {
		t.Error("the limiter held nothing back")
	}
}

// TestHealthyOLTPNoFlip runs the OLTP workload (prepared statements) beside
// text-protocol reads, some of them full scans slow enough to cross a low
// threshold, and expects usual plans, live plans, and no PLAN_FLIP.
func TestHealthyOLTPNoFlip(t *testing.T) {
	inst := server(t)
	ctx := context.Background()
	wo := workload.OLTPOptions{Schema: "healthy", Tables: 1, TableSize: 10_000, Threads: 2, Duration: 10 * time.Second, Seed: 7}
	if err := workload.OLTPPrepare(ctx, inst.DSN(""), wo); err != nil {
		t.Fatal(err)
	}
	c := NewCatcher(open(t, inst, "", 4), Options{Threshold: 3 * time.Millisecond, PollInterval: 5 * time.Millisecond,
		PerDigestEvery: 500 * time.Millisecond, Rate: 20, Burst: 20})
	stop := runCatcher(t, c)
	rctx, cancel := context.WithCancel(ctx)
	readerDone := make(chan error, 1)
	go func() { readerDone <- textReader(rctx, open(t, inst, "healthy", 1)) }()
	res, err := workload.OLTP(ctx, inst.DSN(""), wo)
	cancel()
	if rerr := <-readerDone; rerr != nil && !errors.Is(rerr, context.Canceled) {
		t.Fatalf("reader: %v", rerr)
	}
	stop()
	if err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	t.Logf("OLTP %.0f TPS; catcher %+v", res.TPS, st)
	if f := c.Findings(); len(f) != 0 || st.Flips != 0 {
		t.Errorf("PLAN_FLIP on a healthy run: %d flips, %+v", st.Flips, f)
		for _, p := range c.Caught() {
			t.Logf("caught %s %s %s us=%d sig=%s est=%v", p.Role, p.Source, p.DigestText, p.ElapsedUS, p.Signature, p.Plan.Estimates())
		}
	}
	if st.Explains == 0 || st.Compared == 0 {
		t.Errorf("the catcher compared nothing (stats %+v): the test proves nothing", st)
	}
}

// textReader runs sysbench-like reads with literals, and a full scan that
// takes well over the test's 3 ms threshold, until ctx ends. The range
// read is one digest, one plan, fast on 100 rows and, one time in six,
// slow on 1,500: a slow plan the catcher compares with the usual one
// however fast the host (a quiet host ran every point and range read
// under 3 ms, and the catcher then compared nothing).
func textReader(ctx context.Context, db *sql.DB) error {
	for i := 0; ; i++ {
		id := 1 + (i*7919)%8000
		width := 99
		if i%6 == 5 {
			width = 1499
		}
		for _, q := range []string{
			fmt.Sprintf("SELECT c FROM sbtest1 WHERE id = %d", id),
			fmt.Sprintf("SELECT c, CRC32(REPEAT(c, 100)) FROM sbtest1 WHERE id BETWEEN %d AND %d ORDER BY c", id, id+width),
			// The full scan must cross the catcher's 3 ms threshold on an
			// idle host too: a checksum of each row's text repeated makes
			// it ~10x the work of a bare scan, with the same plan.
			"SELECT COUNT(*), SUM(CRC32(REPEAT(c, 20))) FROM sbtest1 WHERE pad <> ''",
		} {
			rows, err := db.QueryContext(ctx, q)
			if err != nil {
				return err
			}
			for rows.Next() {
			}
			rows.Close()
		}
	}
}

// TestTraceReplay plans a join again with optimizer_trace on and reads
// the chosen and rejected access paths; a write is refused unsent.
func TestTraceReplay(t *testing.T) {
	inst := server(t)
	root := open(t, inst, "", 2)
	exec(t, root, "CREATE DATABASE tracet",
		"CREATE TABLE tracet.u (id INT PRIMARY KEY, x INT NOT NULL, y INT NOT NULL, KEY y (y))",
		"CREATE TABLE tracet.t (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, KEY k (k))",
		"INSERT INTO tracet.u SELECT seq, seq, seq % 100 FROM tracet.seq_1_to_1000",
		"INSERT INTO tracet.t (k) SELECT seq % 2000 FROM tracet.seq_1_to_20000",
		"ANALYZE TABLE tracet.t, tracet.u")
	db := open(t, inst, "", 1)
	tr, err := TraceReplay(context.Background(), db, "tracet", "SELECT COUNT(*) FROM t JOIN u ON t.k = u.x WHERE u.y = 3")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.JoinOrder) != 2 || tr.JoinOrder[0] != "u" || len(tr.Tables) != 2 {
		t.Fatalf("trace: %+v", tr)
	}
	for _, tt := range tr.Tables {
		chosen := 0
		for _, p := range tt.Paths {
			if p.Chosen {
				chosen++
			}
		}
		if chosen != 1 || tt.ScanRows <= 0 {
			t.Errorf("table %s: %d chosen paths, scan rows %g: %+v", tt.Table, chosen, tt.ScanRows, tt.Paths)
		}
	}
	var trace string
	if err := db.QueryRow("SELECT @@optimizer_trace").Scan(&trace); err != nil || trace != "enabled=off" {
		t.Errorf("optimizer_trace left %q on the pooled connection (%v)", trace, err)
	}
	before := planStatements(t, root)
	if _, err := TraceReplay(context.Background(), db, "tracet", "DELETE FROM t"); !errors.Is(err, ErrNotExplainable) {
		t.Errorf("TraceReplay(DELETE) = %v, want ErrNotExplainable", err)
	}
	if n := planStatements(t, root) - before; n != 0 {
		t.Errorf("%d plan statements sent for a DELETE", n)
	}
}
