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

// TestOverheadLab runs `lab overhead` as users get it, a little shorter,
// and checks the two costs the overhead case is about: every instrument
// and consumer on, set at startup as in my.cnf (ps-all), and
// optimizer_trace both stand above the noise as INSTRUMENTATION_COST
// (or, on a host too busy to resolve them, are undecided: see
// checkCostFound), with
// the runtime form of ps-all in the table beside the startup one. Beyond
// that, the shape: one row per setting in order with how it was applied,
// every rotation led or closed by the baseline, rows paired, findings only
// for costs above noise, the watch really watching, settings restored.
func TestOverheadLab(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Overhead(ctx, OverheadOptions{Duration: 4 * time.Second, Warmup: time.Second, TimeLimit: 180 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Seen {
		t.Log(s)
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
	checkRotation(t, out.Rounds, names)
	checkCostFindings(t, res)
	for _, want := range []string{"ps-all", "optimizer-trace"} {
		checkCostFound(t, res, want)
	}
	if res.Overhead.WatchStatements == 0 {
		t.Errorf("gapscope-watch rounds saw no statements: the watch did not watch (notes %v)", res.Overhead.Notes)
	}
}

// undecidedLow: an undecided row whose interval reaches below it (a cost
// of 5% or more is still possible) is a truthful "cannot tell"; one whose
// interval stays above it would have ruled the cost out.
const undecidedLow = 0.95

// checkCostFound: the lab finds the cost of config as INSTRUMENTATION_COST.
// On a host so busy that the rounds' noise hides it (seen here at load
// average 27-44 from other work: paired ratios of one setting x0.24-x5.7)
// the truthful answer is "noise too high to tell" with an interval that
// still allows the cost; "no cost", or an undecided interval that rules
// the cost out, fails.
func checkCostFound(t *testing.T, res *OverheadResult, config string) {
	t.Helper()
	row := rowOf(res.Table, config)
	switch {
	case hasCost(res, config):
	case row != nil && row.AboveNoise == overhead.VerdictUnknown && row.RatioLow > 0 && row.RatioLow < undecidedLow:
		// Undecided, its interval still holding a cost of 5% or more: the
		// truthful "noise too high to tell", not a false "no cost". A CI
		// run on a quiet host gave x0.937 [x0.848-x1.036] for ps-all.
		t.Logf("%s undecided: x%.3f [x%.3f–x%.3f] over %d pairs (the interval allows the cost; interval/resolution x%.2f)",
			config, row.Ratio, row.RatioLow, row.RatioHigh, row.Pairs, row.RatioHigh/row.RatioLow)
	default:
		t.Errorf("no INSTRUMENTATION_COST for %s: %+v", config, row)
	}
}

func hasCost(res *OverheadResult, config string) bool {
	for _, f := range res.Findings {
		if f.Code == "INSTRUMENTATION_COST" && f.Evidence["config"] == config {
			return true
		}
	}
	return false
}

// wantApplied is how the lab applies each setting.
var wantApplied = map[string]string{"ps-off": "startup", "ps-default": "startup", "ps-all": "startup",
	"ps-all-runtime": "runtime", "optimizer-trace": "runtime", "gapscope-watch": "runtime"}

func checkTable(t *testing.T, table []overhead.Row, names []string) {
	t.Helper()
	if len(table) != len(names) {
		t.Fatalf("%d table rows, want %d", len(table), len(names))
	}
	verdicts := []string{overhead.VerdictYes, overhead.VerdictNo, overhead.VerdictUnknown}
	for i, r := range table {
		if r.Config != names[i] || r.Rounds < 3 || r.TPS <= 0 || r.TPSMin > r.TPS || r.TPS > r.TPSMax || r.LatP95MS <= 0 ||
			r.Applied != wantApplied[r.Config] || r.Understates {
			t.Errorf("row %d: %+v", i, r)
		}
		if i == 0 {
			if r.AboveNoise != overhead.VerdictBaseline || r.Ratio != 1 {
				t.Errorf("baseline row %+v", r)
			}
			continue
		}
		if r.Pairs != r.Rounds || !(r.RatioLow <= r.Ratio && r.Ratio <= r.RatioHigh) || r.RatioLow <= 0 || !slices.Contains(verdicts, r.AboveNoise) ||
			!(r.LatAvgLowMS > 0 && r.LatAvgLowMS <= r.LatAvgHighMS && r.LatP95LowMS > 0 && r.LatP95LowMS <= r.LatP95HighMS) {
			t.Errorf("row %s: pairs %d of %d rounds, x%.3f [%.3f, %.3f], verdict %q, latency intervals %+v", r.Config, r.Pairs, r.Rounds, r.Ratio, r.RatioLow, r.RatioHigh, r.AboveNoise, r)
		}
	}
}

// checkRotation: every rotation runs the baseline and its settings in the
// configured order, or reversed; the first three run every setting.
func checkRotation(t *testing.T, rounds []overhead.Round, names []string) {
	t.Helper()
	byRotation := map[int][]overhead.Round{}
	for _, r := range rounds {
		byRotation[r.Index] = append(byRotation[r.Index], r)
		if names[r.Position] != r.Config {
			t.Errorf("round %+v: position %d is %s", r, r.Position, names[r.Position])
		}
	}
	for i := range len(byRotation) {
		rs := byRotation[i]
		pos := make([]int, len(rs))
		for j, r := range rs {
			pos[j] = r.Position
		}
		if i%2 == 1 {
			slices.Reverse(pos)
		}
		if !slices.IsSorted(pos) || len(pos) == 0 || pos[0] != 0 || (i < 3 && len(pos) != len(names)) {
			t.Errorf("rotation %d ran positions %v", i, pos)
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
