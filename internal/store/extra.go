package store

import (
	"context"
	"fmt"
)

// ProbeResult is one canary round beside the concurrency it ran under.
type ProbeResult struct {
	RunID            int64  `json:"run_id"`
	TimeUS           int64  `json:"t"`
	Name             string `json:"name"`
	Calls            int64  `json:"calls"`
	Errors           int64  `json:"errors"`
	MinUS            int64  `json:"min_us"`
	AvgUS            int64  `json:"avg_us"`
	MedianUS         int64  `json:"median_us"`
	MaxUS            int64  `json:"max_us"`
	ThreadsConnected int64  `json:"threads_connected"`
	ThreadsRunning   int64  `json:"threads_running"`
}

// AddProbe stores one probe round (a few per minute: no batching needed).
func (s *Store) AddProbe(ctx context.Context, p ProbeResult) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO probe_results (run_id, t_us, name, calls, errors, min_us, avg_us,
 median_us, max_us, threads_connected, threads_running) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		p.RunID, p.TimeUS, p.Name, p.Calls, p.Errors, p.MinUS, p.AvgUS, p.MedianUS, p.MaxUS, p.ThreadsConnected, p.ThreadsRunning)
	if err != nil {
		return fmt.Errorf("storing probe result: %w", err)
	}
	return nil
}

// ProbeResults returns the probe rounds q selects, in time order.
func (s *Store) ProbeResults(ctx context.Context, q Query) ([]ProbeResult, error) {
	where, args := q.where("t_us")
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, t_us, name, calls, errors, min_us, avg_us, median_us, max_us,
 threads_connected, threads_running FROM probe_results`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("reading probe results: %w", err)
	}
	defer rows.Close()
	var out []ProbeResult
	for rows.Next() {
		var p ProbeResult
		if err := rows.Scan(&p.RunID, &p.TimeUS, &p.Name, &p.Calls, &p.Errors, &p.MinUS, &p.AvgUS, &p.MedianUS,
			&p.MaxUS, &p.ThreadsConnected, &p.ThreadsRunning); err != nil {
			return nil, fmt.Errorf("reading probe results: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Plan is an execution plan caught for a statement or digest.
type Plan struct {
	RunID        int64  `json:"run_id"`
	TimeUS       int64  `json:"t"`
	ConnID       uint64 `json:"conn_id,omitempty"`
	Digest       string `json:"digest,omitempty"`
	DigestText   string `json:"digest_text,omitempty"`
	Source       string `json:"source"` // "SHOW EXPLAIN FOR", "EXPLAIN FOR CONNECTION", "EXPLAIN"
	Plan         string `json:"plan"`   // as the server printed it (JSON or tabular text)
	ExecUS       int64  `json:"exec_us,omitempty"`
	RowsExamined int64  `json:"rows_examined,omitempty"`
}

// AddPlan stores one plan.
func (s *Store) AddPlan(ctx context.Context, p Plan) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO plans (run_id, t_us, conn_id, digest, digest_text, source, plan,
 exec_us, rows_examined) VALUES (?,?,?,?,?,?,?,?,?)`,
		p.RunID, p.TimeUS, int64(p.ConnID), p.Digest, p.DigestText, p.Source, p.Plan, p.ExecUS, p.RowsExamined)
	if err != nil {
		return fmt.Errorf("storing plan: %w", err)
	}
	return nil
}

// Plans returns the plans q selects, in time order.
func (s *Store) Plans(ctx context.Context, q Query) ([]Plan, error) {
	where, args := q.where("t_us")
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, t_us, conn_id, digest, digest_text, source, plan, exec_us,
 rows_examined FROM plans`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("reading plans: %w", err)
	}
	defer rows.Close()
	var out []Plan
	for rows.Next() {
		var p Plan
		var conn int64
		if err := rows.Scan(&p.RunID, &p.TimeUS, &conn, &p.Digest, &p.DigestText, &p.Source, &p.Plan, &p.ExecUS, &p.RowsExamined); err != nil {
			return nil, fmt.Errorf("reading plans: %w", err)
		}
		p.ConnID = uint64(conn)
		out = append(out, p)
	}
	return out, rows.Err()
}
