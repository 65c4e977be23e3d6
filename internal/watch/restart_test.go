package watch

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestWatchSurvivesServerRestart: the server restarts under watch; the
// wire decoding goes on, the gap is noted, the clock and cursor start over
// (new timer origin, new thread ids) and statements after the restart are
// joined again.
func TestWatchSurvivesServerRestart(t *testing.T) {
	opts := sandbox.Options{ServerArgs: serverArgs}
	inst := sandbox.ForTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen []event.Statement
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		KeepLiterals: true, OnStatement: func(s *event.Statement) { seen = append(seen, *s) }}, func() error {
		if err := queryOnce(ctx, inst, "SELECT 'before restart'"); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		if err := inst.Restart(ctx, opts); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // the poller notices, backs off, resumes
		return queryOnce(ctx, inst, "SELECT 'after restart'")
	})
	before, after := findSQL(seen, "before restart"), findSQL(seen, "after restart")
	if before == nil || after == nil {
		t.Fatalf("statements missing on the wire: before=%v after=%v", before != nil, after != nil)
	}
	if !before.Joined || !after.Joined {
		t.Errorf("joined before=%v after=%v; notes %v; join %+v", before.Joined, after.Joined, res.Notes, res.Join)
		for _, s := range seen {
			t.Logf("seen %s joined=%v conn=%s id=%d", s.SQL, s.Joined, s.Conn, s.ConnID)
		}
	}
	if res.ServerSide.Reconnects < 1 {
		t.Errorf("no reconnect counted: %+v", res.ServerSide)
	}
	if !anyContains(res.Notes, "restarted") || !anyContains(res.Notes, "lost the server") {
		t.Errorf("the gap and the restart are not in the notes: %v", res.Notes)
	}
}

func queryOnce(ctx context.Context, inst *sandbox.Instance, q string) error {
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	var s string
	return db.QueryRowContext(ctx, q).Scan(&s)
}

func findSQL(stmts []event.Statement, sub string) *event.Statement {
	for i := range stmts {
		if strings.Contains(stmts[i].SQL, sub) {
			return &stmts[i]
		}
	}
	return nil
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
