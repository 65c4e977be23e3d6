package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"
)

// timed lists each table with rows to expire and its time column.
var timed = []struct{ table, col string }{
	{"statements", "t_req_first"},
	{"samples", "t_us"},
	{"findings", "t_us"},
	{"probe_results", "t_us"},
	{"plans", "t_us"},
	{"digest_minutes", "minute_us"},
	{"transactions", "t_start"},
}

// DeleteBefore removes every row older than cutoffUS, and the runs that
// ended before it with no rows left, in one transaction. It returns how
// many rows went.
func (s *Store) DeleteBefore(ctx context.Context, cutoffUS int64) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("expiring store rows: %w", err)
	}
	defer tx.Rollback()
	var n int64
	for _, t := range timed {
		res, err := tx.ExecContext(ctx, "DELETE FROM "+t.table+" WHERE "+t.col+" < ?", cutoffUS)
		if err != nil {
			return 0, fmt.Errorf("expiring %s: %w", t.table, err)
		}
		k, _ := res.RowsAffected()
		n += k
	}
	// A killed run never got an end: judge it by its start, and keep it
	// while any of its rows remain.
	res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE (CASE WHEN end_us > 0 THEN end_us ELSE start_us END) < ?
 AND NOT EXISTS (SELECT 1 FROM statements WHERE run_id = runs.id)
 AND NOT EXISTS (SELECT 1 FROM samples WHERE run_id = runs.id)
 AND NOT EXISTS (SELECT 1 FROM findings WHERE run_id = runs.id)
 AND NOT EXISTS (SELECT 1 FROM transactions WHERE run_id = runs.id)`, cutoffUS)
	if err != nil {
		return 0, fmt.Errorf("expiring runs: %w", err)
	}
	k, _ := res.RowsAffected()
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("expiring store rows: %w", err)
	}
	return n + k, nil
}

// Retain keeps the last d before now and deletes the rest.
func (s *Store) Retain(ctx context.Context, d time.Duration, now time.Time) (int64, error) {
	if d <= 0 {
		return 0, fmt.Errorf("retention must be positive, got %v", d)
	}
	return s.DeleteBefore(ctx, now.Add(-d).UnixMicro())
}

// Limits bound a store that a long run writes to. Zero fields do not
// bound.
type Limits struct {
	// MaxBytes bounds the file and its write-ahead log together: past it
	// the oldest statement rows go first (then the oldest transactions,
	// samples and per-minute digest totals, only if the rows alone do not
	// make room), down to 90% of it.
	MaxBytes int64
	// Retain removes every row older than this.
	Retain time.Duration
}

// limiter holds a store within its Limits; a Writer checks after each
// commit.
type limiter struct {
	s       *Store
	lim     Limits
	lastAge time.Time
}

// ageEvery is how often rows are aged out: retention is days, a minute
// late is nothing.
const ageEvery = time.Minute

// check applies the limits as of now.
func (l *limiter) check(ctx context.Context, now time.Time) error {
	var trimmed bool
	if l.lim.Retain > 0 && now.Sub(l.lastAge) >= ageEvery {
		l.lastAge = now
		cutoff := now.Add(-l.lim.Retain).UnixMicro()
		n, err := l.s.DeleteBefore(ctx, cutoff)
		if err != nil {
			return err
		}
		if n > 0 {
			trimmed = true
			if err := l.s.recordTrim(ctx, now, "age", cutoff, n); err != nil {
				return err
			}
		}
	}
	if l.lim.MaxBytes > 0 {
		n, err := l.s.trimToSize(ctx, l.lim.MaxBytes, now)
		if err != nil {
			return err
		}
		trimmed = trimmed || n > 0
	}
	if trimmed {
		return l.s.checkpoint(ctx)
	}
	return nil
}

// Size is what the store takes on disk as it grows: its pages in use
// (freed pages are reused before the file grows) and its write-ahead log.
func (s *Store) Size(ctx context.Context) (int64, error) {
	var pages, free, pageSize int64
	for q, v := range map[string]*int64{"PRAGMA page_count": &pages, "PRAGMA freelist_count": &free, "PRAGMA page_size": &pageSize} {
		if err := s.db.QueryRowContext(ctx, q).Scan(v); err != nil {
			return 0, fmt.Errorf("measuring store %s: %w", s.path, err)
		}
	}
	used := (pages - free) * pageSize
	if st, err := os.Stat(s.path + "-wal"); err == nil {
		used += st.Size()
	}
	return used, nil
}

// trimTables are emptied oldest first, in this order, until the store
// fits: statement rows are the bulk and the least needed.
var trimTables = []struct{ table, col string }{
	{"statements", "t_req_first"},
	{"transactions", "t_start"},
	{"samples", "t_us"},
	{"digest_minutes", "minute_us"},
}

// trimToSize removes the oldest rows until the store takes at most 90% of
// maxBytes, when it takes more than maxBytes; it records the trim and
// returns how many rows went.
func (s *Store) trimToSize(ctx context.Context, maxBytes int64, now time.Time) (int64, error) {
	used, err := s.Size(ctx)
	if err != nil || used <= maxBytes {
		return 0, err
	}
	target := maxBytes / 10 * 9
	var removed int64
	for _, t := range trimTables {
		for used > target {
			n, err := s.deleteOldest(ctx, t.table, used, target)
			if err != nil {
				return removed, err
			}
			if n == 0 {
				break
			}
			removed += n
			if err := s.checkpoint(ctx); err != nil {
				return removed, err
			}
			if used, err = s.Size(ctx); err != nil {
				return removed, err
			}
		}
	}
	if removed == 0 {
		return 0, nil
	}
	var before sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MIN(t_req_first) FROM statements").Scan(&before); err != nil {
		return removed, fmt.Errorf("trimming store: %w", err)
	}
	return removed, s.recordTrim(ctx, now, "size", before.Int64, removed)
}

// deleteOldest removes the oldest rows of table, as many as should free
// used-target bytes if its rows are the store's bulk (at least 256). Row
// ids grow with time, so the oldest are the lowest; min and max ids come
// from the primary key without a scan.
func (s *Store) deleteOldest(ctx context.Context, table string, used, target int64) (int64, error) {
	var lo, hi sql.NullInt64
	if err := s.db.QueryRowContext(ctx, "SELECT MIN(rowid), MAX(rowid) FROM "+table).Scan(&lo, &hi); err != nil {
		return 0, fmt.Errorf("trimming %s: %w", table, err)
	}
	if !lo.Valid {
		return 0, nil
	}
	rows := hi.Int64 - lo.Int64 + 1
	n := max(256, rows*(used-target)/used+rows/100)
	res, err := s.db.ExecContext(ctx, "DELETE FROM "+table+" WHERE rowid < ?", lo.Int64+n)
	if err != nil {
		return 0, fmt.Errorf("trimming %s: %w", table, err)
	}
	return res.RowsAffected()
}

// checkpoint copies the write-ahead log into the file and truncates it.
func (s *Store) checkpoint(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("checkpointing store %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) recordTrim(ctx context.Context, now time.Time, reason string, beforeUS, rows int64) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO trims (t_us, reason, before_us, "rows") VALUES (?,?,?,?)`,
		now.UnixMicro(), reason, beforeUS, rows); err != nil {
		return fmt.Errorf("recording store trim: %w", err)
	}
	return nil
}

