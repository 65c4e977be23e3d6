package watch

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// SampleStep is one change of the connections a budgeted run follows.
type SampleStep struct {
	AtUS   int64  `json:"at_us"`  // wall clock, Unix µs
	Sample uint16 `json:"sample"` // 1 in Sample connections from then on
	// Key picks which 1 in Sample (capture.Sample): the pivot connection's.
	Key uint32 `json:"key,omitempty"`
	// CPUShare is watch's own CPU, as a fraction of the host's CPUs, in the
	// window that led to the change (for the sample a run starts with,
	// what following every connection was estimated to cost).
	CPUShare float64 `json:"cpu_share"`
	// ByRate: the server's statement rate called for the change before
	// watch's CPU showed it (a load that started or jumped).
	ByRate bool `json:"by_rate,omitempty"`
	// Cycle > 1: the sample is followed dutyOn (1 s) in every Cycle
	// seconds, the capture paused the rest of the time (see dutyShift).
	Cycle int `json:"cycle_s,omitempty"`
}

// OwnCost is what watch itself cost the host it ran on.
type OwnCost struct {
	CPUSeconds float64 `json:"cpu_seconds"` // user + system, all threads
	CPUs       int     `json:"cpus"`
	// Share is CPUSeconds over the run's wall time times CPUs.
	Share float64 `json:"share"`
	// Budget is the CPU budget the run kept to (0: none).
	Budget float64      `json:"budget,omitempty"`
	Steps  []SampleStep `json:"sample_steps,omitempty"`
	// FollowedConns of AppConns: the application's connections on the
	// wire that the processlist last listed, and how many of them the
	// sample followed at the end ("1 in 512" says little with 8).
	FollowedConns int `json:"followed_conns,omitempty"`
	AppConns      int `json:"app_conns,omitempty"`
}

// ownCPU is the CPU time this process used so far (user + system).
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Governor tuning. Cutting is quick (two windows over, or one far over)
// because every second over budget is taken from the server's workload;
// following more again is slow and needs a wide margin (halving the sample
// roughly doubles the capture's part of the cost), so the sample does not
// swing back and forth.
const (
	maxBudgetSample = 1024
	// Seconds (windows of about one, without a duty cycle) a change needs
	// to show. After a cut, watch still works off what it captured
	// before: statements waiting up to --max-wait (5 s) for their server
	// rows, a queue behind the tracker. Judged sooner, that backlog passes
	// for the new sample's cost and cuts too deep.
	settleAfterCut  = 5
	settleAfterGrow = 1
	maxCutFactor    = 8
	farOver         = 3   // one window this many budgets over cuts at once
	overWindows     = 2   // windows over budget before a cut
	growBelow       = 0.4 // a window under this fraction of the budget counts towards following more
	underWindows    = 3   // such windows before following twice as many connections
	// minFollowed: no cut below this many of the server's statements per
	// second followed (estimated from the processlist's connections and the
	// server's rate); when watch is over budget with fewer, its cost is not
	// the capture (it says so in the notes).
	minFollowed = 200
	// maxDutyShift bounds the duty cycle at the floor: followed 1 s in 16.
	maxDutyShift = 4
)

// governor keeps watch's own CPU within a share of the host's CPUs by
// choosing which 1 in N connections to follow (N a power of two, so that
// cutting keeps a subset of the connections followed).
type governor struct {
	budget      float64
	cpus        int
	lastCPU     time.Duration
	lastAt      time.Time
	settle      int // windows still to pass before the next decision
	over, under int
	steps       []SampleStep
	floored     bool   // over budget with the sample already at its floor
	key         uint32 // the sample's key, recorded in steps
	// dutyShift: when cutting the sample would leave too few statements
	// followed (minFollowed: the floor), the governor follows the floor's
	// sample part of the time instead, dutyOn in every dutyOn<<dutyShift,
	// with the capture paused (a filter that accepts nothing) in between.
	// Following one connection of a saturated server's eight all the time
	// cost watch 1.5-2% of 2 CPUs against a 1% budget, and the server
	// 5-6% of its transactions, of which a paused capture costs nothing
	// measurable (README, bench-watch-ab with --port 1).
	dutyShift uint8
}

// dutyOn is the followed part of a duty cycle: a whole second of a
// connection's statements, so that what is seen of it are runs of
// consecutive statements, not scattered ones.
const dutyOn = time.Second

