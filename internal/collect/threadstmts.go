package collect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ThreadStatements reads the statements performance_schema still holds
// for a few connections: the per-thread history (events_statements_history,
// the last performance_schema_events_statements_history_size statements
// of each thread, 10 by default) and the statement each thread runs or ran
// last (events_statements_current). Unlike history_long, a global ring
// that a busy server turns over in tens of milliseconds, what a thread
// keeps is overwritten only by that thread's own next statements, so a
// read of it right after a statement ends finds the statement whatever the
// rest of the server does. Watch reads it for the statements that stand
// out. Not safe for concurrent use.
type ThreadStatements struct {
	ready bool
	// queries by table; "" when the table is missing or its consumer off.
	history, current, long string
	// fields of each query, by table.
	fields map[string][]field[ServerStatement]
	intern interner
	// connOf: THREAD_ID -> connection id (0: a background thread) of the
	// threads ReadRunning met; a thread id is never reused, so a scan reads
	// performance_schema.threads only when it meets a new thread.
	connOf map[uint64]uint64
}

// Prepare learns the tables' columns; it fails when neither exists.
func (t *ThreadStatements) Prepare(ctx context.Context, db queryer) error {
	if t.ready {
		return nil
	}
	cols, err := LoadColumns(ctx, db, "performance_schema", SourceHistory, SourceCurrent, SourceHistoryLong)
	if err != nil {
		return err
	}
	for _, table := range []string{SourceHistory, SourceCurrent, SourceHistoryLong} {
		if !cols.Table(table) {
			continue
		}
		fields, _, err := selectList(cols, table, joinFields)
		if err != nil {
			return err
		}
		exprs := make([]string, len(fields))
		for i, f := range fields {
			exprs[i] = f.selectExpr("h")
		}
		q := Mark + " SELECT " + strings.Join(exprs, ", ") + " FROM performance_schema." + table + " h"
		switch table {
		case SourceHistory:
			t.history = q
		case SourceCurrent:
			t.current = q
		default:
			t.long = q
		}
		if t.fields == nil {
			t.fields = map[string][]field[ServerStatement]{}
		}
		t.fields[table] = fields
	}
	if t.history == "" && t.current == "" {
		return fmt.Errorf("performance_schema has neither %s nor %s", SourceHistory, SourceCurrent)
	}
	t.ready = true
	return nil
}

