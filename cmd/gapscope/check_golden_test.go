package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestCheckGolden runs check, text and json, against a sandbox with fixed
// settings, once as root and once as a narrow monitoring account, and
// compares the output, volatile values normalised, with golden files.
// A change in any finding's code, severity, summary, evidence or fix shows
// up as a diff. Regenerate with go test ./cmd/gapscope -run CheckGolden -update.
func TestCheckGolden(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{
		"--performance-schema=ON", "--thread-handling=pool-of-threads", "--thread-pool-size=1",
		"--thread-pool-stall-limit=60000", "--innodb-stats-persistent=OFF",
	}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"SET GLOBAL optimizer_trace='enabled=on'",
		"UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME='events_statements_current'",
		"CREATE USER 'mon'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT ON *.* TO 'mon'@'127.0.0.1'",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	accounts := map[string]string{
		"root": "root@tcp(" + inst.Addr() + ")/",
		"mon":  "mon:pw@tcp(" + inst.Addr() + ")/",
	}
	for name, dsn := range accounts {
		for _, format := range []string{"text", "json"} {
			out, err := runCheckCmd(t, "--dsn", dsn, "--format", format)
			if err != nil {
				t.Fatalf("check as %s: %v\n%s", name, err, out)
			}
			compareGolden(t, filepath.Join("testdata", "check-"+name+"."+format), normaliseCheck(out, inst))
		}
	}
	// Each run read the server's capabilities once: one SHOW GRANTS and one
	// count of setup_instruments per run, as the server's digests tell.
	for _, q := range []string{"SHOW GRANTS%", "SELECT CASE WHEN NAME LIKE ? THEN %setup_instruments%"} {
		var n int
		if err := db.QueryRow("SELECT COALESCE(SUM(COUNT_STAR), 0) FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST_TEXT LIKE ?", q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if runs := 2 * len(accounts); n != runs {
			t.Errorf("%d statements like %q in %d check runs, want one per run", n, q, runs)
		}
	}
}

func runCheckCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(collect.NewSecrets())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"check"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// volatile are the values that differ between runs and machines: the
// server's version, uptime and connection ids, its ports, the host's CPU
// count.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d+\.\d+\.\d+-MariaDB[\w.+-]*`), "<version>"},
	{regexp.MustCompile(`(?m)^(server: .*\(|  "version_comment": ")[^)"\n]*`), "${1}<comment>"},
	{regexp.MustCompile(`(uptime |"uptime_s": |"connection_id": )\d+`), "${1}<n>"},
	{regexp.MustCompile(`(cores["=: ]+)\d+`), "${1}<n>"},
	{regexp.MustCompile(`\d+ cores`), "<n> cores"},
}

func normaliseCheck(out string, inst *sandbox.Instance) string {
	for _, p := range []int{inst.Port, inst.ExtraPort} {
		if p > 0 {
			out = regexp.MustCompile(`\b`+strconv.Itoa(p)+`\b`).ReplaceAllString(out, "<port>")
		}
	}
	for _, v := range volatile {
		out = v.re.ReplaceAllString(out, v.with)
	}
	return out
}