// cycle is the duty cycle's period (0: the sample is followed all the time).
func (g *governor) cycle() time.Duration {
	if g == nil || g.dutyShift == 0 {
		return 0
	}
	return dutyOn << g.dutyShift
}

// cycleSeconds is cycle in whole seconds, for SampleStep (0 when none).
func (g *governor) cycleSeconds() int { return int(g.cycle() / time.Second) }

// window is the shortest window observe judges: a whole duty cycle, which
// holds one followed part and its pauses whatever the phase (the poller
// calls it about every second, so a cycle's window can end up to one
// second late).
func (g *governor) window() time.Duration {
	return max(500*time.Millisecond, g.cycle()-250*time.Millisecond)
}

func newGovernor(budget float64, now time.Time, cpu time.Duration) *governor {
	return &governor{budget: budget, cpus: max(runtime.NumCPU(), 1), lastCPU: cpu, lastAt: now, settle: 1}
}

// observe closes a window at now with the process's CPU time cpu and
// returns the sample to follow next: cur when nothing changes. followed
// estimates the server's statements per second a 1-in-n sample would
// follow (nil: unknown).
func (g *governor) observe(now time.Time, cpu time.Duration, cur uint16, followed func(n uint16) float64) uint16 {
	elapsed := now.Sub(g.lastAt)
	share := 0.0 // unknown in a window too short to judge watch's CPU
	if elapsed >= g.window() {
		share = float64(cpu-g.lastCPU) / float64(elapsed) / float64(g.cpus)
	}
	if next, shift := g.feedForward(cur, followed); next > cur || shift > g.dutyShift {
		// The server's rate calls for a cut, even in a short window (a
		// load that just started): the next window starts with it.
		g.lastCPU, g.lastAt = cpu, now
		g.settle, g.over, g.under = settleAfterCut, 0, 0
		g.dutyShift = shift
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: next, Key: g.key, CPUShare: share, ByRate: true, Cycle: g.cycleSeconds()})
		return next
	}
	if elapsed < g.window() {
		return cur // too short to judge; the window goes on
	}
	g.lastCPU, g.lastAt = cpu, now
	if g.settle > 0 {
		// Settling is counted in seconds: a duty cycle's window spans several.
		g.settle -= max(int((elapsed+250*time.Millisecond)/time.Second), 1)
		return cur
	}
	next, shift := g.decide(cur, share, followed)
	if next != cur || shift != g.dutyShift {
		g.settle = settleAfterGrow
		if next > cur || shift > g.dutyShift {
			g.settle = settleAfterCut
		}
		g.dutyShift = shift
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: next, Key: g.key, CPUShare: share, Cycle: g.cycleSeconds()})
	}
	return next
}

// decide applies the policy to one window: the sample to follow and the
// duty cycle's shift. Following more undoes a duty cycle before it halves
// the sample.
func (g *governor) decide(cur uint16, share float64, followed func(n uint16) float64) (uint16, uint8) {
	switch {
	case share > g.budget:
		g.over, g.under = g.over+1, 0
		if g.over < overWindows && share < farOver*g.budget {
			return cur, g.dutyShift
		}
		g.over = 0
		if next := cutSample(cur, share/g.budget, followed); next > cur {
			g.floored = false
			return next, g.dutyShift
		}
		rate := -1.0
		if followed != nil {
			rate = followed(cur)
		}
		shift := dutyCut(g.dutyShift, share/g.budget, rate)
		g.floored = shift == g.dutyShift
		return cur, shift
	case share < growBelow*g.budget && (cur > 1 || g.dutyShift > 0):
		g.under, g.over = g.under+1, 0
		if g.under < underWindows {
			return cur, g.dutyShift
		}
		g.under = 0
		if g.dutyShift > 0 {
			return cur, g.dutyShift - 1
		}
		return cur / 2, 0
	}
	g.over, g.under = 0, 0
	return cur, g.dutyShift
}

// dutyCut lengthens the duty cycle at the floor in proportion to how far
// over budget the window was (within maxCutFactor per step), keeping on
// average minFollowed statements per second followed, rate being what the
// floor's sample follows while on (unknown, < 0: no limit).
func dutyCut(shift uint8, overBy float64, rate float64) uint8 {
	next := shift + uint8(bits.Len32(min(ceilPow2(overBy), maxCutFactor))-1)
	next = min(max(next, shift+1), maxDutyShift)
	for next > shift && rate >= 0 && rate/float64(uint32(1)<<next) < minFollowed {
		next--
	}
	return next
}

