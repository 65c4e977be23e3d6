package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// TestConfigDefaults: documented defaults trip nothing except what really is
// missing for gapscope: performance_schema is OFF by default in MariaDB;
// with it on MariaDB records no statement history, and MySQL keeps only the
// per-thread history, not the long one that gapscope reads.
func TestConfigDefaults(t *testing.T) {
	want := map[string][]string{
		"mysql-5.7": {CodeMissingConsumers}, "mysql-8.0": {CodeMissingConsumers}, "mysql-8.4": {CodeMissingConsumers},
		"mariadb-10.4": {CodePerformanceSchemaOff}, "mariadb-10.6": {CodePerformanceSchemaOff},
		"mariadb-10.11": {CodePerformanceSchemaOff}, "mariadb-10.11-ps": {CodeMissingConsumers},
	}
	for name, fx := range fixtures(t) {
		w, ok := want[name]
		if !ok {
			t.Errorf("fixture %s has no expectation", name)
			continue
		}
		got := Run(fx.window(), ConfigRules()...)
		if !slices.Equal(codes(got), w) {
			t.Errorf("%s: codes %v, want %v\n%s", name, codes(got), w, dump(got))
		}
	}
}

func TestMissingConsumersGivesSQL(t *testing.T) {
	fx := fixtures(t)
	f := only(t, Run(fx["mariadb-10.11-ps"].window(), ConfigRules()...), CodeMissingConsumers, 1)[0]
	checkFinding(t, f)
	if got := f.Evidence["missing_consumers"].([]string); !slices.Equal(got, []string{"events_statements_current", "events_statements_history_long", "events_statements_history"}) {
		t.Errorf("missing %v", got)
	}
	if !strings.Contains(f.Fix, "UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN ('events_statements_current','events_statements_history_long','events_statements_history');") {
		t.Errorf("fix %q", f.Fix)
	}
	// The options named are those of the consumers off, and only those.
	if !strings.Contains(f.Fix, "performance-schema-consumer-events-statements-current=ON, performance-schema-consumer-events-statements-history-long=ON, performance-schema-consumer-events-statements-history=ON") ||
		strings.Count(f.Fix, "performance-schema-consumer-") != 3 || f.Severity != event.SeverityCritical {
		t.Errorf("fix %q (%s)", f.Fix, f.Severity)
	}
	off := Run(fx["mariadb-10.11"].window(), ConfigRules()...)
	only(t, off, CodeMissingConsumers, 0)
	ps := only(t, off, CodePerformanceSchemaOff, 1)[0]
	if !strings.Contains(ps.Fix, "performance_schema=ON") || !strings.Contains(ps.Summary, "OFF") {
		t.Errorf("performance_schema OFF finding: %q / %q", ps.Summary, ps.Fix)
	}
	w := fx["mariadb-10.11-ps"].window()
	w.Consumers["events_statements_current"], w.Consumers["events_statements_history_long"] = true, true
	w.Consumers["events_statements_history"] = true
	w.Instruments["statement"] = collect.Instruments{Total: 219, Enabled: 100, Timed: 100}
	f = only(t, Run(w, ConfigRules()...), CodeMissingConsumers, 1)[0]
	if !strings.Contains(f.Fix, "setup_instruments SET ENABLED='YES', TIMED='YES' WHERE NAME LIKE 'statement/%'") || strings.Contains(f.Fix, "setup_consumers") {
		t.Errorf("statement instruments off: fix %q", f.Fix)
	}
}

// TestMissingConsumersNamesExactlyWhatIsOff: one consumer off, the fix names
// it (runtime SQL and my.cnf option) and no other.
func TestMissingConsumersNamesExactlyWhatIsOff(t *testing.T) {
	for _, off := range neededStatementConsumers {
		w := fixtures(t)["mariadb-10.11-ps"].window()
		for _, c := range neededStatementConsumers {
			w.Consumers[c] = c != off
		}
		w.Consumers[threadHistoryConsumer] = true
		f := only(t, Run(w, ConfigRules()...), CodeMissingConsumers, 1)[0]
		opt := "performance-schema-consumer-" + strings.ReplaceAll(off, "_", "-") + "=ON"
		if !strings.Contains(f.Fix, "WHERE NAME IN ('"+off+"');") || !strings.Contains(f.Fix, opt) || strings.Count(f.Fix, "performance-schema-consumer-") != 1 {
			t.Errorf("%s off: fix %q", off, f.Fix)
		}
		if want := event.SeverityCritical; off == "statements_digest" && f.Severity == want || off != "statements_digest" && f.Severity != want {
			t.Errorf("%s off: severity %s", off, f.Severity)
		}
	}
}

