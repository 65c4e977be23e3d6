package overhead

import (
	"context"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/store"
)

// TableFromStore rebuilds a run's table from its stored rounds
// (store.OverheadRows), for gapscope report: the baseline is position 0,
// ratios and intervals come from Summarize on the paired rounds;
// Row.AboveNoise uses the same words as report.OverheadRow.Verdict.
func TableFromStore(rows []store.OverheadRow, resolution float64) []Row {
	var configs []string
	rounds := make([]Round, 0, len(rows))
	for _, r := range rows {
		if r.Position < 0 || r.Position > 64 {
			continue // not written by this gapscope
		}
		for len(configs) <= r.Position {
			configs = append(configs, "")
		}
		configs[r.Position] = r.Config
		rounds = append(rounds, Round{Config: r.Config, Position: r.Position, Index: r.Round, TPS: r.TPS, QPS: r.QPS,
			LatAvg: time.Duration(r.LatAvgUS) * time.Microsecond, LatP95: time.Duration(r.LatP95US) * time.Microsecond, Errors: r.Errors,
			CPUPerTx: time.Duration(r.CPUPerTxNS)})
	}
	return Summarize(rounds, configs, resolution)
}

// StoredReport rebuilds the overhead table of run (0: the latest overhead
// run) from its stored rounds, as the HTML report shows it.
func StoredReport(ctx context.Context, st *store.Store, run int64) ([]report.OverheadRow, error) {
	rounds, err := st.OverheadRows(ctx, run)
	if err != nil || len(rounds) == 0 {
		return nil, err
	}
	table := TableFromStore(rounds, DefaultResolution)
	out := make([]report.OverheadRow, len(table))
	for i, r := range table {
		out[i] = report.OverheadRow{Config: r.Config, Rounds: r.Rounds, Pairs: r.Pairs, MedianTPS: r.TPS, MinTPS: r.TPSMin,
			MaxTPS: r.TPSMax, Ratio: r.Ratio, RatioLow: r.RatioLow, RatioHigh: r.RatioHigh,
			AvgLatencyUS: r.LatAvgMS * 1000, P95LatencyUS: r.LatP95MS * 1000, Verdict: r.AboveNoise}
	}
	return out, nil
}

// Recorder writes rounds to a store as they complete, so an interrupted
// run keeps what it measured.
type Recorder struct{ rec *store.Recorder }

// Record starts an overhead run in the store at path ("" records nothing)
// against target (no password).
func Record(ctx context.Context, path, target string) (*Recorder, error) {
	rec, err := store.Record(ctx, path, "overhead", target, store.WriterOptions{})
	if err != nil {
		return nil, err
	}
	return &Recorder{rec: rec}, nil
}

// Add stores one round.
func (r *Recorder) Add(x Round) error {
	if !r.rec.On() {
		return nil
	}
	return r.rec.Store().AddOverhead(context.Background(), store.OverheadRow{RunID: r.rec.Run(), TimeUS: x.StartUS, Config: x.Config,
		Position: x.Position, Round: x.Index, TPS: x.TPS, QPS: x.QPS, LatAvgUS: x.LatAvg.Microseconds(),
		LatP95US: x.LatP95.Microseconds(), Errors: x.Errors, CPUPerTxNS: x.CPUPerTx.Nanoseconds()})
}

// Close ends the run with the result's notes. A failure to end it loses
// nothing measured (the rounds are stored), so it is not reported.
func (r *Recorder) Close(res *Result) {
	notes := ""
	if res != nil {
		notes = strings.Join(res.Notes, "; ")
	}
	_ = r.rec.End(notes)
}
