package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// threadPoolVars are the thread-pool case's settings as measured on MariaDB 10.11.
func threadPoolVars() map[string]string {
	return map[string]string{
		"version": "10.11.19-MariaDB", "thread_handling": "pool-of-threads", "thread_pool_size": "2",
		"thread_pool_oversubscribe": "1", "thread_pool_stall_limit": "60000", "thread_pool_max_threads": "65536",
	}
}

// threadPoolWindow reproduces the thread-pool case: two BENCHMARK() statements hold
// group 0 (conn 10 and 12); SELECT 1 on conn 14 (group 0) waits 23.29 s,
// while conn 15 (group 1) is answered at once.
func threadPoolWindow() *Window {
	const a, b, c, d = "127.0.0.1:50010>127.0.0.1:3306", "127.0.0.1:50012>127.0.0.1:3306", "127.0.0.1:50014>127.0.0.1:3306", "127.0.0.1:50015>127.0.0.1:3306"
	stmts := []event.Statement{
		stmt(a, 10, "SELECT BENCHMARK(?, MD5(?))", 0, 20, 30, 30_000_000, 0, 40),
		stmt(b, 12, "SELECT BENCHMARK(?, MD5(?))", 1_000, 20, 40, 29_000_000, 0, 40),
		stmt(c, 14, "SELECT ?", 2_000_000, 10, 23_289_830, 120, 0, 40),
		stmt(c, 14, "SET NAMES utf8mb4", 25_400_000, 10, 3_700_000, 60, 0, 30),
		stmt(d, 15, "SELECT ?", 2_000_000, 10, 25, 40, 0, 30),
		stmt(d, 15, "SELECT ?", 3_000_000, 10, 30, 2_700, 0, 30),
	}
	return &Window{Statements: stmts, Vars: threadPoolVars(), Flavor: "mariadb", Cores: 2,
		PoolGroups: []PoolGroup{{GroupID: 0, Connections: 3, Threads: 2, ActiveThreads: 2}, {GroupID: 1, Connections: 1, Threads: 1}}}
}

func TestPoolQueueNamesGroupVictimsAndSettings(t *testing.T) {
	fs := Run(threadPoolWindow(), StatementRules()...)
	f := only(t, fs, CodePoolQueue, 1)[0]
	checkFinding(t, f)
	if f.Severity != event.SeverityCritical {
		t.Errorf("severity %s, want critical for a 23 s wait", f.Severity)
	}
	ev := f.Evidence
	if got := ev["saturated_groups"].([]int); !slices.Equal(got, []int{0}) {
		t.Errorf("saturated groups %v, want [0]", got)
	}
	if ev["queued_statements"] != 2 || ev["max_queue_us"] != int64(23_289_830) || ev["queue_us"] != int64(23_289_830+3_700_000) {
		t.Errorf("queue numbers wrong: %v %v %v", ev["queued_statements"], ev["max_queue_us"], ev["queue_us"])
	}
	victims := ev["victims"].([]connTally)
	if len(victims) != 1 || victims[0].ConnID != 14 || victims[0].Affected != 2 || victims[0].Statements != 2 {
		t.Errorf("victims %+v, want conn 14 with 2 of 2 statements queued (always slow)", victims)
	}
	ex := ev["examples"].([]Example)
	if ex[0].QueueUS != 23_289_830 || ex[0].SQL != "SELECT ?" || ex[0].ConnID != 14 {
		t.Errorf("first example %+v, want the 23.29 s SELECT ?", ex[0])
	}
	settings := ev["settings"].(map[string]string)
	for k, v := range map[string]string{"thread_pool_size": "2", "thread_pool_oversubscribe": "1", "thread_pool_stall_limit": "60000"} {
		if settings[k] != v {
			t.Errorf("settings[%s]=%q, want %q", k, settings[k], v)
		}
	}
	if imp := ev["implication"].(string); !strings.Contains(imp, "= 4 active statements in all, 2 per group") {
		t.Errorf("implication %q", imp)
	}
	if !strings.Contains(f.Fix, "thread_pool_stall_limit=500") || !strings.Contains(f.Fix, "thread_pool_oversubscribe=3") {
		t.Errorf("fix %q lacks the settings", f.Fix)
	}
	if !strings.Contains(f.Summary, "pool group(s) 0 of 2") {
		t.Errorf("summary %q does not name group 0", f.Summary)
	}
	if ev["server_groups"] == nil {
		t.Error("server pool-group snapshot missing from evidence")
	}
}

