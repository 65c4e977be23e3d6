package collect

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"testing"
)

// fakeConn stands for go-sql-driver's connection: a query with
// arguments is skipped (database/sql then prepares it).
type fakeConn struct{ fullConn }

func (fakeConn) QueryContext(_ context.Context, _ string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) > 0 {
		return nil, driver.ErrSkip
	}
	return nil, nil
}

func (fakeConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return nil, nil
}

func (fakeConn) Close() error { return nil }

func (fakeConn) PrepareContext(context.Context, string) (driver.Stmt, error) { return fakeStmt{}, nil }

type fakeStmt struct{ fullStmt }

func (fakeStmt) ExecContext(context.Context, []driver.NamedValue) (driver.Result, error) {
	return nil, nil
}

func (fakeStmt) QueryContext(context.Context, []driver.NamedValue) (driver.Rows, error) {
	return nil, nil
}

// TestCountingConnCountsAsTheServer: a query, an exec, each execution of
// a prepared statement and the connection's close (COM_QUIT) count once; a
// query skipped to be prepared, and the prepare, do not (the server's
// Questions counter counts neither).
func TestCountingConnCountsAsTheServer(t *testing.T) {
	var sent atomic.Int64
	c := &countingConn{fullConn: fakeConn{}, sent: &sent}
	ctx := context.Background()
	_, _ = c.QueryContext(ctx, "SELECT 1", nil)
	_, _ = c.ExecContext(ctx, "DO 1", nil)
	if _, err := c.QueryContext(ctx, "SELECT ?", []driver.NamedValue{{Ordinal: 1, Value: int64(1)}}); err != driver.ErrSkip {
		t.Fatalf("the skip did not come through: %v", err)
	}
	st, err := c.PrepareContext(ctx, "SELECT ?")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = st.(driver.StmtQueryContext).QueryContext(ctx, nil)
	}
	_ = c.Close()
	if got := sent.Load(); got != 6 {
		t.Errorf("counted %d statements, want 6 (a query, an exec, three executions, the quit)", got)
	}
}