// Without the per-thread history alone, check says which statements
// watch cannot join, as a warning (history_long still joins the rest).
func TestMissingThreadHistorySaysWhatIsLost(t *testing.T) {
	w := fixtures(t)["mariadb-10.11-ps"].window()
	for _, c := range neededStatementConsumers {
		w.Consumers[c] = true
	}
	w.Consumers[threadHistoryConsumer] = false
	f := only(t, Run(w, ConfigRules()...), CodeMissingConsumers, 1)[0]
	if got := f.Evidence["missing_consumers"].([]string); !slices.Equal(got, []string{threadHistoryConsumer}) {
		t.Errorf("missing %v", got)
	}
	if !strings.Contains(f.Summary, "cannot join the slow statements of busy connections") || !strings.Contains(f.Fix, "('events_statements_history')") ||
		f.Severity != event.SeverityWarning {
		t.Errorf("summary %q, fix %q, severity %s", f.Summary, f.Fix, f.Severity)
	}
}

func TestConcurrencyCapInnoDB(t *testing.T) {
	for name, fx := range fixtures(t) {
		w := fx.window()
		_, exists := w.Vars["innodb_thread_concurrency"]
		w.Vars["innodb_thread_concurrency"] = "32"
		w.Status["Threads_running"] = "41"
		if !exists {
			delete(w.Vars, "innodb_thread_concurrency") // removed in MariaDB 10.6
		}
		fs := only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, map[bool]int{true: 1, false: 0}[exists])
		if !exists {
			continue
		}
		f := fs[0]
		checkFinding(t, f)
		if f.Evidence["innodb_thread_concurrency"] != int64(32) || f.Evidence["Threads_running"] != int64(41) || f.Severity != event.SeverityCritical {
			t.Errorf("%s: %s", name, dump(fs))
		}
		if !strings.Contains(f.Fix, "SET GLOBAL innodb_thread_concurrency=0") {
			t.Errorf("%s: fix %q", name, f.Fix)
		}
	}
}

func checkConcurrencyCapRule() Rule { return Rule{CodeConcurrencyCap, checkConcurrencyCap} }

func TestConcurrencyCapThreadPool(t *testing.T) {
	fx := fixtures(t)
	for _, name := range []string{"mariadb-10.4", "mariadb-10.6", "mariadb-10.11"} {
		w := fx[name].window()
		w.Vars["thread_handling"] = "pool-of-threads"
		only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, 0) // defaults: 4 x (3+1) = 16 ≥ 4 cores
		w.Vars["thread_pool_size"], w.Vars["thread_pool_oversubscribe"] = "1", "0"
		f := only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, 1)[0]
		if f.Evidence["active_limit"] != int64(1) || !strings.Contains(f.Summary, "at most 1 statements") {
			t.Errorf("%s: %s", name, dump([]event.Finding{f}))
		}
	}
	// Percona Server shares MariaDB's pool variables.
	w := fx["mysql-8.0"].window()
	w.Flavor = "percona"
	w.Vars["thread_handling"], w.Vars["thread_pool_size"], w.Vars["thread_pool_oversubscribe"] = "pool-of-threads", "2", "0"
	w.Status["Threads_running"] = "2"
	only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, 1)
	// MySQL Enterprise: the plugin's variables exist only when it is loaded.
	w = fx["mysql-8.4"].window()
	w.Vars["thread_pool_size"], w.Vars["thread_pool_max_active_query_threads"], w.Vars["thread_pool_stall_limit"] = "2", "1", "6"
	f := only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, 1)[0]
	if f.Evidence["active_limit"] != int64(2) {
		t.Errorf("enterprise cap %v, want 2", f.Evidence["active_limit"])
	}
}

func TestConcurrencyCapMaxConnections(t *testing.T) {
	for name, fx := range fixtures(t) {
		w := fx.window()
		w.Status["Max_used_connections"] = "151"
		w.Status["Connection_errors_max_connections"] = "37"
		f := only(t, Run(w, checkConcurrencyCapRule()), CodeConcurrencyCap, 1)[0]
		if f.Evidence["max_connections"] != int64(151) || f.Evidence["Connection_errors_max_connections"] != int64(37) || !strings.Contains(f.Fix, "max_connections=302") {
			t.Errorf("%s: %s", name, dump([]event.Finding{f}))
		}
	}
}

