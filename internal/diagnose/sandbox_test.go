package diagnose

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// readWindow fills the configuration part of a Window from a live server
// with plain SQL, as gapscope check does through collect.
func readWindow(t *testing.T, db *sql.DB) *Window {
	t.Helper()
	ctx := context.Background()
	w := &Window{Vars: map[string]string{}, Status: map[string]string{}, Consumers: map[string]bool{},
		Cores: 2, SettingsSource: "server"}
	for q, m := range map[string]map[string]string{"SHOW GLOBAL VARIABLES": w.Vars, "SHOW GLOBAL STATUS": w.Status} {
		for _, kv := range queryRows(t, db, q) {
			m[strings.ToLower(kv[0])] = kv[1]
		}
	}
	for _, kv := range queryRows(t, db, "SELECT NAME, ENABLED FROM performance_schema.setup_consumers") {
		w.Consumers[kv[0]] = kv[1] == "YES"
	}
	w.Instruments = collect.InstrumentClasses(ctx, db)
	for _, g := range queryRows(t, db, "SHOW GRANTS") {
		w.Grants = append(w.Grants, g[0])
	}
	w.Version = w.Vars["version"]
	return w
}

func queryRows(t *testing.T, db *sql.DB, q string) [][]string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out
}

// fixSQL extracts the executable statements a finding's fix proposes.
var fixSQL = regexp.MustCompile(`SET GLOBAL \w+=('[^']*'|[\w.]+)|UPDATE performance_schema\.\w+ SET [^;]+|CREATE USER [^;]+|GRANT [^;]+`)

// TestConfigRulesOnLiveServer: a misconfigured MariaDB trips the config
// rules; applying the SQL their fixes propose silences every one of them.
func TestConfigRulesOnLiveServer(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{
		"--performance-schema=ON", "--thread-handling=pool-of-threads", "--thread-pool-size=1",
		"--thread-pool-stall-limit=60000", "--innodb-stats-persistent=OFF",
	}})
	root, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("SET GLOBAL optimizer_trace='enabled=on'"); err != nil {
		t.Fatal(err)
	}
	fs := Run(readWindow(t, root), ConfigRules()...)
	want := []string{CodeExcessGrants, CodeInstrumentationCost, CodeMissingConsumers, CodePoolSizing, CodePoolSizing, CodeTransientStats}
	got := codes(fs)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("codes %v, want %v\n%s", got, want, dump(fs))
	}
	for _, f := range fs {
		checkFinding(t, f)
		for _, q := range fixSQL.FindAllString(f.Fix, -1) {
			q = strings.ReplaceAll(q, "IDENTIFIED BY '...'", "IDENTIFIED BY 'pw'")
			if _, err := root.Exec(q); err != nil {
				t.Fatalf("%s fix %q: %v", f.Code, q, err)
			}
			t.Logf("%s: applied %s", f.Code, q)
		}
	}
	cfg, _ := mysql.ParseDSN(inst.DSN(""))
	cfg.User, cfg.Passwd = "gapscope", "pw"
	minimal, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer minimal.Close()
	if fs := Run(readWindow(t, minimal), ConfigRules()...); len(fs) != 0 {
		t.Fatalf("after applying the fixes, findings remain:\n%s", dump(fs))
	}
}

