package diagnose

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// healthyWindow is a well-configured MariaDB 10.11 with performance_schema
// collecting what gapscope needs, a minimal account and a fast OLTP load.
func healthyWindow(t *testing.T) *Window {
	w := fixtures(t)["mariadb-10.11-ps"].window()
	w.Statements = healthy()
	w.Consumers["events_statements_current"], w.Consumers["events_statements_history_long"] = true, true
	w.Consumers["events_statements_history"] = true
	w.Grants = []string{"GRANT PROCESS ON *.* TO `gapscope`@`%`", "GRANT SELECT ON `performance_schema`.* TO `gapscope`@`%`"}
	w.Cores = 2
	return w
}

func TestHealthyWindowHasNoFinding(t *testing.T) {
	if fs := Run(healthyWindow(t)); len(fs) != 0 {
		t.Fatalf("healthy window produced findings:\n%s", dump(fs))
	}
}

func TestRunSortsBySeverityThenRule(t *testing.T) {
	w := threadPoolWindow()                                                             // POOL_QUEUE critical, SERVER_EXEC warning
	w.Vars["innodb_stats_auto_recalc"], w.Vars["innodb_stats_persistent"] = "OFF", "ON" // TRANSIENT_STATS info
	w.Grants = []string{"GRANT SELECT ON *.* TO x"}                                     // EXCESS_GRANTS warning
	fs := Run(w)
	for i := 1; i < len(fs); i++ {
		a, b := fs[i-1], fs[i]
		if a.Severity.Rank() < b.Severity.Rank() || (a.Severity == b.Severity && ruleIndex(a.Code) > ruleIndex(b.Code)) {
			t.Fatalf("not sorted at %d: %v", i, codes(fs))
		}
	}
	for _, c := range []string{CodePoolQueue, CodeServerExec, CodeTransientStats, CodeExcessGrants, CodePoolSizing} {
		if !slices.Contains(codes(fs), c) {
			t.Errorf("Run with no rules given should apply every rule; %s missing from %v", c, codes(fs))
		}
	}
	if fs[0].Severity != event.SeverityCritical || fs[len(fs)-1].Severity != event.SeverityInfo {
		t.Errorf("order %v", codes(fs))
	}
}

func TestRunWithGivenRulesOnly(t *testing.T) {
	fs := Run(threadPoolWindow(), Rule{CodeNetwork, checkNetwork})
	if len(fs) != 0 {
		t.Errorf("only NETWORK asked for, got %v", codes(fs))
	}
	if Run(nil) != nil {
		t.Error("nil window should give no findings")
	}
}

func TestRegistryCodesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules() {
		if r.Code == "" || seen[r.Code] || r.Check == nil {
			t.Errorf("bad or duplicate rule %q", r.Code)
		}
		seen[r.Code] = true
	}
	want := []string{CodePoolQueue, CodeClientBackpressure, CodeLockWait, CodeIdleInTransaction, CodeServerExec, CodeNetwork, CodeErrors,
		CodePerformanceSchemaOff, CodeMissingConsumers, CodeConcurrencyCap, CodePoolSizing, CodeInstrumentationCost,
		CodeTransientStats, CodeExcessGrants, CodeStageHistoryOff, CodeWaitHistoryOff, CodeInstrumentsOff,
		CodeWaitTimerCycle, CodeThreadPoolOff, CodeThreadPoolTablesMissing, CodeThreadPoolTablesUnreadable,
		CodeThreadPoolNoExtraPort, CodeGrantProcessMissing, CodeGrantPSSelectMissing}
	if len(seen) != len(want) {
		t.Errorf("want %d rules, got %d", len(want), len(seen))
	}
	for _, c := range want {
		if !seen[c] {
			t.Errorf("rule %s not registered", c)
		}
	}
	// Every rule set is drawn from the one registry.
	for name, set := range map[string][]Rule{"check": CheckRules(), "watch": WatchRules(), "wire": WireRules()} {
		for _, r := range set {
			if !seen[r.Code] {
				t.Errorf("%s applies %s, which Rules() does not hold", name, r.Code)
			}
		}
	}
}

// TestRulesSurviveOddInput: negative, zero and inconsistent parts, garbage
// variables and status must never panic, and findings must carry a code of
// the rule that made them.
func TestRulesSurviveOddInput(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, -1, 1, 9_999, 10_000, 1 << 40, -(1 << 40)}
	pick := func() int64 { return vals[r.IntN(len(vals))] }
	for range 2000 {
		var stmts []event.Statement
		for range r.IntN(6) {
			g := int(pick() % 5)
			s := event.Statement{Conn: "c", ConnID: uint64(r.IntN(4)), Parts: event.Parts{ClientUS: pick(), RequestUS: pick(), QueueUS: pick(), ExecUS: pick(), SendStallUS: pick(), DeliveryUS: pick()},
				Joined: r.IntN(4) > 0}
			if r.IntN(2) == 0 {
				s.PoolGroup = &g
			}
			if r.IntN(3) == 0 {
				s.LockWait = &event.LockWait{LockWaitUS: pick()}
				if r.IntN(2) == 0 {
					b := &event.Blocker{ConnID: uint64(r.IntN(3)), Kind: []string{"", event.LockRow, event.LockMetadata, "x"}[r.IntN(4)],
						State: []string{"", event.BlockerIdleInTxn, event.BlockerRunning}[r.IntN(3)], HeldUS: pick(), IdleUS: pick(),
						Confidence: []string{"", event.ConfidenceLow, event.ConfidenceCertain}[r.IntN(3)]}
					if r.IntN(2) == 0 {
						b.Root = &event.Blocker{ConnID: 9, Confidence: "?"}
					}
					s.BlockedBy = b
				}
			}
			stmts = append(stmts, s)
		}
		var txns []event.Transaction
		for range r.IntN(4) {
			txns = append(txns, event.Transaction{Conn: "c", InAppUS: pick(), MaxIdleUS: pick(), OpenUS: pick(), ServerUS: pick(),
				Blocked: int(pick() % 7), Tags: map[string]string{"route": "/x"}})
		}
		w := &Window{Statements: stmts, Transactions: txns, Cores: r.IntN(3) - 1, Flavor: []string{"", "mysql", "mariadb", "x"}[r.IntN(4)],
			Vars: map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": []string{"0", "-3", "x", "2"}[r.IntN(4)],
				"thread_pool_oversubscribe": "-1", "innodb_thread_concurrency": "nan", "max_connections": "0", "optimizer_trace": ""},
			Status:      map[string]string{"threads_running": "-5", "Max_used_connections": "1e9"},
			Instruments: map[string]collect.Instruments{"wait/synch": {Enabled: 5}, "x": {Total: -1, Enabled: -1, Timed: -1}}, Consumers: map[string]bool{"": true}}
		for _, f := range Run(w) {
			if f.Code == "" || f.Severity == "" {
				t.Fatalf("finding without code or severity: %s", dump([]event.Finding{f}))
			}
		}
	}
}

func ruleIndex(code string) int {
	return slices.IndexFunc(Rules(), func(r Rule) bool { return r.Code == code })
}