// cutSample follows fewer connections, in proportion to how far over the
// budget the window was, within maxCutFactor per step, maxBudgetSample in
// all, and minFollowed statements per second followed: a sample that
// would follow no connection at all measures nothing.
func cutSample(cur uint16, overBy float64, followed func(n uint16) float64) uint16 {
	f := min(ceilPow2(overBy), maxCutFactor)
	next := min(uint32(cur)*max(f, 2), maxBudgetSample)
	for next > uint32(cur) && followed != nil && followed(uint16(next)) < minFollowed {
		next /= 2
	}
	return leastSample(cur, next, followed)
}

// leastSample is the smallest 1 in n, from cur (exclusive) to next, that
// follows as few statements as 1 in next; cur when none follows fewer than
// cur. A sample keyed on the pivot connection follows it at every n: past
// the n that leaves it alone, following 1 in 2n cuts nothing, and the
// governor must not spend its windows finding that out.
func leastSample(cur uint16, next uint32, followed func(n uint16) float64) uint16 {
	if next <= uint32(cur) {
		return cur
	}
	if followed == nil {
		return uint16(next)
	}
	least := followed(uint16(next))
	for next/2 > uint32(cur) && followed(uint16(next/2)) <= least {
		next /= 2
	}
	if least >= followed(cur) {
		return cur
	}
	return uint16(next)
}

// perStatementCPU is what following one statement costs watch (capture,
// decoding, join, profile): 8.3 µs of CPU measured at 20k statements/s
// (README, scripts/bench-watch.sh). It sizes the first sample only; the
// governor corrects it from watch's measured CPU.
const perStatementCPU = 8300 * time.Nanosecond

// startSample is the sample a budgeted run starts with, from the server's
// statement rate: starting with every connection on a busy server would
// cost the budget many times over until the first windows were judged.
// When even the floor's sample is estimated over budget, it starts with
// the duty cycle the estimate calls for (dutyCut).
func startSample(budget float64, cpus int, followed func(n uint16) float64) (uint16, uint8) {
	n := rateSample(1, budget, budget, cpus, followed)
	return n, rateDuty(n, budget, cpus, followed)
}

// rateDuty is the duty cycle's shift that following 1 in n calls for by
// the server's rate: 0 when estimated within budget.
func rateDuty(n uint16, budget float64, cpus int, followed func(n uint16) float64) uint8 {
	if followed == nil || budget <= 0 {
		return 0
	}
	rate := followed(n)
	share := rate * perStatementCPU.Seconds() / float64(max(cpus, 1))
	if share <= budget {
		return 0
	}
	return dutyCut(0, share/budget, rate)
}

// feedForward cuts before watch's CPU shows the need, when the server's
// rate says following 1 in cur would cost farOver budgets or more: a load
// that starts after watch (or jumps) would otherwise be followed in full
// until windows over budget cut it, at most maxCutFactor per step and
// settleAfterCut windows apart. A cut to the floor that is still
// estimated over budget starts the duty cycle the estimate calls for. It
// never follows more; the measured windows decide that.
func (g *governor) feedForward(cur uint16, followed func(n uint16) float64) (uint16, uint8) {
	n := rateSample(cur, farOver*g.budget, g.budget, g.cpus, followed)
	if n == cur {
		return cur, g.dutyShift
	}
	return n, max(g.dutyShift, rateDuty(n, g.budget, g.cpus, followed))
}

// rateSample is the sample the server's rate calls for, from cur: when
// following 1 in cur is estimated (perStatementCPU) to cost more than
// over, the 1 in N expected to fit budget, never under minFollowed
// statements per second followed; cur otherwise.
func rateSample(cur uint16, over, budget float64, cpus int, followed func(n uint16) float64) uint16 {
	if followed == nil || budget <= 0 {
		return cur
	}
	share := followed(cur) * perStatementCPU.Seconds() / float64(max(cpus, 1))
	if share <= over {
		return cur
	}
	n := min(uint32(cur)*ceilPow2(share/budget), maxBudgetSample)
	for n > uint32(cur) && followed(uint16(n)) < minFollowed {
		n /= 2
	}
	return leastSample(cur, n, followed)
}

