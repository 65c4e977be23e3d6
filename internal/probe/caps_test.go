package probe

import (
	"encoding/json"
	"testing"
)

func TestCapsFromSettings(t *testing.T) {
	pool := map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": "2",
		"thread_pool_oversubscribe": "3", "thread_pool_max_threads": "10", "max_connections": "151",
		"innodb_thread_concurrency": "32"}
	got := map[string]int64{}
	for _, c := range CapsFromSettings(pool, 4) {
		got[c.Variable] = c.Threads
		if c.Formula == "" || c.Config != (c.Variable != CapCPU) {
			t.Errorf("cap %+v", c)
		}
	}
	want := map[string]int64{CapPoolActive: 8, "thread_pool_max_threads": 8, "innodb_thread_concurrency": 32,
		"max_connections": 151, CapCPU: 4}
	if len(got) != len(want) {
		t.Errorf("caps %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	// One thread per connection, innodb_thread_concurrency=0 (no cap),
	// unknown cores: only max_connections.
	caps := CapsFromSettings(map[string]string{"thread_handling": "one-thread-per-connection", "thread_pool_size": "2",
		"innodb_thread_concurrency": "0", "max_connections": "garbage"}, 0)
	if len(caps) != 0 {
		t.Errorf("no caps expected: %+v", caps)
	}
}

func TestMatchCap(t *testing.T) {
	caps := []Cap{{Variable: "a", Threads: 8, Config: true}, {Variable: CapCPU, Threads: 8}, {Variable: "b", Threads: 32, Config: true}, {Variable: "zero"}}
	for _, c := range []struct {
		knee float64
		want string
	}{{8, "a"}, {6.5, "a"}, {9.6, "a"}, {9.7, ""}, {6.3, ""}, {30, "b"}, {38.4, "b"}, {38.5, ""}, {0, ""}} {
		got, ok := MatchCap(c.knee, caps, DefaultTolerance)
		if (c.want == "") == ok || got.Variable != c.want {
			t.Errorf("knee %.1f: %q %v, want %q", c.knee, got.Variable, ok, c.want)
		}
	}
}

func TestKneeFinding(t *testing.T) {
	var x, y []float64
	for _, v := range ramp {
		x, y = append(x, v), append(y, kneeCurve(v, 8, 5000, 0.2))
	}
	k := FitKnee(x, y, KneeOptions{})
	caps := CapsFromSettings(map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": "2",
		"thread_pool_oversubscribe": "1", "thread_pool_max_threads": "10", "max_connections": "151"}, 2)
	f := KneeFinding(k, caps, DefaultTolerance)
	if f == nil || f.Code != CodeConcurrencyKnee || f.Severity != "warning" {
		t.Fatalf("finding %+v", f)
	}
	ev := f.Evidence
	if ev["cap_variable"] != "thread_pool_max_threads" || ev["cap_threads"] != int64(8) || ev["knee_threads"] != 8.0 || ev["cap_config"] != true {
		t.Errorf("evidence %v", ev)
	}
	if _, err := json.Marshal(f); err != nil {
		t.Errorf("finding does not encode: %v", err)
	}
	// The same knee with no cap near it: informational, no cap named.
	f = KneeFinding(k, caps[:1], DefaultTolerance) // pool active cap 4 only
	if f == nil || f.Severity != "info" || f.Evidence["cap_variable"] != nil || f.Evidence["caps_considered"] == nil {
		t.Errorf("uncapped knee: %+v", f)
	}
	// At the CPU count: named, but not a setting.
	f = KneeFinding(k, []Cap{{Variable: CapCPU, Threads: 8, Formula: "8 cores"}}, DefaultTolerance)
	if f == nil || f.Evidence["cap_config"] != false || f.Severity != "info" {
		t.Errorf("CPU knee: %+v", f)
	}
	if KneeFinding(Knee{}, caps, DefaultTolerance) != nil {
		t.Error("a finding without a knee")
	}
	// An exact fit has an infinite F; the knee must still encode.
	if _, err := json.Marshal(k); err != nil {
		t.Errorf("knee does not encode: %v", err)
	}
}
