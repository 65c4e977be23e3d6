package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

const transactionCols = `conn, conn_id, user, db, txn, t_start, t_end, "end", statements, open_us, joined, server_us,
 in_app_us, max_idle_us, lock_wait_us, first_digest, first_sql, lead_digest, lead_sql, tags, blocked`

// Transactions returns the transactions q selects, by start time.
func (s *Store) Transactions(ctx context.Context, q Query) ([]event.Transaction, error) {
	where, args := q.where("t_start")
	return s.readTransactions(ctx, "SELECT "+transactionCols+" FROM transactions"+where, args...)
}

// LongestIdle returns the n transactions q selects (its Limit ignored)
// whose application held them open longest without a statement running
// (event.Transaction.MaxIdleUS), longest first; none without an idle gap.
func (s *Store) LongestIdle(ctx context.Context, q Query, n int) ([]event.Transaction, error) {
	where, args := q.filter("t_start")
	if where == "" {
		where = " WHERE max_idle_us > 0"
	} else {
		where += " AND max_idle_us > 0"
	}
	return s.readTransactions(ctx, "SELECT "+transactionCols+" FROM transactions"+where+
		fmt.Sprintf(" ORDER BY max_idle_us DESC, id LIMIT %d", max(n, 0)), args...)
}

func (s *Store) readTransactions(ctx context.Context, query string, args ...any) ([]event.Transaction, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading transactions: %w", err)
	}
	defer rows.Close()
	var out []event.Transaction
	for rows.Next() {
		var t event.Transaction
		var connID, seq int64
		var tags sql.NullString
		if err := rows.Scan(&t.Conn, &connID, &t.User, &t.DB, &seq, &t.Start, &t.End, &t.EndKind, &t.Statements,
			&t.OpenUS, &t.Joined, &t.ServerUS, &t.InAppUS, &t.MaxIdleUS, &t.LockWaitUS, &t.FirstDigest, &t.FirstSQL,
			&t.LeadDigest, &t.LeadSQL, &tags, &t.Blocked); err != nil {
			return nil, fmt.Errorf("reading transactions: %w", err)
		}
		t.ConnID, t.Seq = uint64(connID), uint32(seq)
		if tags.Valid {
			if err := json.Unmarshal([]byte(tags.String), &t.Tags); err != nil {
				return nil, fmt.Errorf("reading transactions: tags: %w", err)
			}
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TxnTotals sum the transactions a query selects.
type TxnTotals struct {
	Count int64 `json:"count"`
	// Open counts those still open when their connection closed or the
	// run ended.
	Open       int64 `json:"open"`
	Statements int64 `json:"statements"`
	// Joined counts their statements whose server half is known;
	// ServerUS covers those only.
	Joined     int64 `json:"joined"`
	OpenUS     int64 `json:"open_us"`
	ServerUS   int64 `json:"server_us"`
	InAppUS    int64 `json:"in_app_us"`
	MaxIdleUS  int64 `json:"max_idle_us"`
	LockWaitUS int64 `json:"lock_wait_us"`
	// Blocked sums the statements of other connections each held up.
	Blocked int64 `json:"blocked"`
	// FromUS and ToUS are the first start and the last end (0: none).
	FromUS int64 `json:"from_us"`
	ToUS   int64 `json:"to_us"`
}

// TransactionTotals sums the transactions q selects (its Limit ignored).
func (s *Store) TransactionTotals(ctx context.Context, q Query) (TxnTotals, error) {
	where, args := q.filter("t_start")
	var t TxnTotals
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM("end" = 'open'), 0), COALESCE(SUM(statements), 0),
 COALESCE(SUM(joined), 0), COALESCE(SUM(open_us), 0), COALESCE(SUM(server_us), 0), COALESCE(SUM(in_app_us), 0), COALESCE(MAX(max_idle_us), 0),
 COALESCE(SUM(lock_wait_us), 0), COALESCE(SUM(blocked), 0), COALESCE(MIN(t_start), 0), COALESCE(MAX(t_end), 0)
 FROM transactions`+where, args...).Scan(&t.Count, &t.Open, &t.Statements, &t.Joined, &t.OpenUS, &t.ServerUS, &t.InAppUS,
		&t.MaxIdleUS, &t.LockWaitUS, &t.Blocked, &t.FromUS, &t.ToUS)
	if err != nil {
		return t, fmt.Errorf("summing transactions: %w", err)
	}
	return t, nil
}

// DigestLockWaits are one digest's lock waits over the per-minute totals
// (every statement counted, kept or not).
type DigestLockWaits struct {
	Digest     string `json:"digest"`
	DigestText string `json:"digest_text"`
	Calls      int64  `json:"calls"`
	// LockWaits counts the calls with a known lock wait; LockWaitUS sums
	// those waits, a part of ExecUS.
	LockWaits  int64 `json:"lock_waits"`
	LockWaitUS int64 `json:"lock_wait_us"`
	ExecUS     int64 `json:"exec_us"`
	ClientUS   int64 `json:"client_us"`
}

// LockWaitsByDigest sums the per-minute totals q selects by digest, for
// the digests with a lock wait, most lock wait first; q.Limit bounds the
// digests (0: every one).
func (s *Store) LockWaitsByDigest(ctx context.Context, q Query) ([]DigestLockWaits, error) {
	where, args := q.filter("minute_us")
	query := `SELECT digest, MAX(digest_text), SUM(calls), SUM(lock_waits), SUM(lock_wait_us), SUM(exec_us), SUM(client_us)
 FROM digest_minutes` + where + ` GROUP BY digest HAVING SUM(lock_waits) > 0 ORDER BY SUM(lock_wait_us) DESC, digest`
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading lock waits by digest: %w", err)
	}
	defer rows.Close()
	var out []DigestLockWaits
	for rows.Next() {
		var d DigestLockWaits
		if err := rows.Scan(&d.Digest, &d.DigestText, &d.Calls, &d.LockWaits, &d.LockWaitUS, &d.ExecUS, &d.ClientUS); err != nil {
			return nil, fmt.Errorf("reading lock waits by digest: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
