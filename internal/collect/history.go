package collect

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// historyReader reads one performance_schema history table through a
// ringCursor. It learns the table's columns and ring size on first use.
type historyReader[R any] struct {
	table   string // e.g. events_statements_history_long
	sizeVar string // variable holding the ring size
	want    []field[R]
	key     func(*R) eventKey
	setConn func(*R, uint64, bool) // stores threads.PROCESSLIST_ID and whether it is a unix-socket client; nil: not wanted
	// incremental asks the server only for rows inside the cursor's
	// TIMER_END window instead of the whole table. Only for tables whose
	// rows share one timer: waits mix timers (idle runs on its own).
	incremental bool
	minSlack    uint64
	// except are connections reads leave out (StatementCursor.ExceptConns),
	// but for their rows of at least exceptBelowPS (0: all left out).
	except        map[uint64]bool
	exceptBelowPS uint64
	// threads maps THREAD_ID to PROCESSLIST_ID (0: background or ended),
	// read from performance_schema.threads when a row names a thread it
	// does not know. Joining threads in the history query instead costs the
	// server a nested loop on every read, an order of magnitude slower with
	// many connections open (docs/performance.md, "Reading history_long
	// without the threads join").
	threads map[uint64]uint64
	// sockets are the threads of unix-socket clients among them.
	sockets map[uint64]bool

	ready   bool
	fields  []field[R]
	query   string
	ring    *ringCursor
	checkAt int // len(ring.marks) at which ended threads are next looked for
	stats   CursorStats
	// buf holds the rows of the last read (reused: read copies out the
	// new ones); intern the repeating values of its text columns.
	buf    []R
	intern interner
}

// CursorStats describes what a history cursor has read.
type CursorStats struct {
	Incremental bool  `json:"incremental"`
	Polls       int64 `json:"polls"`
	// RowsRead counts the rows the server sent, RowsNew those returned as
	// new (before a StatementCursor drops gapscope's own); LastRead is
	// RowsRead of the last poll.
	RowsRead int64 `json:"rows_read"`
	RowsNew  int64 `json:"rows_new"`
	LastRead int   `json:"last_read"`
	// Marks is how many threads the cursor remembers.
	Marks int `json:"marks"`
	// SlackUS is how far below the highest TIMER_END returned the next
	// read starts; MaxLateUS the latest a row was seen to become visible
	// after a row of another thread that ended later.
	SlackUS   int64 `json:"slack_us"`
	MaxLateUS int64 `json:"max_late_us"`
}

// keepRowsMax bounds the row buffer a reader keeps between reads (a
// whole-table read of a 100k-row ring is not held on to).
const keepRowsMax = 16384

// markCheckMin is the number of remembered threads below which an
// incremental reader does not look for ended threads.
const markCheckMin = 256

func newHistoryReader[R any](table, kind string, want []field[R], key func(*R) eventKey, setConn func(*R, uint64, bool)) (*historyReader[R], error) {
	if table != "events_"+kind+"_history" && table != "events_"+kind+"_history_long" {
		return nil, fmt.Errorf("collect: %q is not events_%s_history or events_%s_history_long", table, kind, kind)
	}
	return &historyReader[R]{
		table:   table,
		sizeVar: "performance_schema_" + table + "_size",
		want:    want,
		key:     key,
		setConn: setConn,
	}, nil
}

func (h *historyReader[R]) prepare(ctx context.Context, db queryer) error {
	if h.ready {
		return nil
	}
	cols, err := LoadColumns(ctx, db, "performance_schema", h.table)
	if err != nil {
		return err
	}
	if !cols.Table(h.table) {
		return fmt.Errorf("performance_schema.%s does not exist (performance_schema off or too old?)", h.table)
	}
	fields, _, err := selectList(cols, h.table, h.want)
	if err != nil {
		return err
	}
	h.fields = fields
	h.query = h.buildQuery()
	vars, err := variablesLike(ctx, db, []string{h.sizeVar})
	if err != nil {
		return err
	}
	long, size := strings.HasSuffix(h.table, "_long"), atoiOr(vars[h.sizeVar], 0)
	if h.incremental {
		h.ring = newIncrementalCursor(long, size, h.minSlack)
	} else {
		h.ring = newRingCursor(long, size)
	}
	h.checkAt = markCheckMin
	h.ready = true
	return nil
}

func (h *historyReader[R]) buildQuery() string {
	cols := make([]string, len(h.fields))
	for i, f := range h.fields {
		cols[i] = f.selectExpr("h")
	}
	return Mark + " SELECT " + strings.Join(cols, ", ") + " FROM performance_schema." + h.table + " h"
}

// read returns the rows new since the last read and the estimated count of
// rows the ring dropped unread.
func (h *historyReader[R]) read(ctx context.Context, db queryer) ([]R, int64, error) {
	if err := h.prepare(ctx, db); err != nil {
		return nil, 0, err
	}
	var conds []string
	if cond := h.ring.window().sql("h.TIMER_END"); cond != "" {
		conds = append(conds, cond)
	}
	filter := h.exceptFilter()
	if filter != "" {
		conds = append(conds, filter)
	}
	q := h.query
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	h.ring.filtered = filter != ""
	all, err := h.readAll(ctx, db, q)
	if err != nil {
		return nil, 0, fmt.Errorf("reading performance_schema.%s: %w", h.table, err)
	}
	if h.setConn != nil {
		if err := h.fillConns(ctx, db, all); err != nil {
			return nil, 0, err
		}
	}
	keys := make([]eventKey, len(all))
	for i := range all {
		keys[i] = h.key(&all[i])
	}
	fresh, lost := h.ring.advance(keys)
	h.keepUnread(keys)
	out := make([]R, 0, len(fresh))
	for _, i := range fresh {
		out = append(out, all[i])
	}
	h.count(len(all), len(fresh))
	if h.incremental && len(h.ring.marks) >= h.checkAt {
		h.forgetEnded(ctx, db)
	}
	return out, lost, nil
}

