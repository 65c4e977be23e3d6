package diagnose

import (
	"context"
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// readWindow fills the configuration part of a Window from a live server
// with plain SQL, as gapscope check does through collect.
func readWindow(t *testing.T, db *sql.DB) *Window {
	t.Helper()
	ctx := context.Background()
	w := &Window{Vars: map[string]string{}, Status: map[string]string{}, Consumers: map[string]bool{},
		Instruments: map[string][2]int{}, Cores: 2, SettingsSource: "server"}
	for q, m := range map[string]map[string]string{"SHOW GLOBAL VARIABLES": w.Vars, "SHOW GLOBAL STATUS": w.Status} {
		for _, kv := range queryRows(t, db, q) {
			m[strings.ToLower(kv[0])] = kv[1]
		}
	}
	for _, kv := range queryRows(t, db, "SELECT NAME, ENABLED FROM performance_schema.setup_consumers") {
		w.Consumers[kv[0]] = kv[1] == "YES"
	}
	rows, err := db.QueryContext(ctx, "SELECT SUBSTRING_INDEX(NAME,'/',1), SUM(ENABLED='YES'), COUNT(*) FROM performance_schema.setup_instruments GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		var on, n int
		if err := rows.Scan(&c, &on, &n); err != nil {
			t.Fatal(err)
		}
		w.Instruments[c] = [2]int{on, n}
	}
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
