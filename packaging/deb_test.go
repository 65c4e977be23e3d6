// Package packaging holds what `make deb` stages (build-deb.sh, the systemd
// unit, /etc/default/gapscope, the maintainer scripts) and its test: the
// package built, installed with dpkg, used, verified and purged.
package packaging

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

const unit = "/usr/lib/systemd/system/gapscope.service"

// TestDebInstallsAndPurges builds the package with make deb, installs it
// with dpkg, runs gapscope version and man gapscope-watch, checks the unit
// with systemd-analyze verify, runs watch as the unit would (the gapscope
// user, CAP_NET_RAW only, no new privileges, the credentials from the
// option file postinst made) against a sandbox, and without the capability
// to see that it is the one capture needs, and purges the package,
// leaving the machine as it was. It needs root and dpkg, so it runs in CI
// and on a developer's root shell, and it stays away from a machine where
// gapscope is installed or a gapscope user exists.
func TestDebInstallsAndPurges(t *testing.T) {
	if testing.Short() {
		t.Skip("installs a package: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("installing a package needs root")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "man", "systemd-analyze", "setpriv", "adduser"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", "gapscope").Output(); err == nil && strings.Contains(string(out), "installed") {
		t.Skip("gapscope is installed on this machine: the test would remove it")
	}
	if _, err := exec.Command("getent", "passwd", "gapscope").Output(); err == nil {
		t.Skip("a gapscope user exists: purging the package would delete it")
	}

	deb := buildDeb(t)
	t.Cleanup(func() { purge(t) })
	run(t, "dpkg", "-i", deb)

	t.Run("files", checkInstalledFiles)
	t.Run("version", func(t *testing.T) {
		if out := run(t, "/usr/bin/gapscope", "version"); !strings.HasPrefix(out, "gapscope ") {
			t.Errorf("gapscope version: %q", out)
		}
	})
	t.Run("man", checkMan)
	t.Run("completion", checkBashCompletion)
	t.Run("systemd-analyze verify", func(t *testing.T) {
		// verify exits 0 on warnings (an unknown key) but prints them.
		if out := run(t, "systemd-analyze", "verify", unit); strings.TrimSpace(out) != "" {
			t.Errorf("systemd-analyze verify %s:\n%s", unit, out)
		}
	})
	t.Run("watch as the service", checkWatchAsService)
}

// buildDeb runs make deb into a temporary folder and returns the package.
func buildDeb(t *testing.T) string {
	t.Helper()
	dist := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "deb", "DIST="+dist)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("make deb wrote %v\n%s", debs, out)
	}
	name := filepath.Base(debs[0])
	if !regexp.MustCompile(`^gapscope_[0-9][0-9A-Za-z.+~]*_amd64\.deb$`).MatchString(name) {
		t.Errorf("package name %q is not gapscope_<version>_amd64.deb", name)
	}
	ver := strings.TrimSpace(run(t, "dpkg-deb", "-f", debs[0], "Version"))
	if name != "gapscope_"+ver+"_amd64.deb" {
		t.Errorf("package %s holds version %s", name, ver)
	}
	return debs[0]
}