// Holdings says from when a store holds what, after trims.
type Holdings struct {
	// StatementsFromUS is the oldest statement row (0: none).
	StatementsFromUS int64
	// MinutesFromUS is the oldest per-minute digest total (0: none).
	MinutesFromUS int64
	// TransactionsFromUS is the oldest transaction's start (0: none).
	TransactionsFromUS int64
	// Calls counts the statements the per-minute totals hold; Kept those
	// of them with a statement row when written (sampling).
	Calls, Kept int64
	// Trims counts removals of old rows, RemovedRows their rows, and
	// LastTrimUS and LastReason say when and why the last was.
	Trims, RemovedRows, LastTrimUS int64
	LastReason                     string
}

// Holdings reads what the store holds after its trims.
func (s *Store) Holdings(ctx context.Context) (Holdings, error) {
	var h Holdings
	var stmt, minute, txn, last sql.NullInt64
	var reason sql.NullString
	err := errors.Join(
		s.db.QueryRowContext(ctx, "SELECT MIN(t_req_first) FROM statements").Scan(&stmt),
		s.db.QueryRowContext(ctx, "SELECT MIN(t_start) FROM transactions").Scan(&txn),
		s.db.QueryRowContext(ctx, "SELECT MIN(minute_us), COALESCE(SUM(calls), 0), COALESCE(SUM(kept), 0) FROM digest_minutes").Scan(&minute, &h.Calls, &h.Kept),
		s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM("rows"), 0) FROM trims`).Scan(&h.Trims, &h.RemovedRows),
	)
	if err != nil {
		return h, fmt.Errorf("reading what store %s holds: %w", s.path, err)
	}
	if h.Trims > 0 {
		if err := s.db.QueryRowContext(ctx, "SELECT t_us, reason FROM trims ORDER BY id DESC LIMIT 1").Scan(&last, &reason); err != nil {
			return h, fmt.Errorf("reading store trims: %w", err)
		}
	}
	h.StatementsFromUS, h.MinutesFromUS, h.TransactionsFromUS = stmt.Int64, minute.Int64, txn.Int64
	h.LastTrimUS, h.LastReason = last.Int64, reason.String
	return h, nil
}
