package collect

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

func TestThreadsAndProcesslistSandbox(t *testing.T) {
	db := monitor(t)
	conn, id := app(t)
	ctx := context.Background()
	var tid uint64
	if err := conn.QueryRowContext(ctx, "SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()").Scan(&tid); err != nil {
		t.Fatal(err)
	}
	threads, err := Threads(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if threads[tid] != id {
		t.Errorf("Threads()[%d] = %d, want conn %d", tid, threads[tid], id)
	}

	done := make(chan error, 1)
	go func() { _, err := conn.ExecContext(ctx, "DO SLEEP(1)"); done <- err }()
	var got *Process
	for i := 0; i < 100 && got == nil; i++ {
		time.Sleep(10 * time.Millisecond)
		procs, err := Processlist(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if IsOwnSQL(p.Info) {
				t.Errorf("own query in processlist: %q", p.Info)
			}
			if p.ID == id && strings.Contains(p.Info, "SLEEP") && p.TimeMS > 0 {
				got = &p
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("running DO SLEEP(1) with time_ms > 0 not in processlist")
	}
	if got.Command != "Query" || !strings.HasPrefix(got.Host, "127.0.0.1:") || got.User != "root" {
		t.Errorf("process = %+v", got)
	}
}

func TestThreadPoolReadersSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	info, err := DetectServer(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ThreadPoolGroups(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != info.ThreadPoolSize {
		t.Errorf("%d groups, thread_pool_size %d", len(groups), info.ThreadPoolSize)
	}
	conns := 0
	for _, g := range groups {
		conns += g.Connections
	}
	if conns == 0 {
		t.Errorf("no connections in any group: %+v", groups)
	}
	stats, err := ThreadPoolStats(ctx, db)
	if err != nil || len(stats) != len(groups) {
		t.Errorf("stats: %d rows, %v", len(stats), err)
	}
	waits, err := ThreadPoolWaits(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := waits["NET"]; !ok {
		t.Errorf("THREAD_POOL_WAITS lacks NET: %v", waits)
	}
	if _, err := ThreadPoolQueues(ctx, db); err != nil {
		t.Fatal(err)
	}
}

func TestStagesAndWaitsSandbox(t *testing.T) {
	clock := calibrate(t) // also switches waits to NANOSECOND
	db := monitor(t)
	ctx := context.Background()
	conn, id := app(t)
	stmts := NewStatementCursor("events_statements_history_long")
	stages := NewStageCursor("events_stages_history_long")
	waits := NewWaitCursor("events_waits_history_long")
	for _, p := range []func() error{
		func() error { return stmts.Prime(ctx, db) },
		func() error { _, _, err := stages.Poll(ctx, db, clock); return err },
		func() error { _, _, err := waits.Poll(ctx, db, clock); return err },
	} {
		if err := p(); err != nil {
			t.Fatal(err)
		}
	}
	execAll(t, conn, "SELECT * FROM mysql.user")
	st := pollFor(t, stmts, clock, id, 1)[0]
	// MariaDB records some stages of a statement (Sending data, cleanup)
	// after the statement's own row: poll until they are there.
	var stageRows []ServerStage
	for i := 0; i < 200 && !hasStage(stageRows, st, "stage/sql/Sending data"); i++ {
		rows, _, err := stages.Poll(ctx, db, clock)
		if err != nil {
			t.Fatal(err)
		}
		stageRows = append(stageRows, rows...)
		time.Sleep(5 * time.Millisecond)
	}
	var names []string
	for _, s := range stageRows {
		if s.ThreadID == st.ThreadID && s.NestingEventID == st.EventID {
			names = append(names, s.EventName)
			if s.StartUS < st.StartUS-clock.ErrorUS || s.StartUS > st.EndUS+1000 {
				t.Errorf("stage %s at %d outside its statement [%d, %d]", s.EventName, s.StartUS, st.StartUS, st.EndUS)
			}
		}
	}
	if !strings.Contains(strings.Join(names, ","), "stage/sql/Sending data") {
		t.Errorf("stages of the statement: %v, want Sending data among them", names)
	}
	waitRows, _, err := waits.Poll(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	sockets := 0
	for _, w := range waitRows {
		if w.ThreadID == st.ThreadID && w.NestingEventID == st.EventID && strings.HasPrefix(w.EventName, "wait/io/socket/") {
			sockets++
			// With the NANOSECOND wait timer, waits share the statement
			// clock: a wait of the statement falls inside it.
			if w.StartUS < st.StartUS-1 || w.EndUS > st.EndUS+1 {
				t.Errorf("socket wait [%d, %d] outside its statement [%d, %d]", w.StartUS, w.EndUS, st.StartUS, st.EndUS)
			}
		}
	}
	if sockets == 0 {
		t.Error("no socket wait nested in the statement")
	}
}

func TestDigestsAndInnoDBStatsSandbox(t *testing.T) {
	db := monitor(t)
	ctx := context.Background()
	conn, _ := app(t)
	execAll(t, conn, "CREATE DATABASE IF NOT EXISTS shop", "CREATE TABLE IF NOT EXISTS shop.items (id INT PRIMARY KEY, k INT, KEY k (k))",
		"INSERT IGNORE INTO shop.items VALUES (1, 1), (2, 2), (3, 3)", "ANALYZE TABLE shop.items",
		"SELECT * FROM shop.items WHERE id = 1", "SELECT * FROM shop.items WHERE id = 2")
	ds, err := Digests(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var hit *Digest
	for i, d := range ds {
		if isOwnDigest(d.DigestText) {
			t.Errorf("own digest returned: %q", d.DigestText)
		}
		if strings.Contains(strings.ToLower(d.DigestText), "`shop` . `items` where id = ?") {
			hit = &ds[i]
		}
	}
	if hit == nil || hit.CountStar < 2 || hit.SumTimerWait == 0 || hit.Digest == "" {
		t.Fatalf("digest of the point select = %+v", hit)
	}
	tables, err := InnoDBTableStats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ts := range tables {
		if ts.Database == "shop" && ts.Table == "items" && ts.NRows == 3 {
			found = true
		}
	}
	if !found {
		t.Errorf("shop.items with n_rows 3 not in innodb_table_stats: %+v", tables)
	}
	idx, err := InnoDBIndexStats(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	found = false
	for _, s := range idx {
		found = found || (s.Table == "items" && s.Index == "k" && s.StatName == "n_diff_pfx01" && s.StatValue == 3)
	}
	if !found {
		t.Error("index k's n_diff_pfx01 = 3 not in innodb_index_stats")
	}
}

func TestRegistrySandbox(t *testing.T) {
	db := monitor(t)
	info, err := DetectServer(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	samples, stats := NewRegistry().Collect(context.Background(), db, info)
	if len(stats) != len(DefaultCollectors()) {
		t.Fatalf("%d stats for %d collectors", len(stats), len(DefaultCollectors()))
	}
	for _, st := range stats {
		if !st.OK || st.Skipped {
			t.Errorf("collector %s: %+v", st.Name, st)
		}
	}
	byName := map[string]event.Sample{}
	for _, s := range samples {
		if s.TimeUS == 0 || s.Source == "" {
			t.Fatalf("sample without time or source: %+v", s)
		}
		if s.Source == "global_status" {
			byName[s.Name] = s
		}
	}
	if byName["Threads_connected"].Value < 1 || byName["Questions"].Value < 1 {
		t.Errorf("status samples: Threads_connected %v, Questions %v", byName["Threads_connected"], byName["Questions"])
	}
	// Without a thread pool the pool collectors are skipped, not failed.
	_, stats = NewRegistry(PoolGroupsCollector{}).Collect(context.Background(), db, ServerInfo{})
	if !stats[0].Skipped || stats[0].OK {
		t.Errorf("unsupported collector: %+v", stats[0])
	}
}

func TestRegistryReportsFailure(t *testing.T) {
	db := monitor(t)
	// A user without PROCESS cannot read THREAD_POOL_* tables... simpler
	// and certain: a closed pool fails every query.
	closed, err := sql.Open("mysql", server(t).DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	info, _ := DetectServer(context.Background(), db)
	_, stats := NewRegistry(StatusCollector{}).Collect(context.Background(), closed, info)
	if stats[0].OK || stats[0].Error == "" {
		t.Errorf("failed collector reported %+v", stats[0])
	}
}

func mustConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func hasStage(rows []ServerStage, st ServerStatement, name string) bool {
	for _, s := range rows {
		if s.ThreadID == st.ThreadID && s.NestingEventID == st.EventID && s.EventName == name {
			return true
		}
	}
	return false
}
