package collect

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// CheckReport is what `gapscope check` prints: the server and the findings
// about what it offers gapscope.
type CheckReport struct {
	Server   ServerInfo      `json:"server"`
	Findings []event.Finding `json:"findings"`
}

// Instruments counts the setup_instruments rows matching a pattern.
type Instruments struct {
	Total, Enabled, Timed int
}

// Capabilities is everything Check gathers before deciding (gather, then
// decide: the rules below are pure functions of it and unit-tested).
type Capabilities struct {
	Server      ServerInfo
	Consumers   map[string]bool        // setup_consumers NAME -> ENABLED
	Instruments map[string]Instruments // pattern -> counts
	Grants      []string               // SHOW GRANTS lines
	PoolTables  map[string]string      // THREAD_POOL_* table -> "" or the read error
}

// instrumentPatterns are the instrument classes gapscope relies on.
var instrumentPatterns = []string{"statement/%", "stage/%", "wait/io/socket/%"}

// GatherCapabilities reads what Check needs; missing privileges become
// evidence, not errors, so that check still reports what it can.
func GatherCapabilities(ctx context.Context, db *sql.DB) (Capabilities, error) {
	info, err := DetectServer(ctx, db)
	if err != nil {
		return Capabilities{}, err
	}
	c := Capabilities{Server: info, Instruments: map[string]Instruments{}, PoolTables: map[string]string{}}
	if c.Grants, err = readGrants(ctx, db); err != nil {
		return c, err
	}
	if info.PerformanceSchema {
		c.Consumers = readConsumers(ctx, db)
		for _, p := range instrumentPatterns {
			c.Instruments[p] = countInstruments(ctx, db, p)
		}
	}
	if info.ThreadPoolTables {
		for _, t := range poolTables {
			c.PoolTables[t] = ""
			if _, err := db.ExecContext(ctx, Mark+" SELECT 1 FROM information_schema."+t+" LIMIT 1"); err != nil {
				c.PoolTables[t] = err.Error()
			}
		}
	}
	return c, nil
}

var poolTables = []string{"THREAD_POOL_GROUPS", "THREAD_POOL_QUEUES", "THREAD_POOL_STATS", "THREAD_POOL_WAITS"}