func TestPoolSizing(t *testing.T) {
	fx := fixtures(t)
	for _, name := range []string{"mariadb-10.4", "mariadb-10.6", "mariadb-10.11"} {
		w := fx[name].window()
		w.Vars["thread_handling"], w.Vars["thread_pool_size"] = "pool-of-threads", "4"
		only(t, Run(w, Rule{CodePoolSizing, checkPoolSizing}), CodePoolSizing, 0)
		w.Vars["thread_pool_size"], w.Vars["thread_pool_stall_limit"] = "1", "60000"
		fs := only(t, Run(w, Rule{CodePoolSizing, checkPoolSizing}), CodePoolSizing, 2)
		if !strings.Contains(fs[0].Fix+fs[1].Fix, "thread_pool_size=4") || !strings.Contains(fs[0].Fix+fs[1].Fix, "thread_pool_stall_limit=500") {
			t.Errorf("%s: %s", name, dump(fs))
		}
		if !strings.Contains(fs[0].Summary+fs[1].Summary, "60.00 s") {
			t.Errorf("%s: stall summary should say how long a request may wait: %s", name, dump(fs))
		}
	}
	w := fx["mysql-8.0"].window()
	w.Vars["thread_pool_size"], w.Vars["thread_pool_stall_limit"] = "4", "600"
	f := only(t, Run(w, Rule{CodePoolSizing, checkPoolSizing}), CodePoolSizing, 1)[0]
	if !strings.Contains(f.Summary, "6000 ms") || !strings.Contains(f.Fix, "thread_pool_stall_limit=6 (60 ms)") {
		t.Errorf("enterprise stall: %s", dump([]event.Finding{f}))
	}
	// A configured but unused pool (thread_handling=one-thread-per-connection) says nothing.
	w = fx["mariadb-10.11"].window()
	w.Vars["thread_pool_size"] = "1"
	only(t, Run(w, Rule{CodePoolSizing, checkPoolSizing}), CodePoolSizing, 0)
}

func TestInstrumentationCost(t *testing.T) {
	fx := fixtures(t)
	w := fx["mariadb-10.11-ps"].window()
	for class, c := range w.Instruments {
		w.Instruments[class] = collect.Instruments{Total: c.Total, Enabled: c.Total, Timed: c.Total}
	}
	for name := range w.Consumers {
		w.Consumers[name] = true
	}
	f := only(t, Run(w, ConfigRules()...), CodeInstrumentationCost, 1)[0]
	checkFinding(t, f)
	if m := f.Evidence["measured"].(string); !strings.Contains(m, "measured by gapscope overhead on") || !strings.Contains(m, "x0.71") {
		t.Errorf("measured %q", m)
	}
	if f.Evidence["consumers_on"] != 15 || !strings.Contains(f.Summary, "995 of 995 instruments") || !strings.Contains(f.Summary, "29%") ||
		!strings.Contains(f.Evidence["estimate"].(string), "with this configuration") {
		t.Errorf("evidence: %s", dump([]event.Finding{f}))
	}
	for name, fx := range fixtures(t) {
		w := fx.window()
		w.Vars["optimizer_trace"] = "enabled=on,one_line=off"
		f := only(t, Run(w, ConfigRules()...), CodeInstrumentationCost, 1)[0]
		if m := f.Evidence["measured"].(string); !strings.Contains(m, "x0.62") || !strings.Contains(f.Fix, "SET GLOBAL optimizer_trace='enabled=off'") {
			t.Errorf("%s: %s", name, dump([]event.Finding{f}))
		}
	}
}

// TestInstrumentationCostMatchesConfiguration: statement, stage and socket
// instruments on with every synchronisation wait off is not the measured
// "all on" configuration and costs little: no finding. Synchronisation
// waits on without everything else: the finding calls the measured cost an
// upper bound and never claims the 29%.
func TestInstrumentationCostMatchesConfiguration(t *testing.T) {
	w := fixtures(t)["mariadb-10.11-ps"].window()
	for _, class := range []string{"statement", "stage", "wait/io/socket"} {
		n := w.Instruments[class].Total
		w.Instruments[class] = collect.Instruments{Total: n, Enabled: n, Timed: n}
	}
	for _, c := range append(neededStatementConsumers, "events_stages_current", "events_stages_history_long") {
		w.Consumers[c] = true
	}
	only(t, Run(w, ConfigRules()...), CodeInstrumentationCost, 0)

	synch := w.Instruments["wait/synch"].Total
	w.Instruments["wait/synch"] = collect.Instruments{Total: synch, Enabled: synch, Timed: synch}
	f := only(t, Run(w, ConfigRules()...), CodeInstrumentationCost, 1)[0]
	checkFinding(t, f)
	if strings.Contains(f.Summary, "29%") || !strings.Contains(f.Summary, "at most") ||
		!strings.Contains(f.Summary, fmt.Sprintf("synchronisation waits: %d of %d", synch, synch)) ||
		!strings.Contains(f.Evidence["estimate"].(string), "upper bound") {
		t.Errorf("partial configuration: %s", dump([]event.Finding{f}))
	}
	// Enabled but not timed costs less than the measurement: not "on".
	w.Instruments["wait/synch"] = collect.Instruments{Total: synch, Enabled: synch}
	only(t, Run(w, ConfigRules()...), CodeInstrumentationCost, 0)
}

