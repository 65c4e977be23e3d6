package store

import (
	"context"
	"fmt"
)

// OverheadRow is one measured round of `gapscope overhead`: the workload's
// throughput and latency under one instrumentation setting. Rows of one run
// with the same Round ran back to back and are compared as a pair;
// Position 0 is the baseline.
type OverheadRow struct {
	RunID    int64   `json:"run_id"`
	TimeUS   int64   `json:"t"`
	Config   string  `json:"config"`
	Position int     `json:"position"`
	Round    int     `json:"round"`
	TPS      float64 `json:"tps"`
	QPS      float64 `json:"qps"`
	LatAvgUS int64   `json:"lat_avg_us"`
	LatP95US int64   `json:"lat_p95_us"`
	Errors   int64   `json:"errors"`
	// CPUPerTxNS is the round's CPU per transaction (0: not measured).
	CPUPerTxNS int64 `json:"cpu_per_tx_ns"`
}

// AddOverhead stores one round (one every few seconds at most: no batching).
func (s *Store) AddOverhead(ctx context.Context, r OverheadRow) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO overhead (run_id, t_us, config, position, round, tps, qps, lat_avg_us,
 lat_p95_us, errors, cpu_per_tx_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		r.RunID, r.TimeUS, r.Config, r.Position, r.Round, r.TPS, r.QPS, r.LatAvgUS, r.LatP95US, r.Errors, r.CPUPerTxNS)
	if err != nil {
		return fmt.Errorf("storing overhead round: %w", err)
	}
	return nil
}

// OverheadRows returns the rounds of run runID in rotation order (round,
// then position); runID 0 selects the latest run that has any.
func (s *Store) OverheadRows(ctx context.Context, runID int64) ([]OverheadRow, error) {
	if runID == 0 {
		if err := s.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(run_id), 0) FROM overhead").Scan(&runID); err != nil {
			return nil, fmt.Errorf("reading overhead rounds: %w", err)
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, t_us, config, position, round, tps, qps, lat_avg_us, lat_p95_us,
 errors, cpu_per_tx_ns FROM overhead WHERE run_id = ? ORDER BY round, position, id`, runID)
	if err != nil {
		return nil, fmt.Errorf("reading overhead rounds: %w", err)
	}
	defer rows.Close()
	var out []OverheadRow
	for rows.Next() {
		var r OverheadRow
		if err := rows.Scan(&r.RunID, &r.TimeUS, &r.Config, &r.Position, &r.Round, &r.TPS, &r.QPS, &r.LatAvgUS,
			&r.LatP95US, &r.Errors, &r.CPUPerTxNS); err != nil {
			return nil, fmt.Errorf("reading overhead rounds: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
