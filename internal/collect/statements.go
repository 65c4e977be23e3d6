package collect

import (
	"context"
	"time"

	"github.com/gapscope/gapscope/internal/sqltext"
)

// statementFields lists the statement history columns gapscope reads.
// Optional ones are absent on some servers: NESTING_EVENT_LEVEL before MySQL
// 5.7 / in old MariaDB, CPU_TIME before MySQL 8.0.28 and in MariaDB.
var statementFields = []field[ServerStatement]{
	{name: "THREAD_ID", set: func(r *ServerStatement, v []byte) { r.ThreadID = pU64(v) }},
	{name: "EVENT_ID", set: func(r *ServerStatement, v []byte) { r.EventID = pU64(v) }},
	{name: "END_EVENT_ID", optional: true, set: func(r *ServerStatement, v []byte) { r.EndEventID = pU64(v) }},
	{name: "EVENT_NAME", setStr: func(r *ServerStatement, s string) { r.EventName = s }},
	{name: "TIMER_START", set: func(r *ServerStatement, v []byte) { r.TimerStart = pU64(v) }},
	{name: "TIMER_END", set: func(r *ServerStatement, v []byte) { r.TimerEnd = pU64(v) }},
	{name: "TIMER_WAIT", set: func(r *ServerStatement, v []byte) { r.TimerWait = pU64(v) }},
	{name: "LOCK_TIME", optional: true, set: func(r *ServerStatement, v []byte) { r.LockTimePS = pU64(v) }},
	{name: "SQL_TEXT", set: func(r *ServerStatement, v []byte) { r.SQLText = string(v) }},
	{name: "DIGEST", optional: true, setStr: func(r *ServerStatement, s string) { r.Digest = s }},
	{name: "DIGEST_TEXT", optional: true, setStr: func(r *ServerStatement, s string) { r.DigestText = s }},
	{name: "CURRENT_SCHEMA", optional: true, setStr: func(r *ServerStatement, s string) { r.Schema = s }},
	{name: "MYSQL_ERRNO", optional: true, set: func(r *ServerStatement, v []byte) { r.MySQLErrno = int(pI64(v)) }},
	{name: "RETURNED_SQLSTATE", optional: true, setStr: func(r *ServerStatement, s string) { r.SQLState = s }},
	{name: "MESSAGE_TEXT", optional: true, set: func(r *ServerStatement, v []byte) { r.MessageText = string(v) }},
	{name: "ERRORS", optional: true, set: func(r *ServerStatement, v []byte) { r.Errors = pI64(v) }},
	{name: "WARNINGS", optional: true, set: func(r *ServerStatement, v []byte) { r.Warnings = pI64(v) }},
	{name: "ROWS_AFFECTED", optional: true, set: func(r *ServerStatement, v []byte) { r.RowsAffected = pI64(v) }},
	{name: "ROWS_SENT", optional: true, set: func(r *ServerStatement, v []byte) { r.RowsSent = pI64(v) }},
	{name: "ROWS_EXAMINED", optional: true, set: func(r *ServerStatement, v []byte) { r.RowsExamined = pI64(v) }},
	{name: "CREATED_TMP_DISK_TABLES", optional: true, set: func(r *ServerStatement, v []byte) { r.CreatedTmpDiskTables = pI64(v) }},
	{name: "CREATED_TMP_TABLES", optional: true, set: func(r *ServerStatement, v []byte) { r.CreatedTmpTables = pI64(v) }},
	{name: "SELECT_FULL_JOIN", optional: true, set: func(r *ServerStatement, v []byte) { r.SelectFullJoin = pI64(v) }},
	{name: "SELECT_SCAN", optional: true, set: func(r *ServerStatement, v []byte) { r.SelectScan = pI64(v) }},
	{name: "SORT_ROWS", optional: true, set: func(r *ServerStatement, v []byte) { r.SortRows = pI64(v) }},
	{name: "NO_INDEX_USED", optional: true, set: func(r *ServerStatement, v []byte) { r.NoIndexUsed = pBool(v) }},
	{name: "NO_GOOD_INDEX_USED", optional: true, set: func(r *ServerStatement, v []byte) { r.NoGoodIndexUsed = pBool(v) }},
	{name: "NESTING_EVENT_ID", optional: true, set: func(r *ServerStatement, v []byte) { r.NestingEventID = pU64(v) }},
	{name: "NESTING_EVENT_TYPE", optional: true, setStr: func(r *ServerStatement, s string) { r.NestingType = s }},
	{name: "NESTING_EVENT_LEVEL", optional: true, set: func(r *ServerStatement, v []byte) { r.NestingLevel = int(pI64(v)) }},
	{name: "CPU_TIME", optional: true, set: func(r *ServerStatement, v []byte) { r.CPUTimePS = pU64(v) }},
}