// checkServer reads a live server as gapscope check does (collect's
// readers, once) and applies the check rules.
func checkServer(t *testing.T, db *sql.DB) []event.Finding {
	t.Helper()
	ctx := context.Background()
	caps, err := collect.GatherCapabilities(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ServerWindow(ctx, db, caps, 2)
	if err != nil {
		t.Fatal(err)
	}
	return Run(w, CheckRules()...)
}

// TestCheckRulesOnDefaultMariaDB: a MariaDB with performance_schema ON and
// nothing else: each default gapscope cares about gives its finding; the
// consumers fix makes MISSING_CONSUMERS go and calibration work; the
// minimal account of the excess-grants fix leaves no grant finding, and an
// account without grants gets both missing-grant findings.
func TestCheckRulesOnDefaultMariaDB(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	root, err := collect.NewSecrets().Open(inst.DSN(""), "")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	fs := checkServer(t, root)
	for _, want := range []string{CodeMissingConsumers, CodeStageHistoryOff, CodeWaitHistoryOff, CodeInstrumentsOff, CodeWaitTimerCycle, CodeThreadPoolOff, CodeExcessGrants} {
		if find(fs, want) == nil {
			t.Errorf("default MariaDB: %s missing in %v", want, codes(fs))
		}
	}
	if _, err := collect.CalibrateWith(context.Background(), root, collect.CalibrateOptions{}); err != collect.ErrNoStatementHistory {
		t.Errorf("CalibrateWith on default MariaDB: %v, want ErrNoStatementHistory", err)
	}
	fix := find(fs, CodeMissingConsumers).Fix
	if _, err := root.Exec(strings.SplitN(fix, ";", 2)[0]); err != nil {
		t.Fatalf("running the fix %q: %v", fix, err)
	}
	if f := find(checkServer(t, root), CodeMissingConsumers); f != nil {
		t.Errorf("MISSING_CONSUMERS still reported after its fix: %s", f.Summary)
	}
	if _, err := collect.CalibrateWith(context.Background(), root, collect.CalibrateOptions{}); err != nil {
		t.Errorf("Calibrate after the fix: %v", err)
	}
	for _, q := range fixSQL.FindAllString(find(fs, CodeExcessGrants).Fix, -1) {
		if _, err := root.Exec(strings.ReplaceAll(q, "IDENTIFIED BY '...'", "IDENTIFIED BY 'pw'")); err != nil {
			t.Fatalf("excess grants fix %q: %v", q, err)
		}
	}
	if _, err := root.Exec("CREATE USER 'gsnone'@'%' IDENTIFIED BY 'pw'"); err != nil {
		t.Fatal(err)
	}
	as := func(user string) *sql.DB {
		db, err := collect.NewSecrets().Open(strings.Replace(inst.DSN(""), "root@", user+":pw@", 1), "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	for _, f := range checkServer(t, as("gapscope")) {
		if strings.HasPrefix(f.Code, "GRANT_") || f.Code == CodeExcessGrants || f.Code == CodeThreadPoolTablesUnreadable {
			t.Errorf("least-privileged user: %s %v", f.Code, f.Evidence)
		}
	}
	none := checkServer(t, as("gsnone"))
	for _, want := range []string{CodeGrantProcessMissing, CodeGrantPSSelectMissing} {
		if find(none, want) == nil {
			t.Errorf("user without grants: %s missing in %v", want, codes(none))
		}
	}
}

// TestFixTextsMatchLiveConfiguration: on a live MariaDB, the fix of
// MISSING_CONSUMERS names exactly the consumer turned off, and running it
// silences the finding; INSTRUMENTATION_COST is silent with statement,
// stage and socket instruments on and synchronisation waits off, an upper
// bound with the waits on, and the measured cost only with everything on.
func TestFixTextsMatchLiveConfiguration(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	exec("UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN ('events_statements_history_long', 'events_statements_history')")
	f := only(t, Run(readWindow(t, db), ConfigRules()...), CodeMissingConsumers, 1)[0]
	if !strings.Contains(f.Fix, "WHERE NAME IN ('events_statements_current');") ||
		!strings.Contains(f.Fix, "performance-schema-consumer-events-statements-current=ON") || strings.Contains(f.Fix, "history-long") {
		t.Errorf("only events_statements_current is off; fix %q", f.Fix)
	}
	exec(fixSQL.FindString(f.Fix))
	only(t, Run(readWindow(t, db), ConfigRules()...), CodeMissingConsumers, 0)

	exec("UPDATE performance_schema.setup_instruments SET ENABLED='YES', TIMED='YES' WHERE NAME LIKE 'statement/%' OR NAME LIKE 'stage/%' OR NAME LIKE 'wait/io/socket/%'",
		"UPDATE performance_schema.setup_instruments SET ENABLED='NO', TIMED='NO' WHERE NAME LIKE 'wait/synch/%'")
	only(t, Run(readWindow(t, db), ConfigRules()...), CodeInstrumentationCost, 0)

	exec("UPDATE performance_schema.setup_instruments SET ENABLED='YES', TIMED='YES' WHERE NAME LIKE 'wait/synch/%'")
	f = only(t, Run(readWindow(t, db), ConfigRules()...), CodeInstrumentationCost, 1)[0]
	if strings.Contains(f.Summary, "29%") || !strings.Contains(f.Evidence["estimate"].(string), "upper bound") {
		t.Errorf("synchronisation waits on, consumers default: %s", dump([]event.Finding{f}))
	}

	exec("UPDATE performance_schema.setup_instruments SET ENABLED='YES', TIMED='YES'", "UPDATE performance_schema.setup_consumers SET ENABLED='YES'")
	f = only(t, Run(readWindow(t, db), ConfigRules()...), CodeInstrumentationCost, 1)[0]
	if !strings.Contains(f.Summary, "29%") || !strings.Contains(f.Evidence["estimate"].(string), "with this configuration") {
		t.Errorf("everything on: %s", dump([]event.Finding{f}))
	}
}
