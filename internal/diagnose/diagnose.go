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

	"github.com/gapscope/gapscope/internal/collect"
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
	// Transactions are the transactions of the window's connections as the
	// wire saw them (status flags of the responses), each once, finished or
	// still open at the window's end; IDLE_IN_TRANSACTION ranks where the
	// applications held them open. Nil when not gathered: the rule is then
	// silent.
	Transactions []event.Transaction
	// TxnSeen is how many transactions the window stands for when
	// Transactions holds only those the rules need (WireWindow keeps the
	// ones held open); 0 means len(Transactions).
	TxnSeen int64
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
	// Instruments counts instruments by class, as collect.Capabilities
	// keys them ("statement", "stage", "wait/synch", "wait/io/socket", ...).
	Instruments map[string]collect.Instruments
	// Grants are the lines of SHOW GRANTS for gapscope's own account.
	Grants     []string
	PoolGroups []PoolGroup
	// RwndLimitedUS is, per client address ("ip:port", the part of a
	// Statement's Conn before '>'), how long the server's socket to it was
	// receive-window limited during the window, as its kernel counted
	// (TCP_INFO); nil when not read (a remote server, or no sock_diag).
	RwndLimitedUS map[string]int64
	// Server is what collect read about the server and gapscope's access
	// to it; nil when not read (fixtures, a settings file), and the rules
	// about gapscope's own access then stay silent.
	Server *collect.ServerInfo
	// PoolTables maps each THREAD_POOL_* table to "" or the error reading it.
	PoolTables map[string]string
	// SettingsSource says where Vars came from ("server", a file name, ...).
	SettingsSource string
	// Seen is how many statements the window stands for when Statements
	// holds only those the rules need (analyze keeps the ones with an error,
	// a closed window or a retransmission); 0 means len(Statements).
	Seen int64
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
	// LockWaitUS: the window's lock waits must add up to this for
	// LOCK_WAIT to fire. Default 100 ms.
	LockWaitUS int64
	// TxnIdleUS: a transaction whose longest gap between a response and
	// its application's next request reaches this counts as held open
	// (IDLE_IN_TRANSACTION). Default 100 ms.
	TxnIdleUS int64
}

// DefaultLimits are used for every zero field of Window.Limits.
var DefaultLimits = Limits{SlowUS: 100_000, QueueUS: 10_000, StallUS: 10_000, Share: 0.5, LockWaitUS: 100_000, TxnIdleUS: 100_000}

func (w *Window) limits() Limits {
	l, d := w.Limits, DefaultLimits
	l.SlowUS = cmp.Or(l.SlowUS, d.SlowUS)
	l.QueueUS = cmp.Or(l.QueueUS, d.QueueUS)
	l.StallUS = cmp.Or(l.StallUS, d.StallUS)
	l.Share = cmp.Or(l.Share, d.Share)
	l.LockWaitUS = cmp.Or(l.LockWaitUS, d.LockWaitUS)
	l.TxnIdleUS = cmp.Or(l.TxnIdleUS, d.TxnIdleUS)
	return l
}

// Rule is one cause: a stable code and a check that returns zero or more
// findings carrying that code.
type Rule struct {
	Code  string
	Check func(w *Window) []event.Finding
}

// StatementRules are the rules over statements (and their transactions).
// POOL_QUEUE and SERVER_EXEC need the server's split and look at joined
// statements only; the others also judge what the wire alone shows
// (WireRules).
func StatementRules() []Rule {
	return []Rule{
		{CodePoolQueue, checkPoolQueue},
		{CodeClientBackpressure, checkClientBackpressure},
		{CodeLockWait, checkLockWait},
		{CodeIdleInTransaction, checkIdleInTransaction},
		{CodeServerExec, checkServerExec},
		{CodeNetwork, checkNetwork},
		{CodeErrors, errorsRule},
	}
}

// requiredRules say what a run cannot do without: performance_schema and
// the statement consumers gapscope joins.
func requiredRules() []Rule {
	return []Rule{
		{CodePerformanceSchemaOff, checkPerformanceSchemaOff},
		{CodeMissingConsumers, checkMissingConsumers},
	}
}