// joinFields are the columns the wire join and the server-only view use
// (rows examined and lock time: the server-only profile's columns), the
// statement text cut to its start (the join only compares leading
// keywords). A whole-table poll of a 100k-row ring reading these takes
// about half as long as one reading every column (BenchmarkStatementCursorSandbox,
// whole vs whole-join).
var joinFields = func() []field[ServerStatement] {
	keep := map[string]int{"THREAD_ID": 0, "EVENT_ID": 0, "END_EVENT_ID": 0, "EVENT_NAME": 0,
		"TIMER_START": 0, "TIMER_END": 0, "TIMER_WAIT": 0, "SQL_TEXT": joinTextPrefix, "DIGEST": 0,
		"DIGEST_TEXT": 0, "CURRENT_SCHEMA": 0, "MYSQL_ERRNO": 0, "ROWS_SENT": 0,
		"ROWS_EXAMINED": 0, "LOCK_TIME": 0,
		"NESTING_EVENT_ID": 0, "NESTING_EVENT_TYPE": 0, "NESTING_EVENT_LEVEL": 0}
	var out []field[ServerStatement]
	for _, f := range statementFields {
		if prefix, ok := keep[f.name]; ok {
			f.prefix = prefix
			out = append(out, f)
		}
	}
	return out
}()

// joinTextPrefix is how much statement text a join cursor reads: enough
// to pass a leading comment and reach the first keyword.
const joinTextPrefix = 128

// StatementCursor reads events_statements_history_long or
// events_statements_history incrementally: each Poll returns only statements
// that completed since the previous Poll, never one twice, with gapscope's
// own statements (and every statement of a connection gapscope used)
// dropped, and counts statements the ring buffer lost before they were read.
// Not safe for concurrent use.
type StatementCursor struct {
	table string
	r     *historyReader[ServerStatement]
	err   error
	own   map[uint64]bool // threads that ran a statement of ours
	// newest is the newest thread LearnThreads read and its connection.
	newest [2]uint64
	conns  map[uint64]uint64
	// Lost is the running total of statements lost to ring-buffer wrap.
	Lost int64
	// maxSQLText is performance_schema_max_sql_text_length, once read
	// (completeTexts).
	maxSQLText int
}

// NewStatementCursor returns a cursor over table, which must be
// "events_statements_history_long" or "events_statements_history". After
// its first read it asks the server only for rows that ended after the
// last ones it returned (minus a slack for rows that become visible late),
// not for the whole table.
func NewStatementCursor(table string) *StatementCursor {
	return newStatementCursor(table, true)
}

// NewJoinCursor is NewStatementCursor reading only what the wire join
// needs (joinFields): no statistics columns, SQLText cut to its start.
func NewJoinCursor(table string) *StatementCursor {
	c := newStatementCursor(table, true)
	if c.r != nil {
		c.r.want = joinFields
	}
	return c
}

// newStatementCursor returns a cursor that reads incrementally or, for
// comparison in tests and benchmarks, the whole table on every poll.
func newStatementCursor(table string, incremental bool) *StatementCursor {
	c := &StatementCursor{table: table, own: map[uint64]bool{}, conns: map[uint64]uint64{}}
	c.r, c.err = newHistoryReader(table, "statements", statementFields,
		func(s *ServerStatement) eventKey { return eventKey{s.ThreadID, s.EventID, s.EndEventID, s.TimerEnd} },
		func(s *ServerStatement, id uint64, socket bool) { s.ConnID, s.Socket = id, socket })
	if c.err == nil {
		c.r.incremental, c.r.minSlack = incremental, defaultMinSlack
	}
	return c
}