func TestPoolQueueUsesRecordedGroup(t *testing.T) {
	w := threadPoolWindow()
	w.Vars = nil // no settings: the group must come from the join
	for i := range w.Statements {
		g := int(w.Statements[i].ConnID%2) + 6
		w.Statements[i].PoolGroup = &g
	}
	f := only(t, Run(w, StatementRules()...), CodePoolQueue, 1)[0]
	if got := f.Evidence["saturated_groups"].([]int); !slices.Equal(got, []int{6}) {
		t.Errorf("saturated groups %v, want [6] as recorded", got)
	}
	if !strings.Contains(f.Fix, "no thread pool is configured") {
		t.Errorf("fix %q should say no pool is known", f.Fix)
	}
}

func TestPoolQueueMySQLEnterpriseSettings(t *testing.T) {
	w := threadPoolWindow()
	w.Flavor = "mysql"
	w.Vars = map[string]string{"thread_pool_size": "2", "thread_pool_stall_limit": "600", "thread_pool_max_active_query_threads": "1"}
	for i := range w.Statements {
		g := int(w.Statements[i].ConnID % 2)
		w.Statements[i].PoolGroup = &g
	}
	f := only(t, Run(w, StatementRules()...), CodePoolQueue, 1)[0]
	if imp := f.Evidence["implication"].(string); !strings.Contains(imp, "thread_pool_stall_limit=6000 ms") || !strings.Contains(imp, "2 in all") {
		t.Errorf("implication %q: stall limit counts 10 ms units, cap = size x max_active", imp)
	}
	if !strings.Contains(f.Fix, "thread_pool_max_active_query_threads") {
		t.Errorf("fix %q should name the Enterprise variables", f.Fix)
	}
}

func TestPoolQueueSilentOnShortQueues(t *testing.T) {
	w := threadPoolWindow()
	for i := range w.Statements {
		w.Statements[i].ClientUS -= w.Statements[i].QueueUS - 200
		w.Statements[i].QueueUS = 200
	}
	only(t, Run(w, StatementRules()...), CodePoolQueue, 0)
}

// slowClientWindow reproduces the slow-client case: a 100k-row result (8.4 MiB) whose
// client sleeps 3 s before reading, and a 100-row result with the same sleep
// that shows zero windows but no stall.
func slowClientWindow() *Window {
	const big, small = "10.1.1.1:41000>10.1.1.2:3306", "10.1.1.1:41001>10.1.1.2:3306"
	large := stmt(big, 31, "SELECT * FROM t LIMIT ?", 0, 15, 60, 4_800, 3_002_000, 1_200)
	large.Rows, large.RespBytes, large.ZeroWindowUS = 100_000, 8_800_000, 3_000_500
	tiny := stmt(small, 32, "SELECT * FROM t LIMIT ?", 10_000, 15, 50, 700, 0, 3_000_100)
	tiny.Rows, tiny.RespBytes, tiny.ZeroWindowUS = 100, 9_000, 2_999_000
	return &Window{Statements: []event.Statement{large, tiny}, Vars: map[string]string{"net_write_timeout": "60"}}
}