func TestTransientStats(t *testing.T) {
	for name, fx := range fixtures(t) {
		w := fx.window()
		w.Vars["innodb_stats_persistent"] = "OFF"
		w.Vars["innodb_stats_on_metadata"] = "ON"
		fs := only(t, Run(w, ConfigRules()...), CodeTransientStats, 2)
		if !strings.Contains(fs[0].Summary, "re-sampled from 8 pages") || !strings.Contains(fs[0].Fix, "SET GLOBAL innodb_stats_persistent=ON") {
			t.Errorf("%s: %s", name, dump(fs))
		}
		if fs[0].Evidence["innodb_stats_persistent"] != "OFF" || fs[1].Evidence["innodb_stats_on_metadata"] != "ON" {
			t.Errorf("%s: evidence %s", name, dump(fs))
		}
		w = fx.window()
		w.Vars["innodb_stats_auto_recalc"] = "OFF"
		f := only(t, Run(w, ConfigRules()...), CodeTransientStats, 1)[0]
		if f.Severity != event.SeverityInfo || !strings.Contains(f.Summary, "sample 20 pages") {
			t.Errorf("%s: %s", name, dump([]event.Finding{f}))
		}
	}
}

func TestExcessGrants(t *testing.T) {
	cases := []struct {
		name   string
		grants []string
		excess []string
		sev    event.Severity
	}{
		{"mariadb root", []string{
			"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED VIA mysql_native_password USING 'invalid' OR unix_socket WITH GRANT OPTION",
			"GRANT PROXY ON ''@'%' TO 'root'@'localhost' WITH GRANT OPTION",
		}, []string{"ALL PRIVILEGES", "GRANT OPTION"}, event.SeverityCritical},
		{"mysql 8 admin", []string{
			"GRANT SELECT, INSERT, RELOAD, PROCESS, SUPER, REPLICATION CLIENT ON *.* TO `ops`@`%`",
			"GRANT BACKUP_ADMIN,SYSTEM_VARIABLES_ADMIN ON *.* TO `ops`@`%`",
			"GRANT `monitor`@`%` TO `ops`@`%`",
		}, []string{"SELECT", "INSERT", "RELOAD", "SUPER", "REPLICATION CLIENT", "BACKUP_ADMIN", "SYSTEM_VARIABLES_ADMIN"}, event.SeverityCritical},
		{"read everything", []string{"GRANT SELECT, PROCESS ON *.* TO 'mon'@'%'"}, []string{"SELECT"}, event.SeverityWarning},
		{"minimal", []string{"GRANT PROCESS ON *.* TO `gapscope`@`%`", "GRANT SELECT ON `performance_schema`.* TO `gapscope`@`%`"}, nil, ""},
		{"garbage", []string{"", "GRANT", "GRANT ON TO", "REVOKE ALL ON *.* FROM x", "GRANT ,,, ON *.* TO"}, nil, ""},
	}
	for _, c := range cases {
		fs := Run(&Window{Grants: c.grants}, ConfigRules()...)
		if c.excess == nil {
			only(t, fs, CodeExcessGrants, 0)
			continue
		}
		f := only(t, fs, CodeExcessGrants, 1)[0]
		checkFinding(t, f)
		if got := f.Evidence["excess"].([]string); !slices.Equal(got, c.excess) || f.Severity != c.sev {
			t.Errorf("%s: excess %v severity %s, want %v %s", c.name, got, f.Severity, c.excess, c.sev)
		}
		if !strings.Contains(f.Fix, "GRANT PROCESS ON *.*") || !strings.Contains(f.Fix, "GRANT SELECT ON performance_schema.*") {
			t.Errorf("%s: fix %q", c.name, f.Fix)
		}
	}
}
