package watch

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
)

// SampleStep is one change of the connections whose statements a
// budgeted run joins (every connection is always captured and counted).
type SampleStep struct {
	AtUS   int64  `json:"at_us"`  // wall clock, Unix µs
	Sample uint16 `json:"sample"` // 1 in Sample connections joined from then on
	// Key picks which 1 in Sample (capture.Sample): the pivot connection's.
	Key uint32 `json:"key,omitempty"`
	// CPUShare is watch's own CPU, as a fraction of the host's CPUs, in the
	// window that led to the change.
	CPUShare float64 `json:"cpu_share"`
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
	// JoinedConns of AppConns: the application's connections on the wire
	// that the processlist last listed, and how many of them the join
	// sample held at the end ("1 in 512" says little with 8).
	// Both are known only with a budget (nil without one).
	JoinedConns *int `json:"joined_conns,omitempty"`
	AppConns    *int `json:"app_conns,omitempty"`
}

// ProcessCPU is the CPU time this process used so far (user + system):
// watch's own cost when it runs alone, and gapscope's part of a
// measurement's CPU (overhead's rounds) when it runs in-process.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Governor tuning. The budget is an average, not a ceiling on every
// second: watch may spend up to burstWindows seconds' worth of budget in
// a burst (credit) before it joins fewer connections, so that a short
// burst of statements is joined whole, and a sustained load is cut to the
// budget within seconds. Following more again is slow and needs a wide
// margin, so the sample does not swing back and forth.
const (
	maxBudgetSample = 1024
	// burstWindows: the credit watch may spend above its budget, in
	// seconds of budget.
	burstWindows = 10
	// minWindow: windows shorter than this are not judged.
	minWindow = 500 * time.Millisecond
	// Seconds a change needs to show. After a cut, watch still works off
	// what it captured before (statements waiting up to --max-wait for
	// their rows), which must not pass for the new sample's cost.
	settleAfterCut  = 5
	settleAfterGrow = 1
	maxCutFactor    = 8
	growBelow       = 0.4 // a window under this fraction of the budget counts towards joining more
	underWindows    = 3   // such windows before joining twice as many connections
	// minFollowed: no cut below this many of the server's statements per
	// second joined (estimated from the processlist's connections and the
	// server's rate): a decomposition of the fast statements needs some.
	minFollowed = 200
)

// governor keeps watch's own CPU within a share of the host's CPUs by
// choosing which 1 in N connections' fast statements are joined (N a power
// of two, so that cutting keeps a subset of the connections joined). It
// never decides what is captured: every connection is.
type governor struct {
	budget  float64
	cpus    int
	lastCPU time.Duration
	lastAt  time.Time
	// credit is the CPU watch may still spend above its budget; it starts
	// full and refills at the budget's rate, up to burstWindows seconds.
	credit  time.Duration
	settle  int // windows still to pass before the next decision
	under   int
	steps   []SampleStep
	floored bool   // over budget with the sample already at its floor
	key     uint32 // the sample's key, recorded in steps
}

func newGovernor(budget float64, now time.Time, cpu time.Duration) *governor {
	g := &governor{budget: budget, cpus: max(runtime.NumCPU(), 1), lastCPU: cpu, lastAt: now}
	g.credit = g.maxCredit()
	return g
}

// maxCredit is the most CPU watch may spend above its budget at once.
func (g *governor) maxCredit() time.Duration {
	return time.Duration(g.budget * float64(g.cpus) * burstWindows * float64(time.Second))
}