func TestClientBackpressureReportsStallBytesAndOverstatement(t *testing.T) {
	f := only(t, Run(slowClientWindow(), StatementRules()...), CodeClientBackpressure, 1)[0]
	checkFinding(t, f)
	ev := f.Evidence
	if ev["send_stall_us"] != int64(3_002_000) || ev["resp_bytes"] != int64(8_800_000) || ev["overstated_us"] != int64(3_002_000) {
		t.Errorf("stall evidence wrong: %v", ev)
	}
	if s := ev["overstated_share"].(float64); s < 0.99 {
		t.Errorf("overstated share %v, want ≥ 0.99", s)
	}
	conns := ev["connections"].([]connTally)
	if len(conns) != 1 || conns[0].ConnID != 31 || conns[0].RespBytes != 8_800_000 {
		t.Errorf("connections %+v: want only conn 31 (zero windows alone do not inflate server time)", conns)
	}
	if f.Severity != event.SeverityCritical || !strings.Contains(f.Summary, "8.4 MiB") || !strings.Contains(f.Summary, "3.00 s") {
		t.Errorf("summary/severity: %s %q", f.Severity, f.Summary)
	}
	if !strings.Contains(f.Fix, "read results promptly") || ev["net_write_timeout"] != "60" {
		t.Errorf("fix %q / net_write_timeout %v", f.Fix, ev["net_write_timeout"])
	}
}

// The server kernel's receive-window-limited time of the stalled
// connection's socket is added as evidence; other sockets' is not.
func TestClientBackpressureCitesKernelRwndLimited(t *testing.T) {
	w := slowClientWindow()
	if ev := only(t, Run(w, StatementRules()...), CodeClientBackpressure, 1)[0].Evidence; ev["kernel_rwnd_limited_us"] != nil {
		t.Errorf("kernel evidence without a kernel reading: %v", ev["kernel_rwnd_limited_us"])
	}
	w.RwndLimitedUS = map[string]int64{"10.1.1.1:41000": 2_996_000, "10.1.1.1:41001": 2_990_000, "10.1.1.1:9": 5}
	f := only(t, Run(w, StatementRules()...), CodeClientBackpressure, 1)[0]
	if got := f.Evidence["kernel_rwnd_limited_us"]; got != int64(2_996_000) {
		t.Errorf("kernel_rwnd_limited_us = %v, want the stalled connection's 2996000", got)
	}
	if !strings.Contains(f.Summary, "receive-window limited for 3.00 s (TCP_INFO)") {
		t.Errorf("summary does not cite the kernel: %q", f.Summary)
	}
}

func TestClientBackpressureSilentOnZeroWindowWithoutStall(t *testing.T) {
	w := slowClientWindow()
	w.Statements = w.Statements[1:]
	only(t, Run(w, StatementRules()...), CodeClientBackpressure, 0)
}

func TestServerExecRanksDigests(t *testing.T) {
	w := &Window{Statements: healthy()}
	w.Statements = append(w.Statements,
		stmt("c1", 1, "SELECT * FROM orders WHERE note LIKE ?", 0, 20, 50, 4_000_000, 0, 300),
		stmt("c2", 2, "SELECT * FROM orders WHERE note LIKE ?", 10, 20, 50, 3_000_000, 0, 300),
		stmt("c3", 3, "SELECT COUNT(*) FROM items", 20, 20, 50, 900_000, 0, 300),
	)
	f := only(t, Run(w, StatementRules()...), CodeServerExec, 1)[0]
	checkFinding(t, f)
	d := f.Evidence["digests"].([]digestTally)
	if len(d) != 2 || d[0].DigestText != "SELECT * FROM orders WHERE note LIKE ?" || d[0].Calls != 2 || d[0].TimeUS != 7_000_000 || d[0].MaxUS != 4_000_000 {
		t.Errorf("digests %+v", d)
	}
	if f.Evidence["slow_statements"] != 3 {
		t.Errorf("slow statements %v, want 3 (healthy ones are fast)", f.Evidence["slow_statements"])
	}
	only(t, Run(w, StatementRules()...), CodeNetwork, 0)
}

func TestServerExecSilentWhenQueueDominates(t *testing.T) {
	w := threadPoolWindow()
	w.Statements = w.Statements[2:] // drop the BENCHMARKs: what is slow is queueing
	only(t, Run(w, StatementRules()...), CodeServerExec, 0)
}

