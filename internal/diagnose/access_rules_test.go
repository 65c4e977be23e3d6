package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

func find(fs []event.Finding, code string) *event.Finding {
	for i := range fs {
		if fs[i].Code == code {
			return &fs[i]
		}
	}
	return nil
}

// healthyCaps is a server that gives gapscope everything, as a least-privilege
// user: no check rule may fire on it.
func healthyCaps() collect.Capabilities {
	all := map[string]bool{}
	for _, n := range []string{"global_instrumentation", "thread_instrumentation", "events_statements_current",
		"events_statements_history", "events_statements_history_long", "statements_digest",
		"events_stages_current", "events_stages_history_long", "events_waits_current", "events_waits_history_long"} {
		all[n] = true
	}
	for _, n := range []string{"events_stages_history", "events_waits_history", "events_transactions_current",
		"events_transactions_history", "events_transactions_history_long"} {
		all[n] = false // not read by gapscope: left off (every consumer on has a cost)
	}
	return collect.Capabilities{
		Server: collect.ServerInfo{Flavor: "mariadb", Version: "10.11.19-MariaDB", Major: 10, Minor: 11, PerformanceSchema: true,
			Timers: map[string]string{"statement": "NANOSECOND", "wait": "NANOSECOND"}, CurrentUser: "gapscope@%",
			ThreadHandling: "pool-of-threads", ThreadPool: true, ThreadPoolTables: true, ExtraPort: 3307},
		Consumers: all,
		Instruments: map[string]collect.Instruments{"statement": {Total: 219, Enabled: 219, Timed: 219},
			"stage": {Total: 158, Enabled: 158, Timed: 158}, "wait/io/socket": {Total: 3, Enabled: 3, Timed: 3},
			"wait/synch": {Total: 288}},
		Grants: []string{"GRANT PROCESS ON *.* TO `gapscope`@`%`",
			"GRANT SELECT ON `performance_schema`.* TO `gapscope`@`%`"},
		PoolTables: map[string]string{"THREAD_POOL_GROUPS": "", "THREAD_POOL_QUEUES": "", "THREAD_POOL_STATS": "", "THREAD_POOL_WAITS": ""},
	}
}

