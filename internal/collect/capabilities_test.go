package collect

import (
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func codes(fs []event.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

func find(fs []event.Finding, code string) *event.Finding {
	for i := range fs {
		if fs[i].Code == code {
			return &fs[i]
		}
	}
	return nil
}

// healthy is a server that gives gapscope everything, as a least-privilege
// user: no rule may fire on it.
func healthy() Capabilities {
	all := map[string]bool{}
	for _, n := range []string{"global_instrumentation", "thread_instrumentation", "events_statements_current",
		"events_statements_history", "events_statements_history_long", "statements_digest",
		"events_stages_current", "events_stages_history_long", "events_waits_current", "events_waits_history_long"} {
		all[n] = true
	}
	return Capabilities{
		Server: ServerInfo{Flavor: "mariadb", Version: "10.11.19-MariaDB", Major: 10, Minor: 11, PerformanceSchema: true,
			Timers: map[string]string{"statement": "NANOSECOND", "wait": "NANOSECOND"}, CurrentUser: "gapscope@%",
			ThreadHandling: "pool-of-threads", ThreadPool: true, ThreadPoolTables: true, ExtraPort: 3307},
		Consumers: all,
		Instruments: map[string]Instruments{"statement/%": {219, 219, 219}, "stage/%": {158, 158, 158},
			"wait/io/socket/%": {3, 3, 3}},
		Grants: []string{"GRANT PROCESS ON *.* TO `gapscope`@`%`",
			"GRANT SELECT ON `performance_schema`.* TO `gapscope`@`%`"},
		PoolTables: map[string]string{"THREAD_POOL_GROUPS": "", "THREAD_POOL_QUEUES": "", "THREAD_POOL_STATS": "", "THREAD_POOL_WAITS": ""},
	}
}

func TestFindingsHealthyServerIsSilent(t *testing.T) {
	if fs := Findings(healthy()); len(fs) != 0 {
		t.Fatalf("findings on a healthy server: %v", codes(fs))
	}
}

func TestFindingsMariaDBDefaults(t *testing.T) {
	c := healthy()
	// MariaDB's defaults with performance_schema=ON: no *_current/history.
	for _, n := range []string{"events_statements_current", "events_statements_history", "events_statements_history_long",
		"events_stages_current", "events_stages_history_long", "events_waits_current", "events_waits_history_long"} {
		c.Consumers[n] = false
	}
	c.Instruments["stage/%"] = Instruments{158, 8, 8}
	c.Instruments["wait/io/socket/%"] = Instruments{3, 0, 0}
	c.Server.Timers["wait"] = "CYCLE"
	fs := Findings(c)
	for _, want := range []string{"STATEMENT_HISTORY_OFF", "STAGE_HISTORY_OFF", "WAIT_HISTORY_OFF", "INSTRUMENTS_OFF", "WAIT_TIMER_CYCLE"} {
		if find(fs, want) == nil {
			t.Errorf("missing %s in %v", want, codes(fs))
		}
	}
	st := find(fs, "STATEMENT_HISTORY_OFF")
	if st.Severity != event.SeverityCritical || !strings.Contains(st.Fix, "'events_statements_current'") ||
		!strings.Contains(st.Fix, "performance-schema-consumer-events-statements-history-long=ON") {
		t.Errorf("statement finding = %+v", st)
	}
	if fs[0].Severity != event.SeverityCritical {
		t.Errorf("findings not ordered by severity: %v", codes(fs))
	}
	var stage *event.Finding
	for i := range fs {
		if fs[i].Code == "INSTRUMENTS_OFF" && fs[i].Evidence["pattern"] == "stage/%" {
			stage = &fs[i]
		}
	}
	if stage == nil || stage.Evidence["enabled"] != 8 || !strings.Contains(stage.Fix, "LIKE 'stage/%'") {
		t.Errorf("stage instruments finding = %+v", stage)
	}
}

func TestFindingsPerformanceSchemaOff(t *testing.T) {
	c := healthy()
	c.Server.PerformanceSchema = false
	c.Consumers, c.Instruments = nil, nil
	fs := Findings(c)
	if !slices.Equal(codes(fs), []string{"PS_OFF"}) {
		t.Fatalf("findings = %v, want only PS_OFF", codes(fs))
	}
	if !strings.Contains(fs[0].Fix, "performance_schema=ON") {
		t.Errorf("fix = %q", fs[0].Fix)
	}
}

func TestFindingsGrants(t *testing.T) {
	c := healthy()
	c.Grants = []string{"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"}
	c.Server.CurrentUser = "root@localhost"
	fs := Findings(c)
	if !slices.Equal(codes(fs), []string{"GRANT_EXCESSIVE"}) {
		t.Fatalf("root: findings = %v", codes(fs))
	}
	c.Grants = []string{"GRANT USAGE ON *.* TO `app`@`%`", "GRANT SELECT, INSERT ON `shop`.* TO `app`@`%`"}
	c.Server.CurrentUser = "app@%"
	fs = Findings(c)
	for _, want := range []string{"GRANT_PROCESS_MISSING", "GRANT_PS_SELECT_MISSING"} {
		if f := find(fs, want); f == nil || !strings.Contains(f.Fix, "'app'@'%'") {
			t.Errorf("%s missing or fix without the user: %v", want, fs)
		}
	}
	c.Grants = []string{"GRANT SUPER, PROCESS ON *.* TO `ops`@`%`", "GRANT SELECT ON *.* TO `ops`@`%`"}
	fs = Findings(c)
	if !slices.Equal(codes(fs), []string{"GRANT_EXCESSIVE"}) {
		t.Errorf("SUPER: findings = %v", codes(fs))
	}
}

func TestFindingsThreadPool(t *testing.T) {
	c := healthy()
	c.Server.ExtraPort = 0
	c.PoolTables["THREAD_POOL_QUEUES"] = "Error 1227: Access denied; you need the PROCESS privilege"
	fs := Findings(c)
	if find(fs, "THREAD_POOL_NO_EXTRA_PORT") == nil || find(fs, "THREAD_POOL_TABLES_UNREADABLE") == nil {
		t.Errorf("findings = %v", codes(fs))
	}
	c = healthy()
	c.Server.ThreadPool, c.Server.ThreadHandling = false, "one-thread-per-connection"
	if f := find(Findings(c), "THREAD_POOL_OFF"); f == nil || f.Severity != event.SeverityInfo {
		t.Errorf("thread pool off: %v", Findings(c))
	}
}

func TestGrantSetColumnGrants(t *testing.T) {
	g := grantSet([]string{"GRANT SELECT (`a`, `b`), UPDATE ON `db`.`t` TO `u`@`%`"})
	if !slices.Equal(g["SELECT"], []string{"db.t"}) || !slices.Equal(g["UPDATE"], []string{"db.t"}) {
		t.Errorf("grantSet = %v", g)
	}
}
