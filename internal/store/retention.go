package store

import (
	"context"
	"fmt"
	"time"
)

// timed lists each table with rows to expire and its time column.
var timed = []struct{ table, col string }{
	{"statements", "t_req_first"},
	{"samples", "t_us"},
	{"findings", "t_us"},
	{"probe_results", "t_us"},
	{"plans", "t_us"},
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
 AND NOT EXISTS (SELECT 1 FROM findings WHERE run_id = runs.id)`, cutoffUS)
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
