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
// optimizer_trace both stand above the noise as INSTRUMENTATION_COST,
// with the runtime form of ps-all in the table beside the startup one.
// The verdicts are decided on transactions per CPU second of the server
// and gapscope, which other load on this shared host moves little (its
// TPS varied x0.5-x1.5 within one setting while CPU per transaction held
// within ±6%). Beyond that, the shape: one row per setting in order with
// how it was applied, every rotation led or closed by the baseline, rows
// paired, findings only for costs above noise, the watch really watching,
// settings restored.
func TestOverheadLab(t *testing.T) {
	skipShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// 200 s of rotations: with 180 s, and ps-default's rotations not yet
	// left out, one run in five ended with ps-all undecided after 5 pairs
	// (x0.929 [x0.849–x1.016]); runs take 115-180 s here. A run can still
	// end with a cost undecided when the host's other load spreads its
	// pairs too wide for the time left (x0.58-x1.41 over 3 pairs, in one
	// CI run of four): that is a measurement that did not decide, not one
	// that found no cost, so the lab runs once more. A cost measured and
	// found below the noise still fails.
	var res *OverheadResult
	for attempt := 1; ; attempt++ {
		var err error
		res, err = Overhead(ctx, OverheadOptions{Duration: 4 * time.Second, Warmup: time.Second, TimeLimit: 200 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if attempt == 2 || !slices.ContainsFunc([]string{"ps-all", "optimizer-trace"}, func(c string) bool { return undecided(res, c) }) {
			break
		}
		t.Logf("a cost undecided at the host's noise: running the lab again (%v)", res.Seen)
	}
	for _, s := range res.Seen {
		t.Log(s)
	}
	for _, r := range res.Rounds {
		t.Logf("rotation %d %s (%s): %.0f TPS, CPU %.3f ms/tx", r.Index+1, r.Config, r.Applied, r.TPS, float64(r.CPUPerTx)/1e6)
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

// checkCostFound: the lab finds the cost of config as INSTRUMENTATION_COST.
func checkCostFound(t *testing.T, res *OverheadResult, config string) {
	t.Helper()
	if row := rowOf(res.Table, config); !hasCost(res, config) {
		t.Errorf("no INSTRUMENTATION_COST for %s: %+v", config, row)
	}
}

// undecided: config's cost was neither found nor ruled out, the host's
// noise too high to tell within the lab's time.
func undecided(res *OverheadResult, config string) bool {
	row := rowOf(res.Table, config)
	return !hasCost(res, config) && row != nil && row.AboveNoise == overhead.VerdictUnknown
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
			r.Applied != wantApplied[r.Config] || r.Understates || r.CPUPerTxMS <= 0 {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.Config == "ps-all-runtime" && (i == 0 || table[i-1].Config != "ps-all") {
			t.Errorf("ps-all-runtime is row %d, not beside ps-all", i)
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
		if r.VerdictOn != overhead.VerdictOnCapacity || !(r.CapacityLow > 0 && r.CapacityLow <= r.Capacity && r.Capacity <= r.CapacityHigh) {
			t.Errorf("row %s: verdict on %q, capacity x%.3f [%.3f, %.3f]: a sandbox's CPU is measured in every round", r.Config, r.VerdictOn, r.Capacity, r.CapacityLow, r.CapacityHigh)
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
		if x, _, _ := r.Decided(); r.AboveNoise == overhead.VerdictYes && x < 1 {
			want++
		}
	}
	if len(res.Findings) != want {
		t.Fatalf("%d findings for %d costs above noise", len(res.Findings), want)
	}
	for _, f := range res.Findings {
		ev := evidence(t, f)
		row := rowOf(res.Table, ev["config"])
		if f.Code != "INSTRUMENTATION_COST" || row == nil || ev["ratio"] != row.Ratio || ev["ratio_low"] != row.RatioLow || ev["ratio_high"] != row.RatioHigh ||
			ev["capacity"] != row.Capacity || ev["capacity_low"] != row.CapacityLow || ev["capacity_high"] != row.CapacityHigh || ev["verdict_on"] != row.VerdictOn {
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
