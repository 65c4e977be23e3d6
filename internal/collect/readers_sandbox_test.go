package collect

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
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
		var r ProcesslistReader
		procs, err := r.Read(ctx, db)
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

func TestThreadPoolGroupsSandbox(t *testing.T) {
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