// purge removes the package and checks that nothing of it is left.
func purge(t *testing.T) {
	if out, err := exec.Command("dpkg", "--purge", "gapscope").CombinedOutput(); err != nil {
		t.Errorf("dpkg --purge gapscope: %v\n%s", err, out)
	}
	for _, p := range []string{"/usr/bin/gapscope", unit, "/etc/default/gapscope", "/etc/gapscope", "/var/lib/gapscope",
		"/usr/share/man/man1/gapscope-watch.1.gz"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left after the purge", p)
		}
	}
	if _, err := exec.Command("getent", "passwd", "gapscope").Output(); err == nil {
		t.Error("the gapscope user is left after the purge")
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "MANWIDTH=100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkInstalledFiles: the unit runs as the gapscope user with CAP_NET_RAW
// only and the hardening asked for, no password on its command line or in
// /etc/default, and the option file readable by root and that user only.
func checkInstalledFiles(t *testing.T) {
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	u := string(b)
	for _, want := range []string{"User=gapscope", "AmbientCapabilities=CAP_NET_RAW\n", "CapabilityBoundingSet=CAP_NET_RAW\n",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes", "StateDirectory=gapscope",
		"EnvironmentFile=/etc/default/gapscope", "--defaults-file=${GAPSCOPE_DEFAULTS_FILE}"} {
		if !strings.Contains(u, want) {
			t.Errorf("the unit lacks %q", want)
		}
	}
	if strings.Contains(u, "--dsn") || strings.Contains(u, "MYSQL_PWD") {
		t.Error("the unit passes credentials on the command line or in the environment")
	}
	if b, err := os.ReadFile("/etc/default/gapscope"); err != nil || !strings.Contains(string(b), "GAPSCOPE_DEFAULTS_FILE=/etc/gapscope/my.cnf") {
		t.Errorf("/etc/default/gapscope: %v\n%s", err, b)
	}
	checkOwner(t, "/etc/gapscope", 0o750|os.ModeDir)
	checkOwner(t, "/etc/gapscope/my.cnf", 0o640)
	for _, p := range []string{"/usr/share/bash-completion/completions/gapscope", "/usr/share/zsh/vendor-completions/_gapscope",
		"/usr/share/fish/vendor_completions.d/gapscope.fish"} {
		if fi, err := os.Stat(p); err != nil || fi.Size() < 100 {
			t.Errorf("completion %s: %v", p, err)
		}
	}
}

// checkOwner wants root as the owner, gapscope as the group, and the mode.
func checkOwner(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	gid := strings.TrimSpace(run(t, "id", "-g", "gapscope"))
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode() != mode || st.Uid != 0 || fmt.Sprint(st.Gid) != gid {
		t.Errorf("%s: %v uid %d gid %d, want %v root:gapscope (gid %s)", path, fi.Mode(), st.Uid, st.Gid, mode, gid)
	}
}

func checkMan(t *testing.T) {
	out := run(t, "man", "-P", "cat", "gapscope-watch")
	for _, want := range []string{"GAPSCOPE-WATCH(1)", "gapscope watch --dsn DSN", "--web-config", "--defaults-file", "CAP_NET_RAW"} {
		if !strings.Contains(out, want) {
			t.Errorf("man gapscope-watch lacks %q:\n%s", want, out)
		}
	}
	if out := run(t, "man", "-P", "cat", "gapscope"); !strings.Contains(out, "gapscope-watch(1)") {
		t.Errorf("man gapscope does not point to gapscope-watch(1):\n%s", out)
	}
}

// checkBashCompletion completes "gapscope watch --web" through the
// installed script, as bash would on a Tab.
func checkBashCompletion(t *testing.T) {
	const lib = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("%s: bash-completion is not installed (make deps installs it)", lib)
	}
	script := `source ` + lib + `; source /usr/share/bash-completion/completions/gapscope
COMP_WORDS=(gapscope watch --web); COMP_CWORD=2; COMP_LINE="gapscope watch --web"; COMP_POINT=${#COMP_LINE}
__start_gapscope 2>/dev/null; echo "${COMPREPLY[@]}"`
	if out := run(t, "bash", "-c", script); strings.TrimSpace(out) != "--web-config" {
		t.Errorf("bash completes \"gapscope watch --web\" as %q, want --web-config", out)
	}
}

