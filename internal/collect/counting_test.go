package collect

import (
	"context"
	"database/sql/driver"
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
	var counts PoolCounts
	c := &countingConn{fullConn: fakeConn{}, stmts: &counts.stmts}
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
	if got := counts.Statements(); got != 6 {
		t.Errorf("counted %d statements, want 6 (a query, an exec, three executions, the quit)", got)
	}
	if begun := counts.StatementsBegun(); begun != counts.Statements() {
		t.Errorf("%d statements begun, %d answered: none is under way, the skipped one never left", begun, counts.Statements())
	}
}

// blockingConn answers a query once release is closed.
type blockingConn struct {
	fakeConn
	started chan struct{}
	release chan struct{}
}

func (c blockingConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	close(c.started)
	<-c.release
	return nil, nil
}

// TestPoolCountsAStatementUnderWay: a statement is begun before its
// command leaves and answered after; in between, Begun is ahead of Load,
// which is what tells a reader of the server's counters that the server
// may have counted one of ours that the pool has not.
func TestPoolCountsAStatementUnderWay(t *testing.T) {
	var counts PoolCounts
	bc := blockingConn{started: make(chan struct{}), release: make(chan struct{})}
	c := &countingConn{fullConn: bc, stmts: &counts.stmts}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.QueryContext(context.Background(), "SELECT SLEEP(1)", nil)
	}()
	<-bc.started
	if counts.StatementsBegun() != 1 || counts.Statements() != 0 {
		t.Errorf("under way: begun %d, answered %d; want 1 and 0", counts.StatementsBegun(), counts.Statements())
	}
	close(bc.release)
	<-done
	if counts.StatementsBegun() != 1 || counts.Statements() != 1 {
		t.Errorf("answered: begun %d, answered %d; want 1 and 1", counts.StatementsBegun(), counts.Statements())
	}
}

// blockingConnector's Connect returns once release is closed.
type blockingConnector struct {
	driver.Connector
	started chan struct{}
	release chan struct{}
}

func (c blockingConnector) Connect(context.Context) (driver.Conn, error) {
	close(c.started)
	<-c.release
	return fakeConn{}, nil
}

// TestPoolCountsAConnectionUntilItsHandshake: a connection is begun before
// its dial and done once Connect (the handshake, by which the server has
// counted it) returned.
func TestPoolCountsAConnectionUntilItsHandshake(t *testing.T) {
	var counts PoolCounts
	bc := blockingConnector{started: make(chan struct{}), release: make(chan struct{})}
	c := countingConnector{Connector: bc, counts: &counts}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Connect(context.Background())
	}()
	<-bc.started
	if counts.ConnectionsBegun() != 1 || counts.Connections() != 0 {
		t.Errorf("connecting: begun %d, done %d; want 1 and 0", counts.ConnectionsBegun(), counts.Connections())
	}
	close(bc.release)
	<-done
	if counts.ConnectionsBegun() != 1 || counts.Connections() != 1 {
		t.Errorf("connected: begun %d, done %d; want 1 and 1", counts.ConnectionsBegun(), counts.Connections())
	}
}