func checkFindings(c collect.Capabilities) []event.Finding {
	return Run(CapabilitiesWindow(c, map[string]string{"performance_schema": onOff(c.Server.PerformanceSchema)}, nil, 0), CheckRules()...)
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func TestCheckHealthyServerIsSilent(t *testing.T) {
	if fs := checkFindings(healthyCaps()); len(fs) != 0 {
		t.Fatalf("findings on a healthy server: %s", dump(fs))
	}
}

func TestCheckMariaDBDefaults(t *testing.T) {
	c := healthyCaps()
	// MariaDB's defaults with performance_schema=ON: no *_current/history.
	for _, n := range []string{"events_statements_current", "events_statements_history", "events_statements_history_long",
		"events_stages_current", "events_stages_history_long", "events_waits_current", "events_waits_history_long"} {
		c.Consumers[n] = false
	}
	c.Instruments["stage"] = collect.Instruments{Total: 158, Enabled: 8, Timed: 8}
	c.Instruments["wait/io/socket"] = collect.Instruments{Total: 3}
	c.Server.Timers["wait"] = "CYCLE"
	fs := checkFindings(c)
	for _, want := range []string{CodeMissingConsumers, CodeStageHistoryOff, CodeWaitHistoryOff, CodeInstrumentsOff, CodeWaitTimerCycle} {
		if find(fs, want) == nil {
			t.Errorf("missing %s in %v", want, codes(fs))
		}
	}
	st := find(fs, CodeMissingConsumers)
	if st.Severity != event.SeverityCritical || !strings.Contains(st.Fix, "'events_statements_current'") ||
		!strings.Contains(st.Fix, "performance-schema-consumer-events-statements-history-long=ON") {
		t.Errorf("statement finding = %+v", st)
	}
	if fs[0].Severity != event.SeverityCritical {
		t.Errorf("findings not ordered by severity: %v", codes(fs))
	}
	var stage *event.Finding
	for i := range fs {
		if fs[i].Code == CodeInstrumentsOff && fs[i].Evidence["pattern"] == "stage/%" {
			stage = &fs[i]
		}
	}
	if stage == nil || stage.Evidence["enabled"] != 8 || !strings.Contains(stage.Fix, "LIKE 'stage/%'") {
		t.Errorf("stage instruments finding = %+v", stage)
	}
}

func TestCheckPerformanceSchemaOff(t *testing.T) {
	c := healthyCaps()
	c.Server.PerformanceSchema = false
	c.Consumers, c.Instruments = nil, nil
	fs := checkFindings(c)
	if !slices.Equal(codes(fs), []string{CodePerformanceSchemaOff}) {
		t.Fatalf("findings = %v, want only PS_OFF", codes(fs))
	}
	if !strings.Contains(fs[0].Fix, "performance_schema=ON") || !strings.Contains(fs[0].Fix, "performance-schema-consumer-events-statements-history-long=ON") {
		t.Errorf("fix = %q", fs[0].Fix)
	}
}

func TestCheckGrants(t *testing.T) {
	c := healthyCaps()
	c.Grants = []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122' WITH GRANT OPTION"}
	c.Server.CurrentUser = "root@localhost"
	fs := checkFindings(c)
	if !slices.Equal(codes(fs), []string{CodeExcessGrants}) {
		t.Fatalf("root: findings = %v", codes(fs))
	}
	if ev := dump(fs); strings.Contains(ev, "D821809F") || !strings.Contains(fs[0].Summary, "root@localhost") {
		t.Errorf("root: a password hash in evidence, or no user in the summary: %s", ev)
	}
	if fs[0].Fix != minimalGrants {
		t.Errorf("excess grants fix %q, want the one minimal account", fs[0].Fix)
	}
	c.Grants = []string{"GRANT USAGE ON *.* TO `app`@`%`", "GRANT SELECT, INSERT ON `shop`.* TO `app`@`%`"}
	c.Server.CurrentUser = "app@%"
	fs = checkFindings(c)
	for _, want := range []string{CodeGrantProcessMissing, CodeGrantPSSelectMissing} {
		if f := find(fs, want); f == nil || !strings.Contains(f.Fix, "'app'@'%'") {
			t.Errorf("%s missing or fix without the user: %v", want, fs)
		}
	}
	c.Grants = []string{"GRANT SUPER, PROCESS ON *.* TO `ops`@`%`", "GRANT SELECT ON *.* TO `ops`@`%`"}
	fs = checkFindings(c)
	if !slices.Equal(codes(fs), []string{CodeExcessGrants}) {
		t.Errorf("SUPER: findings = %v", codes(fs))
	}
}

func TestCheckThreadPool(t *testing.T) {
	c := healthyCaps()
	c.Server.ExtraPort = 0
	c.PoolTables["THREAD_POOL_QUEUES"] = "Error 1227: Access denied; you need the PROCESS privilege"
	fs := checkFindings(c)
	if find(fs, CodeThreadPoolNoExtraPort) == nil || find(fs, CodeThreadPoolTablesUnreadable) == nil {
		t.Errorf("findings = %v", codes(fs))
	}
	c = healthyCaps()
	c.Server.ThreadPool, c.Server.ThreadHandling = false, "one-thread-per-connection"
	if f := find(checkFindings(c), CodeThreadPoolOff); f == nil || f.Severity != event.SeverityInfo {
		t.Errorf("thread pool off: %v", checkFindings(c))
	}
}

func TestGrantSetColumnGrants(t *testing.T) {
	g := grantSet([]string{"GRANT SELECT (`a`, `b`), UPDATE ON `db`.`t` TO `u`@`%`"})
	if !slices.Equal(g["SELECT"], []string{"db.t"}) || !slices.Equal(g["UPDATE"], []string{"db.t"}) {
		t.Errorf("grantSet = %v", g)
	}
}

func TestRedactGrants(t *testing.T) {
	for _, g := range []string{
		"GRANT USAGE ON *.* TO `m`@`%` IDENTIFIED BY PASSWORD '*D821809F681A40A6E379B50D0463EFAE20BDD122'",
		"GRANT USAGE ON *.* TO `m`@`%` IDENTIFIED VIA ed25519 USING 'ZIgUREUg5PVgQ6LskhXmO+eZLS0nC8be6HPjYWR4YJY'",
		"GRANT USAGE ON *.* TO `m`@`%` IDENTIFIED VIA mysql_native_password USING '*D821809F681A40A6E379B50D0463EFAE20BDD122' OR unix_socket",
	} {
		got := redactGrants([]string{g})[0]
		if strings.Contains(got, "D821809F") || strings.Contains(got, "ZIgUREUg") || !strings.Contains(got, "'<redacted>'") || !strings.HasPrefix(got, "GRANT USAGE ON *.* TO `m`@`%` IDENTIFIED") {
			t.Errorf("redactGrants(%q) = %q", g, got)
		}
	}
}
