package collect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// OpenConfigCounting is OpenConfig whose connections count, in sent, the
// statements they send as the server's Questions counter counts them: a
// query, an execution of a prepared statement (not its prepare or close,
// which MariaDB's Queries counts too), and the COM_QUIT that closes a
// connection (the pool closes an idle one after a minute).
// A monitor compares the server's counters with it to tell the server's
// other clients from itself.
func OpenConfigCounting(ctx context.Context, cfg *mysql.Config, sent *atomic.Int64) (*sql.DB, error) {
	return openConnector(ctx, cfg, func(c driver.Connector) driver.Connector { return countingConnector{c, sent} })
}

// countingConnector counts its connections' statements in sent.
type countingConnector struct {
	driver.Connector
	sent *atomic.Int64
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	full, ok := conn.(fullConn)
	if !ok {
		return conn, nil // a driver without these: counted as nothing, the server's counters then say more
	}
	return &countingConn{fullConn: full, sent: c.sent}, nil
}

// fullConn is what go-sql-driver's connection implements: a wrapper that
// left one out would change how database/sql uses it (without
// QueryerContext, every query would be prepared first).
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

type countingConn struct {
	fullConn
	sent *atomic.Int64
}

func (c *countingConn) Close() error {
	c.sent.Add(1) // COM_QUIT
	return c.fullConn.Close()
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := c.fullConn.QueryContext(ctx, q, args)
	if err != driver.ErrSkip { // skipped: database/sql prepares it instead
		c.sent.Add(1)
	}
	return rows, err
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	res, err := c.fullConn.ExecContext(ctx, q, args)
	if err != driver.ErrSkip {
		c.sent.Add(1)
	}
	return res, err
}

// PrepareContext counts nothing (the server's counters do not count a
// prepare): the statement counts each of its executions.
func (c *countingConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.fullConn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	full, ok := st.(fullStmt)
	if !ok {
		return st, nil
	}
	return &countingStmt{fullStmt: full, sent: c.sent}, nil
}

// fullStmt is what go-sql-driver's prepared statement implements.
type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
	driver.NamedValueChecker
}

type countingStmt struct {
	fullStmt
	sent *atomic.Int64
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.sent.Add(1)
	return s.fullStmt.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.sent.Add(1)
	return s.fullStmt.QueryContext(ctx, args)
}