// observe closes a window at now with the process's CPU time cpu and
// returns the sample to join next: cur when nothing changes. followed
// estimates the server's statements per second a 1-in-n sample would
// join (nil: unknown).
func (g *governor) observe(now time.Time, cpu time.Duration, cur uint16, followed func(n uint16) float64) uint16 {
	elapsed := now.Sub(g.lastAt)
	if elapsed < minWindow {
		return cur // too short to judge; the window goes on
	}
	used := cpu - g.lastCPU
	share := float64(used) / float64(elapsed) / float64(g.cpus)
	allowed := time.Duration(g.budget * float64(g.cpus) * float64(elapsed))
	// The debt is bounded like the credit: after an hour over budget (a
	// floored sample, a cost the sample cannot cut) the quiet that follows
	// must not take hours to earn back what the next burst needs.
	g.credit = max(min(g.credit+allowed-used, g.maxCredit()), -g.maxCredit())
	g.lastCPU, g.lastAt = cpu, now
	if g.settle > 0 {
		g.settle -= max(int((elapsed+250*time.Millisecond)/time.Second), 1)
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

// decide applies the policy to one window: cut when the window was over
// budget and the burst credit is spent, join more when well under budget
// with the credit mostly back.
func (g *governor) decide(cur uint16, share float64, followed func(n uint16) float64) uint16 {
	switch {
	case share > g.budget && g.credit < 0:
		g.under = 0
		next := cutSample(cur, share/g.budget, followed)
		g.floored = next == cur
		return next
	case share < growBelow*g.budget && cur > 1 && g.credit > g.maxCredit()/2:
		g.under++
		if g.under < underWindows {
			return cur
		}
		g.under = 0
		return cur / 2
	}
	g.under = 0
	return cur
}

// cutSample joins fewer connections, in proportion to how far over the
// budget the window was, within maxCutFactor per step, maxBudgetSample in
// all, and minFollowed statements per second joined.
func cutSample(cur uint16, overBy float64, followed func(n uint16) float64) uint16 {
	f := min(ceilPow2(overBy), maxCutFactor)
	next := min(uint32(cur)*max(f, 2), maxBudgetSample)
	for next > uint32(cur) && followed != nil && followed(uint16(next)) < minFollowed {
		next /= 2
	}
	return leastSample(cur, next, followed)
}

// leastSample is the smallest 1 in n, from cur (exclusive) to next, that
// joins as few statements as 1 in next; cur when none joins fewer than
// cur. A sample keyed on the pivot connection holds it at every n: past
// the n that leaves it alone, 1 in 2n cuts nothing, and the governor must
// not spend its windows finding that out.
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

// rekey records a change of the sample's key at the same 1 in n (the
// connection the key came from went away).
func (g *governor) rekey(now time.Time, n uint16) {
	g.steps = append(g.steps, SampleStep{AtUS: now.UnixMicro(), Sample: n, Key: g.key})
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
		fmt.Fprintf(&b, "watch joined the fast statements of fewer connections to stay within it, down to 1 in %d (1 in %d at the end; chosen by a hash of the client port) for %.0f%% of the run: "+
			"every statement was still captured and counted (counts, rates, client latencies, wire findings), every slow one joined; "+
			"the queue/exec split of the fast ones comes from the joined connections; --cpu-budget 0 joins every connection",
			deepest, last, 100*float64(sampledSpan(g.steps, endUS))/float64(max(endUS-startUS, 1)))
	}
	if g.floored {
		if len(g.steps) > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "watch stayed over its budget: joining fewer connections would have left under %d statements/s to join (what is left is the capture of every statement)", minFollowed)
	}
	return b.String()
}

// sampledSpan is how long (µs) the run joined fewer than all connections.
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
// one below 50 cores (the default 0.5%, below 100). Every processor beyond
// that is one more thread the runtime hands work to and parks: with one
// instead of two, watch under a budget switched context less often for
// the same CPU (docs/performance.md, "Go processors under a CPU budget"),
// and each switch on a saturated host is paid by the server's threads too.
func BudgetProcs(budget float64, cpus int) int {
	if budget <= 0 || cpus <= 1 {
		return max(cpus, 1)
	}
	return min(max(int(math.Ceil(2*budget*float64(cpus))), 1), cpus)
}

// GCPercent is the garbage collector's target (GOGC) for a watch run. Its
// live heap is bounded (the window, the joiner's queues, the profile's
// sketches), so a heap of three times it rather than two stays bounded,
// while the collections, whose CPU every statement's allocations pay on
// the watched server's cores, come half as often.
const GCPercent = 200

// MemoryLimitFor is the Go runtime's soft memory limit for a run that
// started s: MemoryGoal less the ring its capture mapped. The command sets
// it (a process-wide setting: labs run watch in-process and keep theirs).
func MemoryLimitFor(s Started) int64 { return MemoryGoal - s.RingBytes }

// MemoryGoal is what a watch run's Go runtime and its capture ring hold
// together at most (MemoryLimitFor): the runtime's soft memory limit
// is the goal less the ring the capture opened, so that the header-only
// capture's larger ring (a BPF ring buffer's size is a power of two: 32
// MiB for the default 24) costs no more resident memory than the
// AF_PACKET ring. With the default ring the limit is MemoryLimit.
const MemoryGoal = MemoryLimit + capture.DefaultRingMB<<20

// MemoryLimit is the Go runtime's soft memory limit for a watch run with
// the default AF_PACKET ring (GOMEMLIMIT; the ring, mapped outside the
// runtime, and the binary's text come on top). With GCPercent alone the
// heap is three times the live heap, and the live heap grows with the
// load (the window, the joiner's queues, the profile's rows), so the
// resident size would follow every swing of it. Past the limit the collector runs as often as it
// takes to stay under it. The limit is what keeps watch's resident size
// within its goal under churn (docs/performance.md), so it is sized for
// the live heap's bounds: the window holds compact records, a profile
// row makes its sketch only past the latencies it keeps exactly. A quiet
// server's heap never comes near it; a live heap near the limit would make
// the collector run back to back.
const MemoryLimit = 96 << 20