func readGrants(ctx context.Context, db queryer) ([]string, error) {
	rows, err := db.QueryContext(ctx, Mark+" SHOW GRANTS")
	if err != nil {
		return nil, fmt.Errorf("reading grants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("reading grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func readConsumers(ctx context.Context, db queryer) map[string]bool {
	pairs, err := readPairs(ctx, db, Mark+" SELECT NAME, ENABLED FROM performance_schema.setup_consumers", "setup_consumers")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for k, v := range pairs {
		out[k] = isOn(v)
	}
	return out
}

func countInstruments(ctx context.Context, db queryer, pattern string) Instruments {
	var n Instruments
	var en, tm sql.NullInt64
	_ = db.QueryRowContext(ctx, Mark+" SELECT COUNT(*), SUM(ENABLED = 'YES'), SUM(TIMED = 'YES') FROM performance_schema.setup_instruments WHERE NAME LIKE ?",
		pattern).Scan(&n.Total, &en, &tm)
	n.Enabled, n.Timed = int(en.Int64), int(tm.Int64)
	return n
}

// Check gathers capabilities and runs every rule.
func Check(ctx context.Context, db *sql.DB) (CheckReport, error) {
	c, err := GatherCapabilities(ctx, db)
	if err != nil {
		return CheckReport{Server: c.Server}, err
	}
	return CheckReport{Server: c.Server, Findings: Findings(c)}, nil
}

// Findings runs the rules over gathered capabilities, most severe first.
func Findings(c Capabilities) []event.Finding {
	var out []event.Finding
	for _, rule := range checkRules {
		out = append(out, rule(c)...)
	}
	slices.SortStableFunc(out, func(a, b event.Finding) int { return severityRank(b.Severity) - severityRank(a.Severity) })
	if out == nil {
		out = []event.Finding{}
	}
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

var checkRules = []func(Capabilities) []event.Finding{
	rulePerformanceSchema, ruleStatementConsumers, ruleStageConsumers, ruleWaitConsumers,
	ruleInstruments, ruleWaitTimer, ruleThreadPool, ruleGrants,
}

func rulePerformanceSchema(c Capabilities) []event.Finding {
	if c.Server.PerformanceSchema {
		return nil
	}
	return []event.Finding{{
		Code: "PS_OFF", Severity: event.SeverityCritical,
		Summary:  "performance_schema is OFF: no server-side statement times, so wire and server cannot be joined",
		Evidence: map[string]any{"performance_schema": "OFF"},
		Fix: "add under [mysqld]: performance_schema=ON, performance-schema-consumer-events-statements-current=ON, " +
			"performance-schema-consumer-events-statements-history=ON, performance-schema-consumer-events-statements-history-long=ON; restart (static variable)",
	}}
}

// consumerFinding reports consumers of one area that are off. Consumers form
// a hierarchy: *_history(_long) stay empty unless *_current is on too.
func consumerFinding(c Capabilities, code string, sev event.Severity, why string, names []string) []event.Finding {
	if !c.Server.PerformanceSchema || c.Consumers == nil {
		return nil
	}
	var off []string
	for _, n := range names {
		if !c.Consumers[n] {
			off = append(off, n)
		}
	}
	if len(off) == 0 {
		return nil
	}
	var cnf []string
	for _, n := range off {
		cnf = append(cnf, "performance-schema-consumer-"+strings.ReplaceAll(n, "_", "-")+"=ON")
	}
	return []event.Finding{{
		Code: code, Severity: sev,
		Summary:  fmt.Sprintf("consumers off: %s; %s", strings.Join(off, ", "), why),
		Evidence: map[string]any{"consumers_off": off},
		Fix: fmt.Sprintf("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN (%s); to keep it across restarts add under [mysqld]: %s",
			quoteList(off), strings.Join(cnf, ", ")),
	}}
}

func ruleStatementConsumers(c Capabilities) []event.Finding {
	return consumerFinding(c, "STATEMENT_HISTORY_OFF", event.SeverityCritical,
		"statement history is what gapscope joins to the wire (history tables stay empty while events_statements_current is off)",
		[]string{"global_instrumentation", "thread_instrumentation", "events_statements_current",
			"events_statements_history", "events_statements_history_long", "statements_digest"})
}

func ruleStageConsumers(c Capabilities) []event.Finding {
	return consumerFinding(c, "STAGE_HISTORY_OFF", event.SeverityWarning,
		"stages (e.g. 'Sending data') show where a statement spent its server time, including blocked sends",
		[]string{"events_stages_current", "events_stages_history_long"})
}

func ruleWaitConsumers(c Capabilities) []event.Finding {
	return consumerFinding(c, "WAIT_HISTORY_OFF", event.SeverityWarning,
		"socket waits show the server blocked on a client that does not read",
		[]string{"events_waits_current", "events_waits_history_long"})
}

func ruleInstruments(c Capabilities) []event.Finding {
	if !c.Server.PerformanceSchema {
		return nil
	}
	var out []event.Finding
	for _, p := range instrumentPatterns {
		n, ok := c.Instruments[p]
		if !ok || (n.Enabled == n.Total && n.Timed == n.Total) {
			continue
		}
		sev := event.SeverityWarning
		if p == "statement/%" {
			sev = event.SeverityCritical
		}
		opt := strings.TrimSuffix(p, "%") + "%"
		out = append(out, event.Finding{
			Code: "INSTRUMENTS_OFF", Severity: sev,
			Summary:  fmt.Sprintf("%d of %d %s instruments enabled, %d timed", n.Enabled, n.Total, p, n.Timed),
			Evidence: map[string]any{"pattern": p, "total": n.Total, "enabled": n.Enabled, "timed": n.Timed},
			Fix: fmt.Sprintf("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME LIKE '%s'; across restarts: performance-schema-instrument='%s=ON' under [mysqld]",
				p, opt),
		})
	}
	return out
}

func ruleWaitTimer(c Capabilities) []event.Finding {
	if !c.Server.PerformanceSchema || c.Server.Timers["wait"] != "CYCLE" {
		return nil
	}
	return []event.Finding{{
		Code: "WAIT_TIMER_CYCLE", Severity: event.SeverityWarning,
		Summary:  "waits are timed with the CYCLE timer: its own origin and a ~0.1% rate error, so waits do not line up with statements",
		Evidence: map[string]any{"timers": c.Server.Timers},
		Fix:      "UPDATE performance_schema.setup_timers SET TIMER_NAME = 'NANOSECOND' WHERE NAME = 'wait' (gapscope does this itself when it may UPDATE setup_timers)",
	}}
}

func ruleThreadPool(c Capabilities) []event.Finding {
	s := c.Server
	if !s.ThreadPool {
		if s.MariaDB() {
			return []event.Finding{{Code: "THREAD_POOL_OFF", Severity: event.SeverityInfo,
				Summary:  "one thread per connection: no thread-pool queueing to measure",
				Evidence: map[string]any{"thread_handling": s.ThreadHandling},
				Fix:      "nothing to fix; with thread_handling=pool-of-threads, gapscope measures the queue wait the server cannot see"}}
		}
		return nil
	}
	var out []event.Finding
	var unreadable []string
	for _, t := range poolTables {
		if e, ok := c.PoolTables[t]; ok && e != "" {
			unreadable = append(unreadable, t+": "+e)
		}
	}
	if s.MariaDB() && !s.ThreadPoolTables {
		out = append(out, event.Finding{Code: "THREAD_POOL_TABLES_MISSING", Severity: event.SeverityWarning,
			Summary:  "thread pool on, but information_schema.THREAD_POOL_* tables are absent (MariaDB < 10.5?)",
			Evidence: map[string]any{"version": s.Version},
			Fix:      "upgrade to MariaDB 10.5+; gapscope still measures the queue wait on the wire"})
	}
	if len(unreadable) > 0 {
		out = append(out, event.Finding{Code: "THREAD_POOL_TABLES_UNREADABLE", Severity: event.SeverityWarning,
			Summary:  "thread-pool tables cannot be read",
			Evidence: map[string]any{"errors": unreadable},
			Fix:      "GRANT PROCESS ON *.* TO <gapscope user>"})
	}
	if s.ExtraPort == 0 {
		out = append(out, event.Finding{Code: "THREAD_POOL_NO_EXTRA_PORT", Severity: event.SeverityInfo,
			Summary:  "thread pool on without extra_port: gapscope's own reads queue in the same pool they measure",
			Evidence: map[string]any{"thread_handling": s.ThreadHandling, "thread_pool_size": s.ThreadPoolSize},
			Fix:      "add under [mysqld]: extra_port=3307 (and extra_max_connections=10); point gapscope's --dsn at that port"})
	}
	return out
}

var grantLine = regexp.MustCompile(`(?i)^GRANT (.+?) ON (\S+) TO `)

// grantSet parses SHOW GRANTS into privilege -> objects.
func grantSet(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range lines {
		m := grantLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		obj := strings.ReplaceAll(m[2], "`", "")
		for _, p := range strings.Split(m[1], ",") {
			p = strings.ToUpper(strings.TrimSpace(p))
			if i := strings.IndexByte(p, '('); i > 0 { // column grants: SELECT (a, b)
				p = strings.TrimSpace(p[:i])
			}
			out[p] = append(out[p], obj)
		}
	}
	return out
}

func hasGrant(g map[string][]string, priv string, objects ...string) bool {
	for _, p := range []string{priv, "ALL PRIVILEGES", "ALL"} {
		for _, o := range g[p] {
			if slices.Contains(objects, strings.ToLower(o)) {
				return true
			}
		}
	}
	return false
}

func ruleGrants(c Capabilities) []event.Finding {
	g := grantSet(c.Grants)
	var out []event.Finding
	minimal := "CREATE USER 'gapscope'@'<host>' IDENTIFIED BY '<password>'; GRANT PROCESS ON *.* TO 'gapscope'@'<host>'; " +
		"GRANT SELECT ON performance_schema.* TO 'gapscope'@'<host>'; GRANT UPDATE ON performance_schema.setup_timers TO 'gapscope'@'<host>'"
	if !hasGrant(g, "PROCESS", "*.*") {
		out = append(out, event.Finding{Code: "GRANT_PROCESS_MISSING", Severity: event.SeverityWarning,
			Summary:  "no PROCESS privilege: processlist shows only gapscope's own connections and thread-pool tables may be unreadable",
			Evidence: map[string]any{"grants": c.Grants}, Fix: "GRANT PROCESS ON *.* TO " + userOf(c)})
	}
	if !hasGrant(g, "SELECT", "*.*", "performance_schema.*") {
		out = append(out, event.Finding{Code: "GRANT_PS_SELECT_MISSING", Severity: event.SeverityCritical,
			Summary:  "no SELECT on performance_schema: no server-side statements",
			Evidence: map[string]any{"grants": c.Grants}, Fix: "GRANT SELECT ON performance_schema.* TO " + userOf(c)})
	}
	var broad []string
	for _, p := range []string{"ALL PRIVILEGES", "ALL", "SUPER"} {
		if slices.Contains(g[p], "*.*") {
			broad = append(broad, p+" ON *.*")
		}
	}
	if len(broad) > 0 {
		out = append(out, event.Finding{Code: "GRANT_EXCESSIVE", Severity: event.SeverityWarning,
			Summary:  fmt.Sprintf("gapscope runs as %s with %s: a monitor needs only PROCESS and SELECT on performance_schema", c.Server.CurrentUser, strings.Join(broad, ", ")),
			Evidence: map[string]any{"current_user": c.Server.CurrentUser, "privileges": broad},
			Fix:      minimal})
	}
	return out
}

func userOf(c Capabilities) string {
	u, h, ok := strings.Cut(c.Server.CurrentUser, "@")
	if !ok {
		return "<gapscope user>"
	}
	return "'" + u + "'@'" + h + "'"
}
