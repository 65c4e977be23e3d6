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
	c, ok := govClocks[g]
	if !ok { // windows shorter than a duty cycle leave lastAt behind: the clock runs on here
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
// busy the server: 8 connections whose ports fall in a 1-in-2 (and up to
// 1-in-8) sample once and in no 1-in-16 sample. Over budget at that floor,
// the governor follows it part of the time instead.
func TestGovernorNeverFollowsNothing(t *testing.T) {
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
	// 6% cuts by 8, but 1 in 2 already leaves that one connection alone.
	got := govRunFollowing(g, 1, followed, 0, 0.06, 0, 0, 0, 0, 0, 0.03, 0.03)
	if want := []uint16{1, 2, 2, 2, 2, 2, 2, 2, 2}; !slices.Equal(got, want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	// 3% at the floor: followed 1 s in 4 (875/s over 4 is still ≥ minFollowed).
	if g.dutyShift != 2 || g.floored || g.steps[len(g.steps)-1].Cycle != 4 {
		t.Errorf("at the floor: shift %d, floored %v, steps %+v; want 1 s in 4", g.dutyShift, g.floored, g.steps)
	}
}

// govPhase feeds windows at share until the governor's duty shift is want
// (or max windows pass); it returns the windows fed.
func govPhase(t *testing.T, g *governor, cur *uint16, followed func(uint16) float64, share float64, want uint8, maxWindows int) int {
	t.Helper()
	for i := 1; i <= maxWindows; i++ {
		*cur = govRunFollowing(g, *cur, followed, share)[0]
		if g.dutyShift == want {
			return i
		}
	}
	t.Fatalf("at %.1f%%: shift %d after %d windows, want %d (steps %+v)", 100*share, g.dutyShift, maxWindows, want, g.steps)
	return 0
}

// At the floor (one connection of a saturated server's eight), the duty
// cycle lengthens while over budget, up to maxDutyShift and then the run
// is floored; well under budget it shortens again before the sample
// follows more connections.
func TestGovernorPausesAtTheFloor(t *testing.T) {
	followed := func(n uint16) float64 { return 38000 / float64(min(n, 8)) }
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	cur := uint16(8)
	// settle, then two windows at 2%: 1 s in 2 (1 in 16 would cut nothing).
	if n := govPhase(t, g, &cur, followed, 0.02, 1, 3); n != 3 || cur != 8 {
		t.Fatalf("first duty cycle after %d windows at 1 in %d; want 3 windows, 1 in 8", n, cur)
	}
	// 1.2%: windows now span 2 s, and the cut settles 5 s first.
	govPhase(t, g, &cur, followed, 0.012, 2, 20)
	// far over: up to 1 s in 16, then floored.
	govPhase(t, g, &cur, followed, 0.05, maxDutyShift, 40)
	for i := 0; i < 40 && !g.floored; i++ { // a 16 s window settles, the next judges
		cur = govRunFollowing(g, cur, followed, 0.05)[0]
	}
	if !g.floored || cur != 8 {
		t.Errorf("over budget at 1 s in 16: floored %v, 1 in %d", g.floored, cur)
	}
	// well under: the cycle shortens step by step, the sample unchanged.
	govPhase(t, g, &cur, followed, 0.002, maxDutyShift-1, 200)
	if cur != 8 {
		t.Errorf("shortening the cycle changed the sample to 1 in %d", cur)
	}
	note := g.note(time.Unix(1000, 0).UnixMicro(), time.Unix(1300, 0).UnixMicro())
	if !strings.Contains(note, "1 s in every 16 s") {
		t.Errorf("note %q does not name the longest cycle", note)
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

// A duty cycle over every connection (one connection, busier than the
// budget) says so without "1 in 1".
func TestGovernorNoteOnACycleAlone(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	g.start(time.Unix(1000, 0), 1, 2, 0.03)
	note := g.note(time.Unix(1000, 0).UnixMicro(), time.Unix(1010, 0).UnixMicro())
	if !strings.Contains(note, "to stay within it watch followed every connection only 1 s in every 4 s") || strings.Contains(note, "1 in 1") {
		t.Errorf("note %q", note)
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
	// oneOfEight: a 1-in-n sample keyed on one connection of eight follows
	// it alone from n = 8 on.
	oneOfEight := func(rate float64) func(uint16) float64 {
		return func(n uint16) float64 { return rate / float64(min(n, 8)) }
	}
	for _, c := range []struct {
		name      string
		rate      float64
		budget    float64
		followed  func(uint16) float64
		want      uint16
		wantShift uint8
	}{
		{"quiet server: every connection", 1000, 0.01, perConn(1000, 64), 1, 0},
		{"unknown rate: every connection", 30000, 0.01, nil, 1, 0},
		{"30k/s on 2 CPUs: 12.5% estimated, 1 in 16", 30000, 0.01, perConn(30000, 64), 16, 0},
		{"no budget", 30000, 0, perConn(30000, 64), 1, 0},
		{"few connections: keep one followed, 3.1% estimated: 1 s in 4", 30000, 0.01, func(n uint16) float64 {
			switch {
			case n == 1:
				return 30000
			case n >= 8:
				return 0
			}
			return 30000 / 4
		}, 2, 2},
		// sysbench's 8 threads at 38k/s: one connection is 4,750/s, 2% estimated.
		{"one connection over budget: 1 s in 2", 38000, 0.01, oneOfEight(38000), 8, 1},
		// 1 s in 4 would leave 187/s followed on average: under minFollowed.
		{"duty cycle keeps minFollowed", 6000, 0.001, oneOfEight(6000), 8, 1},
	} {
		got, shift := startSample(c.budget, 2, c.followed)
		if got != c.want || shift != c.wantShift {
			t.Errorf("%s: start at 1 in %d, shift %d; want 1 in %d, shift %d", c.name, got, shift, c.want, c.wantShift)
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
	if next, shift := g.feedForward(16, followed); next != 16 || shift != 0 {
		t.Errorf("feed-forward at 1 in 16: %d, shift %d", next, shift)
	}
}

// A load that starts after watch and that even the floor's sample cannot
// follow within budget starts a duty cycle by its rate, with the cut.
func TestGovernorPausesWhenTheRateJumpsAtTheFloor(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	rate := 0.0
	followed := func(n uint16) float64 { return rate / float64(min(n, 8)) }
	cur := govRunFollowing(g, 1, followed, 0.002)[0]
	rate = 38000 // one connection of eight: 4,750/s, 2% estimated
	cur = govRunFollowing(g, cur, followed, 0.002)[0]
	if cur != 8 || g.dutyShift != 1 || len(g.steps) != 1 || !g.steps[0].ByRate || g.steps[0].Cycle != 2 {
		t.Errorf("after the jump: 1 in %d, shift %d, steps %+v; want 1 in 8, 1 s in 2, by rate", cur, g.dutyShift, g.steps)
	}
}

// The rate's cut does not wait for a window long enough to judge watch's
// CPU: a load that starts just after a window began is cut at once.
func TestGovernorCutsByRateInAShortWindow(t *testing.T) {
	g := newGovernor(0.01, time.Unix(1000, 0), 0)
	rate := 30000.0
	followed := func(n uint16) float64 { return rate / float64(n) }
	if got := g.observe(time.Unix(1000, 300_000_000), 0, 1, followed); got != 16 || len(g.steps) != 1 || !g.steps[0].ByRate {
		t.Fatalf("300 ms into a window at 30k/s: 1 in %d, steps %+v; want 1 in 16 by rate", got, g.steps)
	}
	if g.lastAt != time.Unix(1000, 300_000_000) {
		t.Errorf("the cut does not start a new window: last at %v", g.lastAt)
	}
	rate = 0
	if got := g.observe(time.Unix(1000, 400_000_000), 0, 16, followed); got != 16 || len(g.steps) != 1 {
		t.Errorf("a short window without a rate's cut decided: 1 in %d, steps %+v", got, g.steps)
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
