package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// groupTally is one pool group's share of the queue time.
type groupTally struct {
	Group      int     `json:"group"` // -1 when unknown
	Statements int     `json:"statements"`
	Queued     int     `json:"queued"`
	QueueUS    int64   `json:"queue_us"`
	MaxQueueUS int64   `json:"max_queue_us"`
	Share      float64 `json:"queue_share"`
}

// checkPoolQueue finds requests that waited before the server started them
// — time the slow log and TIMER_WAIT never count — and shows on which pool
// groups and connections it concentrates (the thread-pool case: slow connections are
// always slow, because a connection stays in its group).
func checkPoolQueue(w *Window) []event.Finding {
	l, p := w.limits(), w.pool()
	stmts := joined(w)
	isQueued := func(s *event.Statement) bool {
		return s.QueueUS >= l.QueueUS && share(s.QueueUS, s.ClientUS) >= l.Share
	}
	groups, queued, total := tallyGroups(stmts, p, isQueued)
	if len(queued) == 0 || !poolInPlay(w, p) {
		return nil
	}
	var queueUS, maxQueue int64
	for _, s := range queued {
		queueUS += s.QueueUS
		maxQueue = max(maxQueue, s.QueueUS)
	}
	if !queueMatters(queueUS, maxQueue, total.Client) {
		return nil
	}
	saturated := saturatedGroups(groups, queueUS)
	f := event.Finding{
		Code:     CodePoolQueue,
		Severity: event.SeverityWarning,
		Summary:  poolSummary(len(queued), queueUS, total.Client, maxQueue, saturated, groups),
		Evidence: map[string]any{
			"queued_statements": len(queued),
			"statements":        total.N,
			"queue_us":          queueUS,
			"max_queue_us":      maxQueue,
			"client_us":         total.Client,
			"queue_share":       round3(share(queueUS, total.Client)),
			"groups":            groups,
			"saturated_groups":  saturated,
			"victims":           connTallies(stmts, isQueued, func(s *event.Statement) int64 { return s.QueueUS }),
			"examples":          topExamples(queued, func(s *event.Statement) int64 { return s.QueueUS }),
			"settings":          p.Settings,
			"implication":       p.implication(),
		},
		Fix: poolFix(p),
	}
	if len(w.PoolGroups) > 0 {
		f.Evidence["server_groups"] = w.PoolGroups
		f.Evidence["server_groups_note"] = "THREAD_POOL_GROUPS may show QUEUE_LENGTH=0 while requests wait for a listener; the wire is the only witness"
	}
	if maxQueue >= 1_000_000 || share(queueUS, total.Client) >= l.Share {
		f.Severity = event.SeverityCritical
	}
	return []event.Finding{f}
}

// poolInPlay: the server serves connections with a thread pool (or the
// statements carry pool groups). Without one, a request waits before it
// starts only for a CPU or the network stack: scattered milliseconds on a
// busy host, not a pool to resize (docs/performance.md, "Slow statements
// and queue waits of a healthy load").
func poolInPlay(w *Window, p pool) bool {
	if p.Enabled {
		return true
	}
	for i := range w.Statements {
		if w.Statements[i].PoolGroup != nil {
			return true
		}
	}
	return false
}

// queueMatters: the queued time is worth a finding when one request waited
// a second or more, or the waits add up to a noticeable share of the
// clients' time.
func queueMatters(queueUS, maxQueueUS, clientUS int64) bool {
	return maxQueueUS >= 1_000_000 || share(queueUS, clientUS) >= minQueueShare
}

// minQueueShare is the share of client time queued waits must reach.
const minQueueShare = 0.05

// tallyGroups sums queue time per pool group; it returns the groups by id,
// the queued statements and the totals of every statement.
func tallyGroups(stmts []*event.Statement, p pool, isQueued func(*event.Statement) bool) ([]groupTally, []*event.Statement, parts) {
	by := map[int]*groupTally{}
	var queued []*event.Statement
	var total parts
	for _, s := range stmts {
		total.add(s)
		g := groupOf(s, p)
		t := by[g]
		if t == nil {
			t = &groupTally{Group: g}
			by[g] = t
		}
		t.Statements++
		if isQueued(s) {
			queued = append(queued, s)
			t.Queued++
			t.QueueUS += s.QueueUS
			t.MaxQueueUS = max(t.MaxQueueUS, s.QueueUS)
		}
	}
	var queueUS int64
	for _, t := range by {
		queueUS += t.QueueUS
	}
	out := make([]groupTally, 0, len(by))
	for _, t := range by {
		t.Share = round3(share(t.QueueUS, queueUS))
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b groupTally) int { return cmp.Compare(a.Group, b.Group) })
	return out, queued, total
}

// groupOf returns the statement's pool group; when the join did not record
// it, MariaDB's rule (connection id mod thread_pool_size) derives it.
func groupOf(s *event.Statement, p pool) int {
	if s.PoolGroup != nil {
		return *s.PoolGroup
	}
	if p.Enabled && p.Flavor != FlavorMySQL && s.ConnID > 0 && p.Size > 0 {
		return int(s.ConnID % uint64(p.Size))
	}
	return -1
}

// saturatedGroups returns the fewest groups that hold 80% of the queue time.
func saturatedGroups(groups []groupTally, queueUS int64) []int {
	byTime := slices.Clone(groups)
	slices.SortStableFunc(byTime, func(a, b groupTally) int { return cmp.Compare(b.QueueUS, a.QueueUS) })
	var out []int
	var sum int64
	for _, g := range byTime {
		if g.QueueUS == 0 || share(sum, queueUS) >= 0.8 {
			break
		}
		out = append(out, g.Group)
		sum += g.QueueUS
	}
	slices.Sort(out)
	return out
}

func poolSummary(n int, queueUS, clientUS, maxQueue int64, saturated []int, groups []groupTally) string {
	where := "pool group unknown"
	if !(len(saturated) == 1 && saturated[0] == -1) {
		names := make([]string, len(saturated))
		for i, g := range saturated {
			names[i] = fmt.Sprint(g)
		}
		where = fmt.Sprintf("concentrated on pool group(s) %s of %d", strings.Join(names, ","), len(groups))
	}
	return fmt.Sprintf("%d request(s) waited %s in all (%s of client time, max %s) before the server started them, %s; the slow log and TIMER_WAIT do not count this wait",
		n, dur(queueUS), pct(share(queueUS, clientUS)), dur(maxQueue), where)
}

// poolFix names the settings to change for the pool in use.
func poolFix(p pool) string {
	move := "run long statements (reports, batch jobs) on their own connections outside the pool"
	switch {
	case !p.Enabled:
		return "requests queue before execution although no thread pool is configured: check thread_handling and the server's CPU saturation (Threads_running vs cores); " + move
	case p.Flavor == FlavorMySQL:
		return fmt.Sprintf("SET GLOBAL thread_pool_stall_limit=6 (10 ms units; now %d ms) so a group blocked by long statements starts another sooner; raise thread_pool_max_active_query_threads or thread_pool_size (now %d); %s",
			p.StallLimitMS, p.Size, move)
	}
	fix := fmt.Sprintf("SET GLOBAL thread_pool_oversubscribe=%d (now %d)", max(p.PerGroup, 3), p.PerGroup-1)
	if p.StallLimitMS > 500 {
		fix = fmt.Sprintf("SET GLOBAL thread_pool_stall_limit=500 (ms; now %d) and %s", p.StallLimitMS, fix)
	}
	return fix + " so a group blocked by long statements starts another thread sooner; " + move + " (e.g. via extra_port)"
}