// tuningRules judge the server's own settings: concurrency caps, pool
// sizing, instrumentation cost, statistics.
func tuningRules() []Rule {
	return []Rule{
		{CodeConcurrencyCap, checkConcurrencyCap},
		{CodeInstrumentationCost, checkInstrumentationCost},
		{CodePoolSizing, checkPoolSizing},
		{CodeTransientStats, checkTransientStats},
	}
}

var excessGrantsRule = Rule{CodeExcessGrants, checkExcessGrants}

// ConfigRules are the rules over settings, status, consumers and grants
// that bear on every run: watch applies them at its end.
func ConfigRules() []Rule {
	return slices.Concat(requiredRules(), tuningRules(), []Rule{excessGrantsRule})
}

// AccessRules judge what else the server could offer gapscope (stages,
// socket waits, the wait timer, thread-pool tables) and the account it
// runs as: what check audits before a run. They need Window.Server.
func AccessRules() []Rule {
	return []Rule{
		{CodeStageHistoryOff, checkStageConsumers},
		{CodeWaitHistoryOff, checkWaitConsumers},
		{CodeInstrumentsOff, checkInstrumentsOff},
		{CodeWaitTimerCycle, checkWaitTimer},
		{CodeThreadPoolOff, checkThreadPoolOff},
		{CodeThreadPoolTablesMissing, checkThreadPoolTablesMissing},
		{CodeThreadPoolTablesUnreadable, checkThreadPoolTablesUnreadable},
		{CodeThreadPoolNoExtraPort, checkThreadPoolNoExtraPort},
		{CodeGrantProcessMissing, checkGrantProcessMissing},
		{CodeGrantPSSelectMissing, checkGrantPSSelectMissing},
		excessGrantsRule,
	}
}

// CheckRules are what `gapscope check` applies: the server's settings and
// gapscope's access, no statements; what a run needs comes first.
func CheckRules() []Rule { return slices.Concat(requiredRules(), AccessRules(), tuningRules()) }

// WatchRules are what a watch run applies at its end: its statements and
// the server's settings.
func WatchRules() []Rule { return append(StatementRules(), ConfigRules()...) }

// Rules returns every registered rule, each once: the one list of finding
// codes.
func Rules() []Rule {
	return slices.Concat(StatementRules(), requiredRules(), AccessRules(), tuningRules())
}

// Run applies rules (all registered rules when none are given) to w and
// returns their findings, most severe first, then in the order of the
// rules.
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
	slices.SortStableFunc(out, event.MoreSevere)
	return out
}

// Stable finding codes. They are part of gapscope's interface.
const (
	CodePoolQueue           = "POOL_QUEUE"
	CodeClientBackpressure  = "CLIENT_BACKPRESSURE"
	CodeLockWait            = "LOCK_WAIT"
	CodeIdleInTransaction   = "IDLE_IN_TRANSACTION"
	CodeServerExec          = "SERVER_EXEC"
	CodeNetwork             = "NETWORK"
	CodeErrors              = "ERRORS"
	CodeConcurrencyCap      = "CONCURRENCY_CAP"
	CodePoolSizing          = "POOL_SIZING"
	CodeInstrumentationCost = "INSTRUMENTATION_COST"
	CodeTransientStats      = "TRANSIENT_STATS"
	CodeMissingConsumers    = "MISSING_CONSUMERS"
	CodeExcessGrants        = "EXCESS_GRANTS"

	CodePerformanceSchemaOff       = "PS_OFF"
	CodeStageHistoryOff            = "STAGE_HISTORY_OFF"
	CodeWaitHistoryOff             = "WAIT_HISTORY_OFF"
	CodeInstrumentsOff             = "INSTRUMENTS_OFF"
	CodeWaitTimerCycle             = "WAIT_TIMER_CYCLE"
	CodeThreadPoolOff              = "THREAD_POOL_OFF"
	CodeThreadPoolTablesMissing    = "THREAD_POOL_TABLES_MISSING"
	CodeThreadPoolTablesUnreadable = "THREAD_POOL_TABLES_UNREADABLE"
	CodeThreadPoolNoExtraPort      = "THREAD_POOL_NO_EXTRA_PORT"
	CodeGrantProcessMissing        = "GRANT_PROCESS_MISSING"
	CodeGrantPSSelectMissing       = "GRANT_PS_SELECT_MISSING"
)
