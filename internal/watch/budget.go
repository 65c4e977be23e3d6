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
	// Windows a change needs to show. After a cut, watch still works off
	// what it captured before: statements waiting up to --max-wait (5 s)
	// for their server rows, a queue behind the tracker. Judged sooner,
	// that backlog passes for the new sample's cost and cuts too deep.
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
	if elapsed < 500*time.Millisecond {
		return cur // too short to judge; the window goes on
	}
	share := float64(cpu-g.lastCPU) / float64(elapsed) / float64(g.cpus)
	g.lastCPU, g.lastAt = cpu, now
	if next := g.feedForward(cur, followed); next > cur {
		g.settle, g.over, g.under = settleAfterCut, 0, 0
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: next, Key: g.key, CPUShare: share, ByRate: true})
		return next
	}
	if g.settle > 0 {
		g.settle--
		return cur
	}
	next := g.decide(cur, share, followed)
	if next != cur {
		g.settle = settleAfterGrow
		if next > cur {
			g.settle = settleAfterCut
		}
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: next, Key: g.key, CPUShare: share})
	}
	return next
}

// decide applies the policy to one window.
func (g *governor) decide(cur uint16, share float64, followed func(n uint16) float64) uint16 {
	switch {
	case share > g.budget:
		g.over, g.under = g.over+1, 0
		if g.over < overWindows && share < farOver*g.budget {
			return cur
		}
		g.over = 0
		next := cutSample(cur, share/g.budget, followed)
		g.floored = next == cur
		return next
	case share < growBelow*g.budget && cur > 1:
		g.under, g.over = g.under+1, 0
		if g.under < underWindows {
			return cur
		}
		g.under = 0
		return cur / 2
	}
	g.over, g.under = 0, 0
	return cur
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
	return uint16(max(next, uint32(cur)))
}

// perStatementCPU is what following one statement costs watch (capture,
// decoding, join, profile): 8.3 µs of CPU measured at 20k statements/s
// (README, scripts/bench-watch.sh). It sizes the first sample only; the
// governor corrects it from watch's measured CPU.
const perStatementCPU = 8300 * time.Nanosecond

// startSample is the sample a budgeted run starts with, from the server's
// statement rate: starting with every connection on a busy server would
// cost the budget many times over until the first windows were judged.
func startSample(budget float64, cpus int, followed func(n uint16) float64) uint16 {
	return rateSample(1, budget, budget, cpus, followed)
}

// feedForward cuts before watch's CPU shows the need, when the server's
// rate says following 1 in cur would cost farOver budgets or more: a load
// that starts after watch (or jumps) would otherwise be followed in full
// until windows over budget cut it, at most maxCutFactor per step and
// settleAfterCut windows apart. It never follows more; the measured
// windows decide that.
func (g *governor) feedForward(cur uint16, followed func(n uint16) float64) uint16 {
	return rateSample(cur, farOver*g.budget, g.budget, g.cpus, followed)
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
	return uint16(max(n, uint32(cur)))
}

// rekey records a change of the sample's key at the same 1 in n (the
// connection the key came from went away).
func (g *governor) rekey(now time.Time, n uint16) {
	g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: n, Key: g.key})
}

// start records the sample a run starts with (when not all connections).
func (g *governor) start(now time.Time, n uint16, estimatedShare float64) {
	if n > 1 {
		g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: n, Key: g.key, CPUShare: estimatedShare})
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
		fmt.Fprintf(&b, "watch followed fewer connections to stay within it, down to 1 in %d (1 in %d at the end; chosen by a hash of the client port) "+
			"for %.0f%% of the run: counts and rates are the sample's, latencies and their parts are exact for every statement shown; "+
			"--cpu-budget 0 follows every connection", deepest, last, 100*float64(sampled)/float64(max(endUS-startUS, 1)))
	}
	if g.floored {
		if len(g.steps) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "watch stayed over its budget: following fewer connections would have left under %d statements/s to follow", minFollowed)
	}
	return b.String()
}

// sampledSpan is how long (µs) the run followed fewer than all connections.
func sampledSpan(steps []SampleStep, endUS int64) int64 {
	var span int64
	for i, s := range steps {
		if s.Sample <= 1 {
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
// one below 50 cores. Every processor beyond that is one more thread the
// runtime hands work to and parks: with one instead of two, watch under a
// budget switched context 10-50% less often for the same CPU within noise
// (scripts/bench-watch-cpu.sh at 600 tx/s and with RATE=0, GAPSCOPE set to
// a wrapper that sets GOMAXPROCS=2, which the CLI leaves alone, against the
// default: 200-310 against 314-435 switches a second), and each switch on
// a saturated host is paid by the server's threads too.
func BudgetProcs(budget float64, cpus int) int {
	if budget <= 0 || cpus <= 1 {
		return max(cpus, 1)
	}
	return min(max(int(math.Ceil(2*budget*float64(cpus))), 1), cpus)
}
