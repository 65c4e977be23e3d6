package slowlog

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestLiveMariaDB parses the slow log of the MariaDB installed here, as it
// writes it now: the statements sent must come back whole, with their
// connection id, schema and a plausible start time and duration.
func TestLiveMariaDB(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "slow.log")
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{
		"--slow-query-log=1", "--slow-query-log-file=" + logPath, "--long-query-time=0",
		"--log-slow-verbosity=query_plan,explain",
	}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var connID uint64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&connID); err != nil {
		t.Fatal(err)
	}
	sent := []string{
		"CREATE DATABASE live",
		"CREATE TABLE live.t (id INT PRIMARY KEY, s TEXT)",
		"INSERT INTO live.t VALUES (1, 'a\n# Time: not a header\nb;')",
		"SELECT s\n  FROM live.t\n WHERE id = 1",
		"SELECT SLEEP(0.05)",
	}
	begin := time.Now()
	for _, q := range sent {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
	}
	_, _ = conn.ExecContext(ctx, "SELECT * FROM live.missing") // an error is logged too
	checkLiveLog(t, conn, logPath, connID, begin, sent)
}

func checkLiveLog(t *testing.T, conn *sql.Conn, path string, connID uint64, begin time.Time, sent []string) {
	t.Helper()
	if _, err := conn.ExecContext(context.Background(), "FLUSH SLOW LOGS"); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := NewParser(f, Options{})
	found := map[string]bool{}
	for {
		e, err := p.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.ConnID != connID {
			continue
		}
		found[string(e.Query)] = true
		if start := time.UnixMicro(e.StartUS); start.Before(begin.Add(-2*time.Second)) || start.After(time.Now().Add(2*time.Second)) {
			t.Errorf("%q: start %v, statements were sent from %v", e.Query, start, begin)
		}
		if string(e.Query) == "SELECT SLEEP(0.05)" && e.QueryTimeUS < 50_000 {
			t.Errorf("SLEEP(0.05) logged with Query_time %d µs", e.QueryTimeUS)
		}
	}
	for _, q := range append(sent, "SELECT * FROM live.missing") {
		if !found[q] {
			t.Errorf("statement %q not parsed back from the server's slow log (stats %+v)", q, p.Stats())
		}
	}
	if st := p.Stats(); st.Dropped() != 0 || st.BadValues != 0 || st.Restarts == 0 {
		t.Errorf("stats %+v", st)
	}
}