// ExceptConns leaves the statements of these connections out of the next
// polls (nil or empty: none left out). A sampled capture follows only some
// connections; asking the server not to send the others' rows spares it
// sending, and us parsing, rows nothing can join. It names the connections
// to skip rather than those to keep so that a connection the caller has
// not classified yet (just opened) is read, not lost.
func (c *StatementCursor) ExceptConns(ids []uint64) {
	if c.r == nil || c.r.setConn == nil {
		return
	}
	c.readAgain(ids)
}

// ExceptBelow makes ExceptConns leave out only the rows of those
// connections that took less than d on the server: a slow statement's row
// is read whichever connection ran it (0: every row of theirs left out).
func (c *StatementCursor) ExceptBelow(d time.Duration) {
	if c.r != nil {
		c.r.exceptBelowPS = uint64(d.Nanoseconds()) * 1000
	}
}

// readAgain notes the connections whose statements reads are to return
// again (left out before, not in ids): what they ran while left out was
// not read on purpose, so the gap before their next row is not ring loss.
func (c *StatementCursor) readAgain(ids []uint64) {
	next := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		next[id] = true
	}
	if c.r.ring != nil {
		for t, conn := range c.conns {
			if c.r.except[conn] && !next[conn] {
				c.r.ring.unread(t)
			}
		}
	}
	c.r.except = next
}

// Stats returns what the cursor has read: rows the server sent and rows
// new, the incremental window's slack and the lateness it observed.
func (c *StatementCursor) Stats() CursorStats {
	if c.r == nil {
		return CursorStats{}
	}
	return c.r.cursorStats()
}

// Table returns the table the cursor reads.
func (c *StatementCursor) Table() string { return c.table }

// Prime reads the table once and discards what is there, so that the next
// Poll returns only statements that complete after this call.
func (c *StatementCursor) Prime(ctx context.Context, db queryer) error {
	_, _, err := c.Poll(ctx, db, Clock{})
	return err
}

// Poll returns the statements completed since the last Poll (all of the
// table's on the first), times converted with clock (StartUS/EndUS stay 0
// when clock has no origin), and how many statements the ring lost.
func (c *StatementCursor) Poll(ctx context.Context, db queryer, clock Clock) ([]ServerStatement, int64, error) {
	if c.err != nil {
		return nil, 0, c.err
	}
	rows, lost, err := c.r.read(ctx, db)
	if err != nil {
		return nil, 0, err
	}
	c.Lost += lost
	c.markOwn(rows)
	out := rows[:0]
	for _, s := range rows {
		if c.own[s.ThreadID] {
			continue
		}
		c.fillConn(&s)
		s.Source = c.table
		if clock.OriginUS != 0 {
			s.StartUS, s.EndUS = clock.UnixMicros(s.TimerStart), clock.UnixMicros(s.TimerEnd)
		}
		out = append(out, s)
	}
	c.completeTexts(ctx, db, out)
	c.prune()
	return out, lost, nil
}

// markOwn records threads that ran our statements. A connection of ours
// also sends COM_PING, COM_QUIT and driver statements without the marker,
// so the whole thread is dropped, not only the marked statements.
func (c *StatementCursor) markOwn(rows []ServerStatement) {
	for _, s := range rows {
		if IsOwnSQL(s.SQLText) {
			c.own[s.ThreadID] = true
		}
	}
}

// fillConn keeps the connection id of a thread that has ended since its
// statement completed (the threads row is gone by the time we read).
func (c *StatementCursor) fillConn(s *ServerStatement) {
	if s.ConnID != 0 {
		c.conns[s.ThreadID] = s.ConnID
	} else {
		s.ConnID = c.conns[s.ThreadID]
	}
}

// prune bounds the per-thread maps to threads the ring still knows.
func (c *StatementCursor) prune() {
	for t := range c.own {
		if _, ok := c.r.ring.marks[t]; !ok {
			delete(c.own, t)
		}
	}
	for t := range c.conns {
		if _, ok := c.r.ring.marks[t]; !ok {
			delete(c.conns, t)
		}
	}
}

// IsOwnSQL reports whether a statement text is gapscope's own (it starts
// with the marker).
func IsOwnSQL(sql string) bool { return sqltext.IsOwnText(sql) }
