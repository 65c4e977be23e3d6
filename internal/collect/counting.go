package collect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// OpenConfigCounting is OpenConfig whose pool counts, in counts, what it
// sends as the server's counters count it: its connections (Connections)
// and its statements (Questions): a query, an execution of a prepared
// statement (not its prepare or close, which MariaDB's Queries counts
// too), and the COM_QUIT that closes a connection (the pool closes an idle
// one after a minute). A monitor compares the server's counters with them
// to tell the server's other clients from itself.
func (r *Secrets) OpenConfigCounting(ctx context.Context, cfg *mysql.Config, counts *PoolCounts) (*sql.DB, error) {
	return r.openConnector(ctx, cfg, func(c driver.Connector) driver.Connector { return countingConnector{c, counts} })
}

// PoolCounts counts a pool's statements and connections twice: begun,
// before the command leaves or the dial starts, and done, once the answer
// or the handshake came back. The server counts each in between (a
// statement when it takes the command, a connection when it accepts it),
// so a read of its counters made while another of the pool's statements
// or connections is under way cannot tell whether the server counted that
// one: a monitor whose clock is recalibrated on another goroutine would
// take its own marker statement for someone else's. What is begun and
// done around a read tells the reads that can.
type PoolCounts struct {
	stmts, conns tally
}

// tally counts something begun and done.
type tally struct{ begun, done atomic.Int64 }

// Statements is the statements answered; StatementsBegun those begun:
// the difference is under way.
func (p *PoolCounts) Statements() int64      { return p.stmts.done.Load() }
func (p *PoolCounts) StatementsBegun() int64 { return p.stmts.begun.Load() }

// Connections is the connections opened or failed; ConnectionsBegun those
// begun.
func (p *PoolCounts) Connections() int64      { return p.conns.done.Load() }
func (p *PoolCounts) ConnectionsBegun() int64 { return p.conns.begun.Load() }

// AddStatements counts n statements begun and answered at once (sent some
// other way than through the pool, or in a test).
func (p *PoolCounts) AddStatements(n int64) { p.stmts.begun.Add(n); p.stmts.done.Add(n) }

// countingConnector counts its connections and their statements.
type countingConnector struct {
	driver.Connector
	counts *PoolCounts
}

// Connect counts a connection from before its dial to the end of its
// handshake, by which the server has counted it (an attempt that fails
// counts too: the server counts one whose login it refused).
func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c.counts.conns.begun.Add(1)
	conn, err := c.Connector.Connect(ctx)
	c.counts.conns.done.Add(1)
	if err != nil {
		return nil, err
	}
	full, ok := conn.(fullConn)
	if !ok {
		return conn, nil // a driver without these: counted as nothing, the server's counters then say more
	}
	return &countingConn{fullConn: full, stmts: &c.counts.stmts}, nil
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
	stmts *tally
}

func (c *countingConn) Close() error {
	c.stmts.begun.Add(1) // COM_QUIT
	defer c.stmts.done.Add(1)
	return c.fullConn.Close()
}

func (c *countingConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.stmts.begun.Add(1)
	rows, err := c.fullConn.QueryContext(ctx, q, args)
	c.counted(err)
	return rows, err
}

func (c *countingConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.stmts.begun.Add(1)
	res, err := c.fullConn.ExecContext(ctx, q, args)
	c.counted(err)
	return res, err
}

// counted ends a begun statement: answered, or taken back when the driver
// skipped it, sending nothing (database/sql prepares it instead).
func (c *countingConn) counted(err error) {
	if err == driver.ErrSkip {
		c.stmts.begun.Add(-1)
		return
	}
	c.stmts.done.Add(1)
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
	return &countingStmt{fullStmt: full, stmts: c.stmts}, nil
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
	stmts *tally
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.stmts.begun.Add(1)
	defer s.stmts.done.Add(1)
	return s.fullStmt.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.stmts.begun.Add(1)
	defer s.stmts.done.Add(1)
	return s.fullStmt.QueryContext(ctx, args)
}
