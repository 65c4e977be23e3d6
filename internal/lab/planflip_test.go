package lab

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gapscope/gapscope/internal/plans"
)

// TestPlanFlip runs the planflip scenario: the finding must carry both
// signatures and both sets of row estimates, the statistics of t, and
// clear once ANALYZE TABLE ... PERSISTENT FOR ALL fixed them.
func TestPlanFlip(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	r, out, err := planFlip(context.Background(), PlanFlipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.flip == nil || out.flip.Code != plans.CodePlanFlip || len(r.Findings) != 1 {
		t.Fatalf("no PLAN_FLIP: %+v", r.Findings)
	}
	ev := out.flip.Evidence
	if ev["usual_signature"] != "u:ref(y) > t:ref(k)" || ev["slow_signature"] != "u:ref(y) > t:ALL" {
		t.Errorf("signatures: usual %v, slow %v", ev["usual_signature"], ev["slow_signature"])
	}
	usual, _ := ev["usual_rows"].(map[string]int64)
	slow, _ := ev["slow_rows"].(map[string]int64)
	if usual["t"] <= 0 || usual["t"] > 100 || slow["t"] < 100_000 || usual["u"] == 0 || slow["u"] == 0 {
		t.Errorf("row estimates: usual %v, slow %v", usual, slow)
	}
	stats, _ := ev["statistics"].([]plans.TableStatistics)
	var sawT bool
	for _, s := range stats {
		if s.Table == "t" {
			sawT = s.AvgFrequency["k"] == 200000 && s.InnoDBRows > 0 && s.Cardinality == 200000
		}
	}
	if !sawT {
		t.Errorf("statistics of t missing or wrong: %+v", stats)
	}
	if out.stats.Cleared == 0 || len(out.afterFix) != 0 {
		t.Errorf("the flip did not clear after ANALYZE TABLE: open %+v, stats %+v", out.afterFix, out.stats)
	}
	if _, ok := r.Marked["slow"]; !ok || r.Marked["slow"].ClientUS <= r.Marked["fast"].ClientUS {
		t.Errorf("slow %v vs fast %v", r.Marked["slow"].ClientUS, r.Marked["fast"].ClientUS)
	}
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("lab result does not encode: %v", err)
	}
}