// rekey records a change of the sample's key at the same 1 in n (the
// connection the key came from went away).
func (g *governor) rekey(now time.Time, n uint16) {
	g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: n, Key: g.key})
}

// start records the sample a run starts with (when not all connections,
// or not all the time) and its duty cycle.
func (g *governor) start(now time.Time, n uint16, shift uint8, estimatedShare float64) {
	g.dutyShift = shift
	if n > 1 || shift > 0 {
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: n, Key: g.key, CPUShare: estimatedShare, Cycle: g.cycleSeconds()})
	}
}

// ceilPow2 is the smallest power of two ≥ x (1 for x ≤ 1).
func ceilPow2(x float64) uint32 {
	if x <= 1 {
		return 1
	}
	if x >= 1<<16 {
		return 1 << 16
	}
	n := uint32(x)
	if float64(n) < x {
		n++
	}
	return 1 << bits.Len32(n-1)
}

// note says what the budget did over the run, for the report; "" when it
// never had to act.
func (g *governor) note(startUS, endUS int64) string {
	if len(g.steps) == 0 && !g.floored {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CPU budget (--cpu-budget %s of %d CPUs): ", formatShare(g.budget), g.cpus)
	if len(g.steps) > 0 {
		deepest := uint16(1)
		for _, s := range g.steps {
			deepest = max(deepest, s.Sample)
		}
		last := g.steps[len(g.steps)-1].Sample
		sampled := sampledSpan(g.steps, endUS)
		if deepest > 1 {
			fmt.Fprintf(&b, "watch followed fewer connections to stay within it, down to 1 in %d (1 in %d at the end; chosen by a hash of the client port)", deepest, last)
			if c := cycleNote(g.steps, "them"); c != "" {
				b.WriteString(", and " + c)
			}
		} else {
			b.WriteString("to stay within it watch " + cycleNote(g.steps, "every connection"))
		}
		fmt.Fprintf(&b, " for %.0f%% of the run: counts and rates are the sample's, latencies and their parts are exact for every statement shown; "+
			"--cpu-budget 0 follows every connection", 100*float64(sampled)/float64(max(endUS-startUS, 1)))
	}
	if g.floored {
		if len(g.steps) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "watch stayed over its budget: following fewer connections, or them less often, would have left under %d statements/s to follow", minFollowed)
	}
	return b.String()
}

// cycleNote says how often the sample (whom) was followed when a duty
// cycle paused it ("" when never).
func cycleNote(steps []SampleStep, whom string) string {
	longest, last := 0, steps[len(steps)-1].Cycle
	for _, s := range steps {
		longest = max(longest, s.Cycle)
	}
	if longest <= 1 {
		return ""
	}
	return fmt.Sprintf("followed %s only 1 s in every %d s (every %d s at the end; the capture paused in between)", whom, longest, max(last, 1))
}

// sampledSpan is how long (µs) the run followed fewer than all connections
// or only part of the time.
func sampledSpan(steps []SampleStep, endUS int64) int64 {
	var span int64
	for i, s := range steps {
		if s.Sample <= 1 && s.Cycle <= 1 {
			continue
		}
		until := endUS
		if i+1 < len(steps) {
			until = steps[i+1].AtUS
		}
		span += until - s.AtUS
	}
	return span
}

// formatShare prints a fraction as a percentage ("1%", "0.5%").
func formatShare(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", 100*f), "0"), ".") + "%"
}

// BudgetProcs is how many Go processors (GOMAXPROCS) a run held to budget
// (a fraction of cpus, 0: none) needs: twice the cores the budget allows,
// at least one, at most cpus; cpus without a budget. A budget of 1% needs
// one below 50 cores (the default 0.5%, below 100). Every processor beyond
// that is one more thread the runtime hands work to and parks: with one
// instead of two, watch under a budget switched context 10-50% less often
// for the same CPU within noise (scripts/bench-watch-cpu.sh at 600 tx/s
// and with RATE=0, GAPSCOPE set to a wrapper that sets GOMAXPROCS=2, which
// the CLI leaves alone, against the default: 200-310 against 314-435
// switches a second), and each switch on a saturated host is paid by the
// server's threads too.
func BudgetProcs(budget float64, cpus int) int {
	if budget <= 0 || cpus <= 1 {
		return max(cpus, 1)
	}
	return min(max(int(math.Ceil(2*budget*float64(cpus))), 1), cpus)
}
