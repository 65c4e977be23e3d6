package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestCredentialsNeverReachOutputs runs every command that connects against
// a real server with a password, and looks for the password everywhere the
// run writes: stdout, stderr, the --events file, the --store database and
// the HTML report made from it. A defaults file's password and a wrong
// password are tried too.
func TestCredentialsNeverReachOutputs(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-history-long=ON"}})
	noHomeDefaults(t)
	const secret = "Sekr3t/Pw@x(1)"
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE USER 'mon'@'%' IDENTIFIED BY '" + secret + "'", "GRANT ALL ON *.* TO 'mon'@'%'"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	storePath, events := filepath.Join(dir, "runs.db"), filepath.Join(dir, "ev.jsonl")
	addr := "tcp(127.0.0.1:" + strconv.Itoa(inst.Port) + ")"
	dsn := "mon:" + secret + "@" + addr + "/"
	cnf := filepath.Join(dir, "my.cnf")
	os.WriteFile(cnf, []byte("[mysql]\nuser=mon\npassword=\""+secret+"\"\nhost=127.0.0.1\nport="+strconv.Itoa(inst.Port)+"\n"), 0o600)
	runs := []struct {
		args []string
		code int
	}{
		{[]string{"check", "--dsn", dsn}, exitOK},
		{[]string{"check", "--defaults-file", cnf}, exitOK},
		{[]string{"check", "--dsn", "mon:wrong-" + secret + "@" + addr + "/"}, exitFailure},
		{[]string{"watch", "--dsn", dsn, "--no-capture", "--no-live", "--duration", "2s", "--store", storePath, "--events", events}, exitOK},
		{[]string{"probe", "--dsn", dsn, "--count", "1", "--repeat", "1", "--inserts", "1", "--store", storePath}, exitOK},
		{[]string{"plans", "--dsn", dsn, "--duration", "1s", "--store", storePath}, exitOK},
		{[]string{"report", "--store", storePath, "-o", filepath.Join(dir, "report.html")}, exitOK},
	}
	for _, r := range runs {
		code, out, errOut := runLine(t, r.args...)
		if code != r.code {
			t.Errorf("%s: exit %d, want %d\nstderr: %s", r.args[0], code, r.code, errOut)
		}
		if strings.Contains(out+errOut, "Sekr3t") {
			t.Errorf("%v printed the password:\nstdout: %s\nstderr: %s", r.args[:1], out, errOut)
		}
		if r.args[0] == "watch" && !strings.Contains(errOut, "watching mon@"+addr) {
			t.Errorf("watch's banner does not name its target:\n%s", errOut)
		}
	}
	for _, f := range []string{storePath, storePath + "-wal", events, filepath.Join(dir, "report.html")} {
		data, err := os.ReadFile(f)
		if f == storePath+"-wal" && os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if strings.Contains(string(data), "Sekr3t") {
			t.Errorf("%s holds the password", filepath.Base(f))
		}
		if f == storePath && !strings.Contains(string(data), "mon@"+addr) {
			t.Errorf("the store's runs do not name the target mon@%s", addr)
		}
	}
}