func (h *historyReader[R]) count(read, fresh int) {
	h.stats.Polls++
	h.stats.RowsRead += int64(read)
	h.stats.RowsNew += int64(fresh)
	h.stats.LastRead = read
}

// cursorStats returns what the reader has read so far.
func (h *historyReader[R]) cursorStats() CursorStats {
	st := h.stats
	st.Incremental = h.incremental
	if h.ring != nil {
		st.Marks = len(h.ring.marks)
		if w := h.ring.inc; w != nil {
			st.SlackUS = int64(w.slack() / PicosPerMicro)
			st.MaxLateUS = int64(w.maxLate / PicosPerMicro)
		}
	}
	return st
}

// forgetEnded bounds the marks of an incremental reader, which keeps the
// marks of threads absent from a read: it drops those of threads that have
// ended. It runs when the marks have doubled since the last time, so its
// cost is amortised over the threads that came and went. A failure leaves
// the marks as they are (the next poll tries again): the rows were read.
func (h *historyReader[R]) forgetEnded(ctx context.Context, db queryer) {
	alive, err := liveThreads(ctx, db)
	if err != nil {
		return
	}
	h.ring.forget(func(t uint64) bool { return alive[t] })
	h.checkAt = max(2*len(h.ring.marks), markCheckMin)
}

func liveThreads(ctx context.Context, db queryer) (map[uint64]bool, error) {
	rows, err := db.QueryContext(ctx, Mark+" SELECT THREAD_ID FROM performance_schema.threads")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	alive := map[uint64]bool{}
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		alive[id] = true
	}
	return alive, rows.Err()
}

// keepUnread keeps the threads of excepted connections marked unread
// after a read returned their slow rows (exceptBelowPS): the rows between
// were left out on purpose, not lost.
func (h *historyReader[R]) keepUnread(keys []eventKey) {
	if h.exceptBelowPS == 0 || len(h.except) == 0 {
		return
	}
	for _, k := range keys {
		if conn := h.threads[k.Thread]; conn != 0 && h.except[conn] {
			h.ring.unread(k.Thread)
		}
	}
}

// exceptFilter is the condition that leaves out the threads of the
// connections in except. A connection whose thread is not known yet (it
// has not run a statement the reader saw) cannot be named: its rows come
// until the reader has seen one.
func (h *historyReader[R]) exceptFilter() string {
	if len(h.except) == 0 {
		return ""
	}
	var tids []uint64
	for t, conn := range h.threads {
		if conn != 0 && h.except[conn] {
			tids = append(tids, t)
		}
	}
	if len(tids) == 0 {
		return ""
	}
	slices.Sort(tids)
	var b strings.Builder
	b.WriteString("h.THREAD_ID NOT IN (")
	for i, t := range tids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(t, 10))
	}
	b.WriteByte(')')
	if h.exceptBelowPS > 0 {
		return "(" + b.String() + " OR h.TIMER_WAIT >= " + strconv.FormatUint(h.exceptBelowPS, 10) + ")"
	}
	return b.String()
}

// fillConns stores each row's connection id, reading the threads table
// once when rows name threads the reader does not know. Threads that have
// ended by then stay 0 (the caller may remember them from earlier rows).
func (h *historyReader[R]) fillConns(ctx context.Context, db queryer, rows []R) error {
	unknown := false
	for i := range rows {
		if _, ok := h.threads[h.key(&rows[i]).Thread]; !ok {
			unknown = true
			break
		}
	}
	if unknown {
		live, sockets, err := threadConns(ctx, db)
		if err != nil {
			return err
		}
		for i := range rows {
			t := h.key(&rows[i]).Thread
			if _, ok := live[t]; !ok {
				// Ended before we looked (or background): what was learnt
				// while it ran (LearnThreads) stays; not looked up again.
				live[t] = h.threads[t]
				if h.sockets[t] {
					sockets[t] = true
				}
			}
		}
		h.threads, h.sockets = live, sockets
	}
	for i := range rows {
		t := h.key(&rows[i]).Thread
		if conn := h.threads[t]; conn != 0 || h.sockets[t] {
			h.setConn(&rows[i], conn, h.sockets[t])
		}
	}
	return nil
}

func (h *historyReader[R]) readAll(ctx context.Context, db queryer, q string) ([]R, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n := len(h.fields)
	raw := make([]sql.RawBytes, n)
	dest := make([]any, n)
	vals := make([][]byte, n)
	for i := range raw {
		dest[i] = &raw[i]
	}
	out := h.buf[:0]
	var zero R
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		for i, b := range raw {
			vals[i] = b // nil for NULL
		}
		out = append(out, zero)
		decodeRow(h.fields, vals, &out[len(out)-1], &h.intern)
	}
	h.buf = nil
	if cap(out) <= keepRowsMax {
		h.buf = out
	}
	return out, rows.Err()
}
