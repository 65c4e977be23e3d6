package lab

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/gapscope/gapscope/internal/probe"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestConcurrencyFindsThePoolCap is issue 6's acceptance test: on the
// thread pool the knee lies within ±20% of the cap and is tied to
// thread_pool_max_threads; the same ramp on one thread per connection
// yields no knee tied to a setting.
func TestConcurrencyFindsThePoolCap(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	if !sandbox.Available() {
		t.Fatal("no mariadbd installed")
	}
	o := ConcurrencyOptions{}
	if testing.Verbose() {
		o.Progress = os.Stderr
	}
	r, ramps, err := Concurrency(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Seen {
		t.Log(s)
	}
	if len(ramps) != 2 {
		t.Fatalf("%d ramps, want pool and control", len(ramps))
	}
	pool, control := ramps[0], ramps[1]
	f := capFinding(pool)
	if f == nil {
		t.Fatalf("pool ramp: no CONCURRENCY_KNEE tied to a setting; knee %+v, findings %+v", pool.Knee, pool.Findings)
	}
	knee, _ := f.Evidence["knee_threads"].(float64)
	capThreads, _ := f.Evidence["cap_threads"].(int64)
	if f.Evidence["cap_variable"] != "thread_pool_max_threads" || capThreads != 8 {
		t.Errorf("pool ramp: tied to %v = %v, want thread_pool_max_threads = 8", f.Evidence["cap_variable"], f.Evidence["cap_threads"])
	}
	if math.Abs(knee-8) > 0.2*8 {
		t.Errorf("pool ramp: knee at %.1f threads, want 8±20%%", knee)
	}
	if g := capFinding(control); g != nil {
		t.Errorf("control ramp: knee tied to %v: %s", g.Evidence["cap_variable"], g.Summary)
	}
	for _, rp := range ramps {
		if len(rp.Series.Points) != 2*16 {
			t.Errorf("%s: %d points, want 32", rp.Name, len(rp.Series.Points))
		}
	}
	for _, f := range r.Findings {
		if f.Code != probe.CodeConcurrencyKnee || f.Evidence["ramp"] == nil {
			t.Errorf("finding without its ramp: %+v", f)
		}
	}
}

// capFinding returns the ramp's knee finding tied to a configured cap.
func capFinding(rp ConcurrencyRamp) *struct {
	Evidence map[string]any
	Summary  string
} {
	for _, f := range rp.Findings {
		if f.Code == probe.CodeConcurrencyKnee && f.Evidence["cap_config"] == true {
			return &struct {
				Evidence map[string]any
				Summary  string
			}{f.Evidence, f.Summary}
		}
	}
	return nil
}
