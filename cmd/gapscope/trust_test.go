package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
)

// runLine runs one command line as main does and returns its exit code,
// stdout and stderr.
func runLine(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), collect.NewSecrets(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// noHomeDefaults keeps the tester's own ~/.my.cnf out of the test.
func noHomeDefaults(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("MYSQL_PWD", "")
}

// connectingCommands are the commands that connect to a server, each cut
// short so that a reachable typo would still end quickly.
var connectingCommands = [][]string{
	{"check"},
	{"watch", "--no-capture", "--no-live", "--duration", "1s"},
	{"probe", "--count", "1"},
	{"plans", "--duration", "1s"},
	{"overhead", "--rounds", "1", "--duration", "1s"},
}

// typoDSNs hold the password PW as users mistype DSNs; every one points at
// port 1, where nothing listens.
var typoDSNs = []string{
	"mon:PW/tcp(127.0.0.1:1)/",
	"mon:PWtcp(127.0.0.1:1)/",
	"mon:PW@127.0.0.1:1/",
	"mon:PW@tcp(127.0.0.1:1",
	"mysql://mon:PW@127.0.0.1:1/db",
	"mon:PW@tcp(127.0.0.1:1)/?timeout=soon",
	"mon:PW@tcp(127.0.0.1:1)/",
	"mon:PW@udp(127.0.0.1:1)/",
	"mon:PW",
}

func TestNoPasswordPrintedForAnyDSNTypo(t *testing.T) {
	noHomeDefaults(t)
	for ci, command := range connectingCommands {
		for di, dsn := range typoDSNs {
			// A password of its own per run: one remembered by an earlier
			// run must not hide this run's leak.
			secret := fmt.Sprintf("Pw%d-%d:s3@c/ret", ci, di)
			args := append(append([]string{}, command...), "--dsn", strings.Replace(dsn, "PW", secret, 1))
			code, out, errOut := runLine(t, args...)
			if code == exitOK {
				t.Errorf("%v: exit 0", args[:len(command)])
			}
			for _, frag := range []string{secret, "s3@c/ret", "Pw" + fmt.Sprint(ci) + "-"} {
				if strings.Contains(out+errOut, frag) {
					t.Errorf("%s --dsn %s: password fragment %q printed:\nstdout: %s\nstderr: %s", command[0], dsn, frag, out, errOut)
				}
			}
		}
	}
}

func TestNoPasswordPrintedFromDefaultsFile(t *testing.T) {
	noHomeDefaults(t)
	dir := t.TempDir()
	for ci, command := range connectingCommands[:4] {
		secret := fmt.Sprintf("file-secret-%d", ci)
		cnf := filepath.Join(dir, fmt.Sprintf("my%d.cnf", ci))
		os.WriteFile(cnf, []byte("[mysql]\nuser=mon\npassword="+secret+"\nhost=127.0.0.1\nport=1\n"), 0o600)
		args := append(append([]string{}, command...), "--defaults-file", cnf)
		code, out, errOut := runLine(t, args...)
		if code != exitFailure || strings.Contains(out+errOut, secret) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
		}
		// The real target, from the [mysql] group: not root, not 3306.
		if !strings.Contains(errOut, "mon@tcp(127.0.0.1:1)") {
			t.Errorf("%s: the message does not name the defaults file's target:\n%s", command[0], errOut)
		}
	}
}