func TestNetworkDelivery(t *testing.T) {
	s := stmt("c9", 9, "SELECT payload FROM blobs WHERE id=?", 0, 30, 20, 3_000, 0, 900_000)
	s.RespBytes, s.Retransmits = 12_000_000, 14
	w := &Window{Statements: append(healthy(), s)}
	f := only(t, Run(w, StatementRules()...), CodeNetwork, 1)[0]
	checkFinding(t, f)
	if f.Evidence["dominant"] != "delivery" || f.Evidence["delivery_us"] != int64(900_000) || f.Evidence["retransmits"] != int64(14) {
		t.Errorf("evidence %v", f.Evidence)
	}
	if !strings.Contains(f.Fix, "14 retransmission(s)") {
		t.Errorf("fix %q should point at the retransmissions", f.Fix)
	}
}

func TestNetworkRequest(t *testing.T) {
	s := stmt("c9", 9, "INSERT INTO t VALUES (...)", 0, 700_000, 20, 30_000, 0, 50)
	s.ReqBytes = 30_000_000
	f := only(t, Run(&Window{Statements: []event.Statement{s}}, StatementRules()...), CodeNetwork, 1)[0]
	if f.Evidence["dominant"] != "request" || !strings.Contains(f.Fix, "smaller requests") {
		t.Errorf("dominant %v fix %q", f.Evidence["dominant"], f.Fix)
	}
}

func TestNetworkSilentWhenExecDominates(t *testing.T) {
	w := &Window{Statements: []event.Statement{stmt("c1", 1, "SELECT SLEEP(?)", 0, 20, 10, 2_000_000, 0, 50)}}
	only(t, Run(w, StatementRules()...), CodeNetwork, 0)
}

func TestUnjoinedStatementsAreNotDiagnosed(t *testing.T) {
	w := threadPoolWindow()
	for i := range w.Statements {
		w.Statements[i].Joined = false
	}
	if fs := Run(w, StatementRules()...); len(fs) != 0 {
		t.Errorf("unjoined statements carry no split, want no finding: %s", dump(fs))
	}
}

// Without a thread pool, a few requests that waited for a CPU on a busy host
// are not a pool problem (measured under sysbench on 2 loaded cores).
func TestPoolQueueSilentWithoutPool(t *testing.T) {
	w := threadPoolWindow()
	w.Vars["thread_handling"] = "one-thread-per-connection"
	for i := range w.Statements {
		w.Statements[i].PoolGroup = nil
	}
	only(t, Run(w, StatementRules()...), CodePoolQueue, 0)
}

// A pool whose queued requests hold a tiny share of client time, none near
// a second, stays silent.
func TestPoolQueueSilentOnTinyShare(t *testing.T) {
	var stmts []event.Statement
	for range 10 {
		stmts = append(stmts, healthy()...) // 2,000 statements, 1.4 s of client time
	}
	w := &Window{Statements: stmts, Vars: map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": "2"}}
	w.Statements[0].QueueUS += 20_000
	w.Statements[0].ClientUS += 20_000
	only(t, Run(w, StatementRules()...), CodePoolQueue, 0)
}

// A few COMMITs over 100 ms among thousands of fast statements are a healthy
// load's outliers (sysbench on 2 loaded cores), not a SERVER_EXEC finding;
// one statement of a second or more is.
func TestServerExecSilentOnRareOutliers(t *testing.T) {
	var stmts []event.Statement
	for range 5 {
		stmts = append(stmts, healthy()...) // 1,000 statements
	}
	for i := range 5 {
		stmts = append(stmts, stmt("c1", 1, "COMMIT", int64(i)*1000, 10, 20, 300_000, 0, 40))
	}
	only(t, Run(&Window{Statements: stmts}, StatementRules()...), CodeServerExec, 0)
	stmts = append(stmts, stmt("c2", 2, "SELECT * FROM big", 0, 10, 20, 2_000_000, 0, 40))
	only(t, Run(&Window{Statements: stmts}, StatementRules()...), CodeServerExec, 1)
}
