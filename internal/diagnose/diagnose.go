// Package diagnose names the cause of lost time. It is a registry of small
// rules, each a pure function over a Window (joined statements plus what the
// server said about its settings) returning findings with a stable code,
// the numbers that support them and a concrete fix. Rules gather nothing
// themselves: callers fill the Window, rules decide (gather-then-decide), so
// every rule is testable on fixtures.
package diagnose

import (
	"cmp"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
)

// PoolGroup is one thread-pool group as the server reported it
// (MariaDB information_schema.THREAD_POOL_GROUPS).
type PoolGroup struct {
	GroupID       int  `json:"group_id"`
	Connections   int  `json:"connections"`
	Threads       int  `json:"threads"`
	ActiveThreads int  `json:"active_threads"`
	QueueLength   int  `json:"queue_length"`
	Stalled       bool `json:"stalled"`
}

// Window is what the rules look at: the statements of one observation
// window and the server's configuration at that time. Any part may be empty;
// a rule with nothing to look at stays silent.
type Window struct {
	Statements []event.Statement
	// Vars holds global variables by lower-case name.
	Vars map[string]string
	// Status holds global status; names are matched case-insensitively.
	Status  map[string]string
	Flavor  string // mariadb | mysql | percona
	Version string
	// Cores is the server host's CPU count; 0 when unknown.
	Cores int
	// Consumers maps performance_schema.setup_consumers NAME to ENABLED.
	Consumers map[string]bool
	// Instruments maps an instrument class (statement, stage, wait, memory,
	// ...) to {enabled, total}.
	Instruments map[string][2]int
	// Grants are the lines of SHOW GRANTS for gapscope's own account.
	Grants     []string
	PoolGroups []PoolGroup
	// RwndLimitedUS is, per client address ("ip:port", the part of a
	// Statement's Conn before '>'), how long the server's socket to it was
	// receive-window limited during the window, as its kernel counted
	// (TCP_INFO); nil when not read (a remote server, or no sock_diag).
	RwndLimitedUS map[string]int64
	// SettingsSource says where Vars came from ("server", a file name, ...).
	SettingsSource string
	// Limits tunes the statement rules; zero fields take the defaults.
	Limits Limits
}

// Limits are the thresholds of the statement rules.
type Limits struct {
	// SlowUS: statements at least this slow at the client are worth
	// explaining (SERVER_EXEC, NETWORK). Default 100 ms.
	SlowUS int64
	// QueueUS: a statement whose queue time reaches this counts as queued
	// (POOL_QUEUE). Default 10 ms.
	QueueUS int64
	// StallUS: a statement whose send stall reaches this counts as held back
	// by its client (CLIENT_BACKPRESSURE). Default 10 ms.
	StallUS int64
	// Share is the fraction of time a part must hold to dominate. Default 0.5.
	Share float64
}

// DefaultLimits are used for every zero field of Window.Limits.
var DefaultLimits = Limits{SlowUS: 100_000, QueueUS: 10_000, StallUS: 10_000, Share: 0.5}

func (w *Window) limits() Limits {
	l, d := w.Limits, DefaultLimits
	l.SlowUS = cmp.Or(l.SlowUS, d.SlowUS)
	l.QueueUS = cmp.Or(l.QueueUS, d.QueueUS)
	l.StallUS = cmp.Or(l.StallUS, d.StallUS)
	l.Share = cmp.Or(l.Share, d.Share)
	return l
}

// Rule is one cause: a stable code and a check that returns zero or more
// findings carrying that code.
type Rule struct {
	Code  string
	Check func(w *Window) []event.Finding
}

// StatementRules are the rules over joined statements.
func StatementRules() []Rule {
	return []Rule{
		{CodePoolQueue, checkPoolQueue},
		{CodeClientBackpressure, checkClientBackpressure},
		{CodeServerExec, checkServerExec},
		{CodeNetwork, checkNetwork},
	}
}

// ConfigRules are the rules over settings, status, consumers and grants.
func ConfigRules() []Rule {
	return []Rule{
		{CodeConcurrencyCap, checkConcurrencyCap},
		{CodePoolSizing, checkPoolSizing},
		{CodeInstrumentationCost, checkInstrumentationCost},
		{CodeTransientStats, checkTransientStats},
		{CodeMissingConsumers, checkMissingConsumers},
		{CodeExcessGrants, checkExcessGrants},
	}
}

// Rules returns every registered rule.
func Rules() []Rule { return append(StatementRules(), ConfigRules()...) }

// Run applies rules (all registered rules when none are given) to w and
// returns their findings, most severe first, then by code.
func Run(w *Window, rules ...Rule) []event.Finding {
	if w == nil {
		return nil
	}
	if len(rules) == 0 {
		rules = Rules()
	}
	var out []event.Finding
	for _, r := range rules {
		out = append(out, r.Check(w)...)
	}
	slices.SortStableFunc(out, func(a, b event.Finding) int {
		return cmp.Or(cmp.Compare(severityRank(b.Severity), severityRank(a.Severity)), cmp.Compare(a.Code, b.Code))
	})
	return out
}

func severityRank(s event.Severity) int {
	switch s {
	case event.SeverityCritical:
		return 2
	case event.SeverityWarning:
		return 1
	}
	return 0
}

// Stable finding codes. They are part of gapscope's interface.
const (
	CodePoolQueue           = "POOL_QUEUE"
	CodeClientBackpressure  = "CLIENT_BACKPRESSURE"
	CodeServerExec          = "SERVER_EXEC"
	CodeNetwork             = "NETWORK"
	CodeConcurrencyCap      = "CONCURRENCY_CAP"
	CodePoolSizing          = "POOL_SIZING"
	CodeInstrumentationCost = "INSTRUMENTATION_COST"
	CodeTransientStats      = "TRANSIENT_STATS"
	CodeMissingConsumers    = "MISSING_CONSUMERS"
	CodeExcessGrants        = "EXCESS_GRANTS"
)