func TestDefaultsFileTargets(t *testing.T) {
	noHomeDefaults(t)
	dir := t.TempDir()
	cnf := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	sock := filepath.Join(dir, "absent.sock")
	cases := []struct {
		args []string
		code int
		want string
	}{
		// localhost means the socket, as for the mysql client.
		{[]string{"check", "--defaults-file", cnf("a.cnf", "[client]\nhost=localhost\nuser=mon\nsocket="+sock+"\n")}, exitFailure, "mon@unix(" + sock + ")"},
		// A file with nothing usable is refused, never read as root@127.0.0.1:3306.
		{[]string{"check", "--defaults-file", cnf("b.cnf", "[mysqld]\nport=3307\n")}, exitUsage, "gives no user"},
		{[]string{"watch", "--no-capture", "--defaults-file", cnf("c.cnf", "[server]\n")}, exitUsage, "groups in it: [server]"},
		{[]string{"check", "--defaults-file", filepath.Join(dir, "missing.cnf")}, exitFailure, "no such file"},
		{[]string{"check"}, exitUsage, "needs --dsn or --defaults-file"},
		{[]string{"check", "--no-defaults"}, exitUsage, "needs --dsn or --defaults-file"},
	}
	for _, c := range cases {
		code, _, errOut := runLine(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
	// ~/.my.cnf is read by default, and not with --no-defaults.
	home := t.TempDir()
	t.Setenv("HOME", home)
	os.WriteFile(filepath.Join(home, ".my.cnf"), []byte("[client]\nuser=homeuser\nsocket="+sock+"\n"), 0o600)
	if code, _, errOut := runLine(t, "check"); code != exitFailure || !strings.Contains(errOut, "homeuser@unix("+sock+")") {
		t.Errorf("~/.my.cnf not read: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runLine(t, "check", "--no-defaults"); code != exitUsage {
		t.Errorf("--no-defaults still read ~/.my.cnf: exit %d, %s", code, errOut)
	}
	// A ~/.my.cnf without a client group: an error when it is all there
	// is, ignored beside a DSN.
	os.WriteFile(filepath.Join(home, ".my.cnf"), []byte("[mysqld]\nport=3307\n"), 0o600)
	if code, _, errOut := runLine(t, "check"); code != exitUsage || !strings.Contains(errOut, ".my.cnf gives no user") {
		t.Errorf("useless ~/.my.cnf alone: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runLine(t, "check", "--dsn", "mon@unix("+sock+")/"); code != exitFailure || !strings.Contains(errOut, "mon@unix("+sock+")") {
		t.Errorf("useless ~/.my.cnf beside a DSN: exit %d, %s", code, errOut)
	}
}

// TestExitCodeContract runs every command with a usage mistake (2), a
// failure (1) and, where it is cheap, a success (0).
func TestExitCodeContract(t *testing.T) {
	noHomeDefaults(t)
	dir := t.TempDir()
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("hello\n"), 0o644)
	slow := filepath.Join("..", "..", "testdata", "slowlogs", "mysql-5.1.log")
	unreachable := "mon@tcp(127.0.0.1:1)/"
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"bogus"}, exitUsage},
		{[]string{"--bogus"}, exitUsage},
		{[]string{}, exitOK},
		{[]string{"--version"}, exitOK},
		{[]string{"version"}, exitOK},
		{[]string{"version", "extra"}, exitUsage},
		{[]string{"help", "digest"}, exitOK},
		{[]string{"help"}, exitOK},
		{[]string{"help", "bogus"}, exitUsage},
		{[]string{"help", "lab", "bogus"}, exitUsage},
		{[]string{"digest"}, exitUsage},
		{[]string{"digest", "--top", "x", slow}, exitUsage},
		{[]string{"digest", "--format", "yaml", slow}, exitUsage},
		{[]string{"digest", filepath.Join(dir, "missing.log")}, exitFailure},
		{[]string{"digest", "--format", "JSON", slow}, exitOK},
		{[]string{"analyze"}, exitUsage},
		{[]string{"analyze", "--port", "0", txt}, exitUsage},
		{[]string{"analyze", txt}, exitFailure},
		{[]string{"check", "--dsn", "garbage"}, exitUsage},
		{[]string{"check", "--dsn", unreachable, "extra"}, exitUsage},
		{[]string{"check", "--dsn", unreachable, "--format", "Json"}, exitFailure},
		{[]string{"watch", "--sample", "0", "--dsn", unreachable}, exitUsage},
		{[]string{"watch", "--no-capture", "--no-live", "--dsn", unreachable}, exitFailure},
		{[]string{"probe", "--every", "0s", "--dsn", unreachable}, exitUsage},
		{[]string{"probe", "--count", "1", "--dsn", unreachable}, exitFailure},
		{[]string{"plans", "--threshold", "0s", "--dsn", unreachable}, exitUsage},
		{[]string{"plans", "--duration", "1s", "--dsn", unreachable}, exitFailure},
		{[]string{"overhead"}, exitUsage},
		{[]string{"overhead", "--rounds", "1", "--dsn", unreachable}, exitFailure},
		{[]string{"report"}, exitUsage},
		{[]string{"report", "--events", filepath.Join(dir, "missing.jsonl")}, exitFailure},
		{[]string{"lab", "nosuchlab"}, exitUsage},
		{[]string{"completion", "nosuchshell"}, exitUsage},
		{[]string{"completion", "bash"}, exitOK},
		{[]string{"lab", "up", "--flavor", "oracle"}, exitUsage},
		{[]string{"lab", "up", "--dir", filepath.Join(txt, "lab")}, exitFailure},
	}
	for _, c := range cases {
		code, _, errOut := runLine(t, c.args...)
		if code != c.code {
			t.Errorf("gapscope %s: exit %d, want %d; stderr: %s", strings.Join(c.args, " "), code, c.code, errOut)
		}
	}
}

func TestExitCodeByTypeNotText(t *testing.T) {
	if got := exitCode(fmt.Errorf("reading capture: %w", syscall.EINVAL)); got != exitFailure {
		t.Errorf("wrapped EINVAL (%q): exit %d, want 1", syscall.EINVAL.Error(), got)
	}
	if got := exitCode(errors.New("unknown command in the server's reply")); got != exitFailure {
		t.Errorf("an error that merely mentions usage words: exit %d", got)
	}
	if got := exitCode(fmt.Errorf("wrapped: %w", usagef("bad"))); got != exitUsage {
		t.Errorf("wrapped usage error: exit %d", got)
	}
}

func TestVersionOutput(t *testing.T) {
	_, flagOut, _ := runLine(t, "--version")
	_, cmdOut, _ := runLine(t, "version")
	if flagOut != cmdOut || !strings.HasPrefix(cmdOut, "gapscope ") {
		t.Errorf("--version %q and version %q differ", flagOut, cmdOut)
	}
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
		{Key: "vcs.time", Value: "2026-11-24T21:00:00Z"}}}
	if got, want := describeBuild(bi), "(devel) 0123456789ab+modified (2026-11-24T21:00:00Z)"; got != want {
		t.Errorf("describeBuild = %q, want %q", got, want)
	}
	pseudo := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261124215456-0123456789ab+dirty"}, Settings: bi.Settings}
	if got := describeBuild(pseudo); got != pseudo.Main.Version {
		t.Errorf("pseudo-version: %q", got)
	}
	if got := describeBuild(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}); got != "v1.2.0" {
		t.Errorf("released build: %q", got)
	}
}
