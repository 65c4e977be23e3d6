package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// Query selects rows by run and time. Zero fields do not filter.
type Query struct {
	RunID  int64
	FromUS int64 // inclusive
	ToUS   int64 // exclusive
	Limit  int
}

// where renders q for a table whose time column is timeCol, ordered by
// time then id.
func (q Query) where(timeCol string) (string, []any) {
	s, args := q.filter(timeCol)
	s += " ORDER BY " + timeCol + ", id"
	if q.Limit > 0 {
		s += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	return s, args
}

// filter renders q's run and time as a WHERE clause ("" when q selects
// everything); it ignores Limit.
func (q Query) filter(timeCol string) (string, []any) {
	var conds []string
	var args []any
	if q.RunID != 0 {
		conds, args = append(conds, "run_id = ?"), append(args, q.RunID)
	}
	if q.FromUS != 0 {
		conds, args = append(conds, timeCol+" >= ?"), append(args, q.FromUS)
	}
	if q.ToUS != 0 {
		conds, args = append(conds, timeCol+" < ?"), append(args, q.ToUS)
	}
	s := ""
	if len(conds) > 0 {
		s = " WHERE " + strings.Join(conds, " AND ")
	}
	return s, args
}

const statementCols = `conn, conn_id, user, db, cmd, sql, digest, digest_text, t_req_first, t_req_last,
 t_resp_first, t_resp_last, client_us, request_us, queue_us, exec_us, send_stall_us, delivery_us, server_us,
 "rows", req_bytes, resp_bytes, error_code, error_state, error_msg, zero_window_us, retransmits, pool_group,
 joined, notes, txn, txn_end, txn_idle_before_us, txn_start, lock_wait_us, blocked_by`

// Statements returns the statements q selects, in time order.
func (s *Store) Statements(ctx context.Context, q Query) ([]event.Statement, error) {
	where, args := q.where("t_req_first")
	rows, err := s.db.QueryContext(ctx, "SELECT "+statementCols+" FROM statements"+where, args...)
	if err != nil {
		return nil, fmt.Errorf("reading statements: %w", err)
	}
	defer rows.Close()
	var out []event.Statement
	for rows.Next() {
		st, err := scanStatement(rows)
		if err != nil {
			return nil, fmt.Errorf("reading statements: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

func scanStatement(rows *sql.Rows) (event.Statement, error) {
	var st event.Statement
	var code, group sql.NullInt64
	var state, msg, notes, txnEnd, blocker sql.NullString
	var connID, txnSeq int64
	var wait sql.NullInt64
	err := rows.Scan(&st.Conn, &connID, &st.User, &st.DB, &st.Cmd, &st.SQL, &st.Digest, &st.DigestText,
		&st.TReqFirst, &st.TReqLast, &st.TRespFirst, &st.TRespLast, &st.ClientUS, &st.RequestUS, &st.QueueUS,
		&st.ExecUS, &st.SendStallUS, &st.DeliveryUS, &st.ServerUS, &st.Rows, &st.ReqBytes, &st.RespBytes,
		&code, &state, &msg, &st.ZeroWindowUS, &st.Retransmits, &group, &st.Joined, &notes,
		&txnSeq, &txnEnd, &st.TxnIdleBeforeUS, &st.TxnStartUS, &wait, &blocker)
	if err != nil {
		return st, err
	}
	st.ConnID, st.TxnSeq = uint64(connID), uint32(txnSeq)
	if txnEnd.String != "" {
		if err := st.TxnEnd.UnmarshalText([]byte(txnEnd.String)); err != nil {
			return st, err
		}
	}
	if wait.Valid {
		st.LockWait = &event.LockWait{LockWaitUS: wait.Int64}
		if blocker.Valid {
			st.BlockedBy = new(event.Blocker)
			if err := json.Unmarshal([]byte(blocker.String), st.BlockedBy); err != nil {
				return st, fmt.Errorf("blocked_by: %w", err)
			}
		}
	}
	if code.Valid {
		st.Error = &event.Error{Code: uint16(code.Int64), State: state.String, Msg: msg.String}
	}
	if group.Valid {
		g := int(group.Int64)
		st.PoolGroup = &g
	}
	if notes.Valid {
		var written []string
		if err := json.Unmarshal([]byte(notes.String), &written); err != nil {
			return st, fmt.Errorf("notes: %w", err)
		}
		st.SetWrittenNotes(written) // the rows' note back into RowsBy (the reason is not stored: its sentence stays a note)
	}
	return st, nil
}

// Samples returns the samples q selects, in time order.
func (s *Store) Samples(ctx context.Context, q Query) ([]event.Sample, error) {
	where, args := q.where("t_us")
	rows, err := s.db.QueryContext(ctx, "SELECT t_us, source, name, value, labels FROM samples"+where, args...)
	if err != nil {
		return nil, fmt.Errorf("reading samples: %w", err)
	}
	defer rows.Close()
	var out []event.Sample
	for rows.Next() {
		var sm event.Sample
		var labels sql.NullString
		if err := rows.Scan(&sm.TimeUS, &sm.Source, &sm.Name, &sm.Value, &labels); err != nil {
			return nil, fmt.Errorf("reading samples: %w", err)
		}
		if labels.Valid {
			if err := json.Unmarshal([]byte(labels.String), &sm.Labels); err != nil {
				return nil, fmt.Errorf("reading samples: labels: %w", err)
			}
		}
		out = append(out, sm)
	}
	return out, rows.Err()
}

// Findings returns the findings q selects, in time order. Evidence comes
// back as decoded JSON: numbers are float64, lists []any.
func (s *Store) Findings(ctx context.Context, q Query) ([]event.Finding, error) {
	where, args := q.where("t_us")
	rows, err := s.db.QueryContext(ctx, "SELECT code, severity, summary, evidence, fix FROM findings"+where, args...)
	if err != nil {
		return nil, fmt.Errorf("reading findings: %w", err)
	}
	defer rows.Close()
	var out []event.Finding
	for rows.Next() {
		var f event.Finding
		var sev, ev string
		if err := rows.Scan(&f.Code, &sev, &f.Summary, &ev, &f.Fix); err != nil {
			return nil, fmt.Errorf("reading findings: %w", err)
		}
		f.Severity = event.Severity(sev)
		if err := json.Unmarshal([]byte(ev), &f.Evidence); err != nil {
			return nil, fmt.Errorf("reading findings: evidence of %s: %w", f.Code, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
