package watch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
)

// govRun feeds a governor one window per share (1 s each on 2 CPUs) and
// returns the sample after each window.
func govRun(g *governor, cur uint16, rate float64, shares ...float64) []uint16 {
	return govRunFollowing(g, cur, func(n uint16) float64 { return rate / float64(n) }, shares...)
}

func govRunFollowing(g *governor, cur uint16, followed func(uint16) float64, shares ...float64) []uint16 {
	g.cpus = 2
	c, ok := govClocks[g]
	if !ok {
		c = govClock{g.lastAt, g.lastCPU}
	}
	var out []uint16
	for _, s := range shares {
		c.now = c.now.Add(time.Second)
		c.cpu += time.Duration(s * 2 * float64(time.Second))
		cur = g.observe(c.now, c.cpu, cur, followed)
		out = append(out, cur)
	}
	govClocks[g] = c
	return out
}

type govClock struct {
	now time.Time
	cpu time.Duration
}

var govClocks = map[*governor]govClock{}

// The budget is an average: on 2 CPUs at 1%, watch may spend 200 ms above
// it (10 s of budget) before it joins fewer connections; then it cuts in
// proportion to how far over the window was, and settles.
func TestGovernorSpendsItsCreditBeforeCutting(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	// 8.5% of 2 CPUs is 170 ms a second against 20 allowed: the credit
	// (200 ms) lasts one window, the second cuts by 8 (8.5 -> 16, capped);
	// five windows settle, then 3% with the credit still spent cuts by 4.
	got := govRun(g, 1, 70000, 0.085, 0.085, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03)
	want := []uint16{1, 8, 8, 8, 8, 8, 8, 32}
	if !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	if len(g.steps) != 2 || g.steps[0].Sample != 8 || g.steps[0].CPUShare < 0.084 {
		t.Errorf("steps %+v", g.steps)
	}
}

// A burst that fits the credit is joined whole: nothing is cut.
func TestGovernorJoinsABurstWhole(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	got := govRun(g, 1, 20000, 0.05, 0.05, 0.002, 0.002, 0.02, 0.002)
	if !slices.Equal(got, []uint16{1, 1, 1, 1, 1, 1}) || len(g.steps) != 0 {
		t.Fatalf("samples %v, steps %+v: a burst within the credit was cut", got, g.steps)
	}
}

func TestGovernorJoinsMoreWhenWellUnder(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	got := govRun(g, 8, 7000, 0.003, 0.003, 0.003, 0.003, 0.003, 0.003, 0.003, 0.005, 0.003, 0.003)
	// 3 windows under 0.4% halve the sample; one more settles the change;
	// 0.5% is not well under: the count starts again.
	if want := []uint16{8, 8, 4, 4, 4, 4, 2, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
}

func TestGovernorKeepsAFloorOfStatementsJoined(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	// 1,000 statements/s: 1 in 4 still joins 250/s, 1 in 8 only 125.
	got := govRun(g, 1, 1000, 0.2, 0.2, 0, 0, 0, 0, 0, 0.2, 0.2)
	if last := got[len(got)-1]; last != 4 {
		t.Fatalf("samples %v: want a floor at 1 in 4", got)
	}
	if !g.floored {
		t.Error("over budget at the floor, not recorded")
	}
	note := g.note(time.Unix(1000, 0).UnixMicro(), time.Unix(1010, 0).UnixMicro())
	for _, w := range []string{"--cpu-budget 1% of 2 CPUs", "down to 1 in 4", "stayed over its budget", "every statement was still captured and counted"} {
		if !strings.Contains(note, w) {
			t.Errorf("note %q lacks %q", note, w)
		}
	}
}

// A cut that would leave no connection joined is not made, however busy
// the server: 8 connections whose ports fall in a 1-in-2 (and up to
// 1-in-8) sample once and in no 1-in-16 sample.
func TestGovernorNeverJoinsNothing(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	followed := func(n uint16) float64 {
		switch {
		case n == 1:
			return 7000
		case n >= 16:
			return 0
		}
		return 7000 / 8 // one connection of eight
	}
	// 20% spends the credit at once and cuts by 8, but 1 in 2 already
	// leaves that one connection alone.
	got := govRunFollowing(g, 1, followed, 0.2, 0, 0, 0, 0, 0, 0.2, 0.2)
	if want := []uint16{2, 2, 2, 2, 2, 2, 2, 2}; !slices.Equal(got, want) {
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

// The debt is bounded like the credit: an hour far over budget at the
// sample's floor, then a quiet server, and the sample grows back within a
// minute, not hours.
func TestGovernorDebtIsBounded(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	over := make([]float64, 3600)
	for i := range over {
		over[i] = 0.2 // 20x the budget, whatever the sample
	}
	got := govRun(g, 1, 1e9, over...)
	cut := got[len(got)-1]
	if cut <= 1 {
		t.Fatalf("an hour at 20x the budget left the sample at 1 in %d", cut)
	}
	quiet := govRun(g, cut, 1e9, make([]float64, 60)...)
	if back := quiet[len(quiet)-1]; back >= cut {
		t.Fatalf("a minute of quiet after an hour over budget: still 1 in %d (was %d), the debt not bounded", back, cut)
	}
}

// The runtime's soft memory limit is the run's goal less the ring the
// capture opened, whichever source: the default AF_PACKET ring leaves
// MemoryLimit, the header-only capture's 32 MiB ring 8 MiB less, no
// capture the whole goal.
func TestMemoryLimitLeavesRoomForTheRing(t *testing.T) {
	for _, tc := range []struct {
		name string
		ring int64
		want int64
	}{
		{"AF_PACKET ring, default", capture.DefaultRingMB << 20, MemoryLimit},
		{"eBPF ring", 32 << 20, MemoryGoal - 32<<20},
		{"no capture", 0, MemoryGoal},
	} {
		if got := MemoryLimitFor(Started{RingBytes: tc.ring}); got != tc.want {
			t.Errorf("%s: limit %d MiB, want %d MiB", tc.name, got>>20, tc.want>>20)
		}
	}
}