// Read returns the rows both tables hold for the threads given (THREAD_ID
// -> connection id), times converted with clock, each with its Source and
// ConnID. Completed statements only: a row still running has no end yet
// (END_EVENT_ID NULL) and is read again once it has. A row of current that
// history holds too is returned once, from history.
//
// With longSinceUS > 0 (and a calibrated clock), history_long's rows of
// those threads that ended from then on (Unix µs) are read too, after the
// other two. A busy connection runs its thread's 10 statements in a few
// milliseconds, before the capture can even hand a statement over, while
// the server-wide ring keeps tens of milliseconds at any rate: read at
// once for one thread and a short span, it still holds what the thread's
// own history lost. Its rows are a different kind of evidence for a
// caller: their absence says nothing about the thread.
func (t *ThreadStatements) Read(ctx context.Context, db queryer, threads map[uint64]uint64, clock Clock, longSinceUS int64) ([]ServerStatement, error) {
	if err := t.Prepare(ctx, db); err != nil {
		return nil, err
	}
	if len(threads) == 0 {
		return nil, nil
	}
	ids := make([]uint64, 0, len(threads))
	for id := range threads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cond := " WHERE h.END_EVENT_ID IS NOT NULL AND h.THREAD_ID IN (" + joinIDs(ids) + ")"
	longCond := cond
	if clock.OriginUS != 0 && longSinceUS > clock.OriginUS {
		longCond += " AND h.TIMER_END >= " + strconv.FormatUint(uint64(longSinceUS-clock.OriginUS)*PicosPerMicro, 10)
	}
	var out []ServerStatement
	seen := map[[2]uint64]bool{}
	for _, src := range []struct{ table, q, cond string }{
		{SourceHistory, t.history, cond}, {SourceCurrent, t.current, cond}, {SourceHistoryLong, t.long, longCond},
	} {
		if src.q == "" || (src.table == SourceHistoryLong && src.cond == cond) {
			continue // no such table, or no time to read history_long from
		}
		rows, err := t.query(ctx, db, src.q+src.cond, t.fields[src.table])
		if err != nil {
			return nil, fmt.Errorf("reading performance_schema.%s: %w", src.table, err)
		}
		for _, r := range rows {
			key := [2]uint64{r.ThreadID, r.EventID}
			if seen[key] {
				continue
			}
			seen[key] = true
			r.Source, r.ConnID, r.Targeted = src.table, threads[r.ThreadID], true
			if clock.OriginUS != 0 {
				r.StartUS, r.EndUS = clock.UnixMicros(r.TimerStart), clock.UnixMicros(r.TimerEnd)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// ReadRunning returns the statements running for at least minWait
// (events_statements_current, END_EVENT_ID still NULL), with their
// connection ids (threads without one left out) and their start
// converted with clock; Source is SourceRunning and EndUS 0.
func (t *ThreadStatements) ReadRunning(ctx context.Context, db queryer, minWait time.Duration, clock Clock) ([]ServerStatement, error) {
	if err := t.Prepare(ctx, db); err != nil || t.current == "" {
		return nil, err
	}
	q := t.current + " WHERE h.END_EVENT_ID IS NULL AND h.TIMER_WAIT >= " + strconv.FormatUint(uint64(minWait.Nanoseconds())*1000, 10)
	rows, err := t.query(ctx, db, q, t.fields[SourceCurrent])
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	if err := t.learnConns(ctx, db, rows); err != nil {
		return nil, err
	}
	out := rows[:0]
	for _, r := range rows {
		if r.ConnID = t.connOf[r.ThreadID]; r.ConnID == 0 || r.NestingLevel > 0 || r.NestingType == "STATEMENT" {
			continue
		}
		r.Source, r.TimerEnd, r.EndUS, r.Targeted = SourceRunning, 0, 0, true
		if clock.OriginUS != 0 {
			r.StartUS = clock.UnixMicros(r.TimerStart)
		}
		out = append(out, r)
	}
	return out, nil
}

// ForgetThreads drops the threads learnt (a server restart: thread ids
// start over).
func (t *ThreadStatements) ForgetThreads() { clear(t.connOf) }

// learnConns reads the connections of the threads of rows it does not
// know yet.
func (t *ThreadStatements) learnConns(ctx context.Context, db queryer, rows []ServerStatement) error {
	if !slices.ContainsFunc(rows, func(r ServerStatement) bool { _, ok := t.connOf[r.ThreadID]; return !ok }) {
		return nil
	}
	threads, err := Threads(ctx, db)
	if err != nil {
		return err
	}
	if t.connOf == nil || len(t.connOf) > 100_000 {
		t.connOf = map[uint64]uint64{} // a cache: threads come and go
	}
	for tid, conn := range threads {
		t.connOf[tid] = conn
	}
	for _, r := range rows {
		t.connOf[r.ThreadID] = threads[r.ThreadID] // 0: no connection's
	}
	return nil
}

func (t *ThreadStatements) query(ctx context.Context, db queryer, q string, fields []field[ServerStatement]) ([]ServerStatement, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := len(fields)
	raw := make([]any, n)
	bufs := make([][]byte, n)
	for i := range raw {
		raw[i] = &bufs[i]
	}
	var out []ServerStatement
	for rows.Next() {
		if err := rows.Scan(raw...); err != nil {
			return nil, err
		}
		out = append(out, ServerStatement{})
		decodeRow(fields, bufs, &out[len(out)-1], &t.intern)
	}
	return out, rows.Err()
}

// ThreadsOf maps the threads of the given connections: THREAD_ID ->
// PROCESSLIST_ID (connections that have ended are absent, and those still
// in their handshake: see threadConns).
func ThreadsOf(ctx context.Context, db queryer, conns []uint64) (map[uint64]uint64, error) {
	out := map[uint64]uint64{}
	if len(conns) == 0 {
		return out, nil
	}
	ids := slices.Clone(conns)
	slices.Sort(ids)
	rows, err := db.QueryContext(ctx, Mark+" SELECT THREAD_ID, PROCESSLIST_ID FROM performance_schema.threads WHERE "+settledThread+" AND PROCESSLIST_ID IN ("+joinIDs(slices.Compact(ids))+")")
	if err != nil {
		return nil, fmt.Errorf("reading performance_schema.threads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var tid, pid uint64
		if err := rows.Scan(&tid, &pid); err != nil {
			return nil, err
		}
		out[tid] = pid
	}
	return out, rows.Err()
}

func joinIDs(ids []uint64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}

// Returned reports whether the cursor already returned the row of thread
// whose END_EVENT_ID is end (rows still inside its read window only; an
// older row cannot come from it again either way).
func (c *StatementCursor) Returned(thread, end uint64) bool {
	if c.r == nil || c.r.ring == nil {
		return false
	}
	return c.r.ring.returned(eventKey{Thread: thread, EndEventID: end, TimerEnd: 1})
}

// LearnThreads reads which thread serves which connection now, so that
// the rows of a connection that ends before the next read still name it
// (performance_schema forgets the thread's connection when it ends; a
// burst on short-lived connections would otherwise come back as rows of
// nobody's).
func (c *StatementCursor) LearnThreads(ctx context.Context, db queryer) error {
	if c.r == nil || c.r.setConn == nil {
		return nil
	}
	live, sockets, err := threadConns(ctx, db)
	if err != nil {
		return err
	}
	if c.r.threads == nil {
		c.r.threads, c.r.sockets = map[uint64]uint64{}, map[uint64]bool{}
	}
	c.newest = [2]uint64{}
	for t, conn := range live {
		c.r.threads[t] = conn
		if t > c.newest[0] {
			c.newest = [2]uint64{t, conn}
		}
	}
	for t := range sockets {
		c.r.sockets[t] = true
	}
	return nil
}

// NewestThread is the newest foreground thread the last LearnThreads
// read, with its connection's id (0, 0: none).
func (c *StatementCursor) NewestThread() (thread, conn uint64) {
	return c.newest[0], c.newest[1]
}