// checkWatchAsService runs watch as the unit does: as gapscope, with
// CAP_NET_RAW as its only capability (ambient, bounding set) and no new
// privileges, the server and password read from /etc/gapscope/my.cnf. It
// captures: the statements come with their wire time and no note asks for
// capture rights.
func checkWatchAsService(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history=ON",
		"--performance-schema-consumer-events-statements-history-long=ON"}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const password = "Pkg-test-pw-7"
	for _, q := range []string{"CREATE USER 'gsmon'@'127.0.0.1' IDENTIFIED BY '" + password + "'",
		"GRANT PROCESS ON *.* TO 'gsmon'@'127.0.0.1'", "GRANT SELECT ON performance_schema.* TO 'gsmon'@'127.0.0.1'"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cnf := fmt.Sprintf("[client]\nhost = 127.0.0.1\nport = %d\nuser = gsmon\npassword = %s\n", inst.Port, password)
	if err := os.WriteFile("/etc/gapscope/my.cnf", []byte(cnf), 0o640); err != nil {
		t.Fatal(err)
	}
	// systemd makes the StateDirectory, owned by the service's user.
	run(t, "install", "-d", "-m", "0750", "-o", "gapscope", "-g", "gapscope", "/var/lib/gapscope")
	text := watchAs(t, db, "+net_raw")
	if strings.Contains(text, "CAP_NET_RAW") || strings.Contains(text, "no capture") {
		t.Errorf("watch did not capture with CAP_NET_RAW alone:\n%s", text)
	}
	if !strings.Contains(text, "pkgtest_marker") {
		t.Errorf("watch did not report the load's statements:\n%s", text)
	}
	if strings.Contains(text, password) {
		t.Errorf("watch printed the password:\n%s", text)
	}
	if fi, err := os.Stat("/var/lib/gapscope/watch.db"); err != nil || fi.Size() == 0 {
		t.Errorf("no store in the state directory (/etc/default/gapscope's --store): %v", err)
	}
	t.Logf("watch as gapscope with CAP_NET_RAW:\n%s", tail(text, 1500))
	// The control: without the capability the same run cannot capture.
	if text := watchAs(t, db, ""); !strings.Contains(text, "CAP_NET_RAW") {
		t.Errorf("watch without CAP_NET_RAW does not say it could not capture:\n%s", text)
	}
}

// watchAs runs watch for 4 s under load as the gapscope user with only the
// capabilities given (setpriv syntax: "+net_raw", or "" for none) and
// returns its output.
func watchAs(t *testing.T, db *sql.DB, caps string) string {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); load(db, stop) }()
	set := "-all"
	if caps != "" {
		set += "," + caps
	}
	args := append([]string{"--reuid=gapscope", "--regid=gapscope", "--init-groups",
		"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--no-new-privs", "--"},
		execStart(t)...)
	cmd := exec.Command("setpriv", append(args, "--duration=4s", "--cpu-budget=0")...)
	cmd.Dir = "/var/lib/gapscope"
	out, err := cmd.CombinedOutput()
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("watch as the gapscope user (capabilities %q): %v\n%s", caps, err, out)
	}
	return string(out)
}

// execStart is the unit's command line with /etc/default/gapscope's
// settings put in as systemd puts them (${VAR} one word, $VAR split on
// spaces), but --http on a free port.
func execStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	_, line, ok := strings.Cut(string(b), "\nExecStart=")
	if !ok {
		t.Fatal("the unit has no ExecStart")
	}
	line, _, _ = strings.Cut(line, "\n")
	env := map[string]string{}
	def, err := os.ReadFile("/etc/default/gapscope")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(def), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			env[k] = strings.Trim(v, `"`)
		}
	}
	env["GAPSCOPE_HTTP"] = "127.0.0.1:0"
	var out []string
	for _, w := range strings.Fields(line) {
		switch {
		case strings.Contains(w, "${"):
			out = append(out, os.Expand(w, func(k string) string { return env[k] }))
		case strings.HasPrefix(w, "$"):
			out = append(out, strings.Fields(env[w[1:]])...)
		default:
			out = append(out, w)
		}
	}
	return out
}

// load runs a short statement on a few connections until stop closes.
func load(db *sql.DB, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		_, _ = db.Exec("SELECT 1 AS pkgtest_marker")
		time.Sleep(5 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
