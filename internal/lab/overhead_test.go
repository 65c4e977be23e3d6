package lab

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/overhead"
)

// TestOverheadLab runs `lab overhead` with tiny rounds and checks the
// shape of what users get: one table row per setting in order, every round
// paired, a verdict for each, findings only for costs above noise, the
// watch really watching, and the settings restored. Throughput numbers are
// not asserted: they belong to benchmarks, not tests.
func TestOverheadLab(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Overhead(ctx, OverheadOptions{Rounds: 2, Duration: time.Second, Warmup: -1, Tables: 1, Rows: 1000, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Scenario   string            `json:"scenario"`
		Table      []overhead.Row    `json:"table"`
		Rounds     []overhead.Round  `json:"rounds"`
		Findings   []json.RawMessage `json:"findings"`
		Statements []json.RawMessage `json:"statements"`
		Restored   bool              `json:"restored"`
		Method     string            `json:"method"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	names := strings.Split(OverheadConfigs, ",")
	if out.Scenario != "overhead" || !out.Restored || out.Method == "" || out.Statements == nil || out.Findings == nil {
		t.Fatalf("lab fields: %s", b)
	}
	checkTable(t, out.Table, names)
	checkRotation(t, out.Rounds, names, 2)
	checkCostFindings(t, res)
	if res.Overhead.WatchStatements == 0 {
		t.Errorf("gapscope-watch rounds saw no statements: the watch did not watch (notes %v)", res.Overhead.Notes)
	}
}

func checkTable(t *testing.T, table []overhead.Row, names []string) {
	t.Helper()
	if len(table) != len(names) {
		t.Fatalf("%d table rows, want %d", len(table), len(names))
	}
	verdicts := []string{overhead.VerdictYes, overhead.VerdictNo, overhead.VerdictUnknown}
	for i, r := range table {
		if r.Config != names[i] || r.Rounds != 2 || r.TPS <= 0 || r.TPSMin > r.TPS || r.TPS > r.TPSMax || r.LatP95MS <= 0 {
			t.Errorf("row %d: %+v", i, r)
		}
		if i == 0 {
			if r.AboveNoise != overhead.VerdictBaseline || r.Ratio != 1 {
				t.Errorf("baseline row %+v", r)
			}
			continue
		}
		if r.Pairs != 2 || !(r.RatioLow <= r.Ratio && r.Ratio <= r.RatioHigh) || r.RatioLow <= 0 || !slices.Contains(verdicts, r.AboveNoise) {
			t.Errorf("row %s: pairs %d, x%.3f [%.3f, %.3f], verdict %q", r.Config, r.Pairs, r.Ratio, r.RatioLow, r.RatioHigh, r.AboveNoise)
		}
	}
}

// checkRotation: rounds ran A B C ... A B C ..., each with its position.
func checkRotation(t *testing.T, rounds []overhead.Round, names []string, n int) {
	t.Helper()
	if len(rounds) != n*len(names) {
		t.Fatalf("%d rounds, want %d", len(rounds), n*len(names))
	}
	for i, r := range rounds {
		if r.Config != names[i%len(names)] || r.Position != i%len(names) || r.Index != i/len(names) {
			t.Errorf("round %d = %s (position %d, rotation %d): out of rotation", i, r.Config, r.Position, r.Index)
		}
	}
}

// checkCostFindings: exactly the rows with a cost above noise have an
// INSTRUMENTATION_COST finding, whose evidence carries the row's numbers.
func checkCostFindings(t *testing.T, res *OverheadResult) {
	t.Helper()
	want := 0
	for _, r := range res.Table {
		if r.AboveNoise == overhead.VerdictYes && r.Ratio < 1 {
			want++
		}
	}
	if len(res.Findings) != want {
		t.Fatalf("%d findings for %d costs above noise", len(res.Findings), want)
	}
	for _, f := range res.Findings {
		ev := evidence(t, f)
		row := rowOf(res.Table, ev["config"])
		if f.Code != "INSTRUMENTATION_COST" || row == nil || ev["ratio"] != row.Ratio || ev["ratio_low"] != row.RatioLow || ev["ratio_high"] != row.RatioHigh {
			t.Errorf("finding %+v does not match its row %+v", f, row)
		}
	}
}

func rowOf(table []overhead.Row, config any) *overhead.Row {
	for i := range table {
		if table[i].Config == config {
			return &table[i]
		}
	}
	return nil
}
