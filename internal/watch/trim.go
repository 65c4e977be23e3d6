package watch

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
)

// historyTrim keeps the server's statement history to the connections a
// sampled run follows, by turning performance_schema.threads.HISTORY off
// for the others (watch --enable-consumers only: it changes the server's
// settings). The history ring is global: left alone, every connection's
// statements fill it, so at 1 in 8 followed the ring turns over eight
// times faster than the followed statements need, most of them are
// overwritten before a poll reads them, and the server copies seven
// statements in eight into it for nothing. HISTORY only decides what the
// history tables record: the thread stays instrumented, its statements
// still reach events_statements_current and the digest and summary
// tables other tools read.
//
// It belongs to the poller goroutine. It turns back on only what it
// turned off, when a connection comes back into the sample and on exit; a
// connection whose history was already off is left as it was.
type historyTrim struct {
	// off: connections considered, true when watch turned their history
	// off, false when it found it off already (or the connection gone).
	off map[uint64]bool
	// ours counts the entries of off that are true (active, per poll).
	ours   int
	failed bool
}

// trimChunk bounds the ids in one statement's IN list.
const trimChunk = 500

// trimPlan says which connections' history to turn off and which to turn
// back on so that it is off for exactly the connections in out (among
// those open), given what was done before. Connections no longer open are
// forgotten: their threads are gone.
func trimPlan(done map[uint64]bool, out map[uint64]bool, open func(uint64) bool) (toOff, toOn, gone []uint64) {
	for id := range out {
		if _, seen := done[id]; !seen && open(id) {
			toOff = append(toOff, id)
		}
	}
	for id, ours := range done {
		switch {
		case !open(id):
			gone = append(gone, id)
		case !out[id] && ours:
			toOn = append(toOn, id)
		case !out[id]:
			gone = append(gone, id) // found off, now followed: judged again when out again
		}
	}
	slices.Sort(toOff)
	slices.Sort(toOn)
	return toOff, toOn, gone
}

// sync makes the server's history match out (the connections left out of
// the sample, watch's own excluded by the caller). It reports an error
// once, the first time a change fails (no UPDATE grant on
// performance_schema, or no HISTORY column before MariaDB 10.5 / MySQL
// 5.7); from then on it does nothing.
func (t *historyTrim) sync(ctx context.Context, db *sql.DB, out map[uint64]bool, open func(uint64) bool) error {
	if t.failed {
		return nil
	}
	if t.off == nil {
		t.off = map[uint64]bool{}
	}
	toOff, toOn, gone := trimPlan(t.off, out, open)
	for _, id := range gone {
		t.forgetOne(id)
	}
	if err := t.setHistory(ctx, db, toOn, "YES"); err != nil {
		return t.fail(err)
	}
	for _, id := range toOn {
		t.forgetOne(id)
	}
	if len(toOff) == 0 {
		return nil
	}
	on, err := historyOn(ctx, db, toOff)
	if err != nil {
		return t.fail(err)
	}
	if err := t.setHistory(ctx, db, on, "NO"); err != nil {
		return t.fail(err)
	}
	for _, id := range toOff {
		t.off[id] = false
	}
	for _, id := range on {
		t.off[id] = true
	}
	t.ours += len(on)
	return nil
}

func (t *historyTrim) forgetOne(id uint64) {
	if t.off[id] {
		t.ours--
	}
	delete(t.off, id)
}

func (t *historyTrim) fail(err error) error {
	t.failed = true
	return err
}

// restore turns back on every history watch turned off.
func (t *historyTrim) restore(ctx context.Context, db *sql.DB) {
	var ids []uint64
	for id, ours := range t.off {
		if ours {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	_ = t.setHistory(ctx, db, ids, "YES")
	t.forget()
}

// forget drops what was done: the server restarted, its threads are new.
func (t *historyTrim) forget() { t.off, t.ours = nil, 0 }

// active reports whether watch keeps some connection's history off.
func (t *historyTrim) active() bool { return t.ours > 0 }

func (t *historyTrim) setHistory(ctx context.Context, db *sql.DB, ids []uint64, to string) error {
	for chunk := range slices.Chunk(ids, trimChunk) {
		q := collect.Mark + " UPDATE performance_schema.threads SET HISTORY='" + to + "' WHERE PROCESSLIST_ID IN (" + idList(chunk) + ")"
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// historyOn returns those of ids whose threads record history now.
func historyOn(ctx context.Context, db *sql.DB, ids []uint64) ([]uint64, error) {
	var on []uint64
	for chunk := range slices.Chunk(ids, trimChunk) {
		rows, err := db.QueryContext(ctx, collect.Mark+" SELECT PROCESSLIST_ID FROM performance_schema.threads WHERE HISTORY='YES' AND PROCESSLIST_ID IN ("+idList(chunk)+")")
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id uint64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			on = append(on, id)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(on)
	return on, nil
}

func idList(ids []uint64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}
