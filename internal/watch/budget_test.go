package watch

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// govRun feeds a governor one window per share (1 s each on 2 CPUs) and
// returns the sample after each window.
func govRun(g *governor, cur uint16, rate float64, shares ...float64) []uint16 {
	return govRunFollowing(g, cur, func(n uint16) float64 { return rate / float64(n) }, shares...)
}

func govRunFollowing(g *governor, cur uint16, followed func(uint16) float64, shares ...float64) []uint16 {
	g.cpus = 2
	now, cpu := g.lastAt, g.lastCPU
	var out []uint16
	for _, s := range shares {
		now = now.Add(time.Second)
		cpu += time.Duration(s * 2 * float64(time.Second))
		cur = g.observe(now, cpu, cur, followed)
		out = append(out, cur)
	}
	return out
}

func TestGovernorCutsInProportionAndSettles(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	// window 1 settles the start; 2: 8.5% is far over 1%: cut by 8 at
	// once (ceil-pow2 of 8.5 is 16, capped at 8); the next windows carry
	// the backlog of the full capture and decide nothing.
	got := govRun(g, 1, 7000, 0.085, 0.085, 0.03, 0.03, 0.03, 0.03, 0.03, 0.012, 0.012)
	want := []uint16{1, 8, 8, 8, 8, 8, 8, 8, 16}
	if !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	if len(g.steps) != 2 || g.steps[0].Sample != 8 || g.steps[0].CPUShare < 0.084 {
		t.Errorf("steps %+v", g.steps)
	}
}

func TestGovernorWaitsForTwoWindowsJustOver(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	got := govRun(g, 1, 7000, 0, 0.015, 0.009, 0.015, 0.015)
	if want := []uint16{1, 1, 1, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v (one window over, then under, does not cut)", got, want)
	}
}

func TestGovernorFollowsMoreWhenWellUnder(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	got := govRun(g, 8, 7000, 0, 0.003, 0.003, 0.003, 0.003, 0.003, 0.003, 0.003, 0.005, 0.003, 0.003)
	// 3 windows under 0.4% halve the sample; one more settles the change;
	// 0.5% is not well under: the count starts again.
	if want := []uint16{8, 8, 8, 4, 4, 4, 4, 2, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
}

func TestGovernorKeepsAFloorOfStatementsFollowed(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	// 1,000 statements/s: 1 in 4 still follows 250/s, 1 in 8 only 125.
	got := govRun(g, 1, 1000, 0, 0.08, 0, 0, 0, 0, 0.05, 0.05)
	if last := got[len(got)-1]; last != 4 {
		t.Fatalf("samples %v: want a floor at 1 in 4", got)
	}
	if !g.floored {
		t.Error("over budget at the floor, not recorded")
	}
	note := g.note(time.Unix(1000, 0).UnixMicro(), time.Unix(1010, 0).UnixMicro())
	for _, w := range []string{"--cpu-budget 1% of 2 CPUs", "down to 1 in 4", "stayed over its budget"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q lacks %q", note, w)
		}
	}
}

// A cut that would leave no connection followed is not made, however
// busy the server: 8 connections whose ports fall in a 1-in-8 sample once
// and in no 1-in-16 sample.
func TestGovernorNeverFollowsNothing(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	followed := func(n uint16) float64 {
		if n >= 16 {
			return 0
		}
		return 7000 / 8 // one connection of eight
	}
	got := govRunFollowing(g, 1, followed, 0, 0.06, 0, 0, 0, 0, 0, 0.03, 0.03)
	if want := []uint16{1, 8, 8, 8, 8, 8, 8, 8, 8}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	if !g.floored {
		t.Error("over budget at the floor, not recorded")
	}
}

func TestGovernorQuietRunSaysNothing(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	if got := govRun(g, 1, 500, 0, 0.002, 0.004, 0.001); !slices.Equal(got, []uint16{1, 1, 1, 1}) {
		t.Fatalf("samples %v", got)
	}
	if n := g.note(0, 1); n != "" {
		t.Errorf("note %q on a run the budget never touched", n)
	}
}

func TestCeilPow2(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want uint32
	}{{0.5, 1}, {1, 1}, {1.01, 2}, {2, 2}, {3, 4}, {8.5, 16}, {1e9, 1 << 16}} {
		if got := ceilPow2(c.x); got != c.want {
			t.Errorf("ceilPow2(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

func TestStartSample(t *testing.T) {
	perConn := func(rate float64, conns int) func(uint16) float64 {
		return func(n uint16) float64 { return rate / float64(n) }
	}
	for _, c := range []struct {
		name     string
		rate     float64
		budget   float64
		followed func(uint16) float64
		want     uint16
	}{
		{"quiet server: every connection", 1000, 0.01, perConn(1000, 64), 1},
		{"unknown rate: every connection", 30000, 0.01, nil, 1},
		{"30k/s on 2 CPUs: 12.5% estimated, 1 in 16", 30000, 0.01, perConn(30000, 64), 16},
		{"no budget", 30000, 0, perConn(30000, 64), 1},
		{"few connections: keep one followed", 30000, 0.01, func(n uint16) float64 {
			switch {
			case n == 1:
				return 30000
			case n >= 8:
				return 0
			}
			return 30000 / 4
		}, 4},
	} {
		if got := startSample(c.budget, 2, c.followed); got != c.want {
			t.Errorf("%s: start at 1 in %d, want %d", c.name, got, c.want)
		}
	}
}

// A load that starts after watch is cut by its rate in the first window
// that shows it, before watch's CPU does, and as deep as the rate calls for
// (not maxCutFactor at a time); the measured windows go on from there.
func TestGovernorCutsWhenTheRateJumps(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	rate := 0.0
	followed := func(n uint16) float64 { return rate / float64(n) }
	var got []uint16
	cur := uint16(1)
	for i, share := range []float64{0.002, 0.002, 0.002, 0.05, 0.03, 0.03, 0.02, 0.02, 0.02, 0.02, 0.004} {
		if i == 2 {
			rate = 30000 // 12.5% of 2 CPUs estimated for every connection
		}
		cur = govRunFollowing(g, cur, followed, share)[0]
		got = append(got, cur)
	}
	// window 3: the rate shows, 1 in 16 at once (ceil-pow2 of 12.45); five
	// windows settle the backlog; then two windows at 2% cut to 32.
	if want := []uint16{1, 1, 16, 16, 16, 16, 16, 16, 16, 32, 32}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	if len(g.steps) != 2 || !g.steps[0].ByRate || g.steps[1].ByRate {
		t.Errorf("steps %+v: want the first by rate, the second by CPU", g.steps)
	}
	// At 1 in 16 the rate no longer calls for a cut: 1,875/s is 0.78%.
	if next := g.feedForward(16, followed); next != 16 {
		t.Errorf("feed-forward at 1 in 16: %d", next)
	}
}

func TestBudgetProcs(t *testing.T) {
	for _, c := range []struct {
		budget float64
		cpus   int
		want   int
	}{
		{0.01, 2, 1}, {0.01, 49, 1}, {0.01, 64, 2}, {0.25, 8, 4}, {1, 8, 8}, {0, 16, 16}, {0.01, 1, 1}, {0.01, 0, 1},
	} {
		if got := BudgetProcs(c.budget, c.cpus); got != c.want {
			t.Errorf("BudgetProcs(%g, %d) = %d, want %d", c.budget, c.cpus, got, c.want)
		}
	}
}
