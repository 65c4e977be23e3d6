package lab

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The field lab's clients are real applications' drivers from Debian, not
// Go: their scripts are embedded and written to the run's temp dir.
var (
	//go:embed field_clients.py
	fieldPython []byte
	//go:embed field_prepare.pl
	fieldPerl []byte
)

// ClientRecord is one statement as the client timed it: the scripts print
// one JSON line each (field_clients.py, field_prepare.pl); the mariadb CLI's
// are read from its -vvv output.
type ClientRecord struct {
	Cond   string `json:"cond"`
	Client string `json:"client"`
	ConnID uint64 `json:"conn_id"`
	// Cmd is the protocol command the statement is sent as; Match, a
	// word of its text (upper case) that tells it from the connection's
	// other statements ("" for any).
	Cmd   string `json:"cmd"`
	Match string `json:"match,omitempty"`
	// StartUS/EndUS: the host's wall clock around the call, the window the
	// statement's wire request must fall in.
	StartUS int64 `json:"start_us"`
	EndUS   int64 `json:"end_us"`
	// ClientUS is the time the client measured for the call.
	ClientUS int64 `json:"client_us"`
	// ClientResolutionUS is the resolution of ClientUS (the mariadb CLI
	// prints milliseconds); 0 for a microsecond timer.
	ClientResolutionUS int64 `json:"client_resolution_us,omitempty"`
	Error              int   `json:"error,omitempty"`
	// Summary is a script's closing line (the churn's rate), not a statement.
	Summary string `json:"summary,omitempty"`
}

// fieldEnv is what the clients need: where the server is, as whom, the
// CA that signed its certificate, and where the scripts are.
type fieldEnv struct {
	dir                  string
	host                 string
	port                 int
	socket               string
	ca                   string
	user, password       string
	user2, password2     string
	python, perl, client string
}

// Programs the field lab runs; missing ones are named by fieldMissing.
const (
	fieldPythonMods = "import pymysql, MySQLdb"
	fieldPerlMods   = "use DBI; use DBD::mysql;"
)

// findFieldClients locates the clients: Debian's python3 first (its
// python3-pymysql and python3-mysqldb are not on a pyenv or venv python's
// path), perl with DBD::mysql, and the mariadb (or mysql) CLI. Missing
// ones are listed with their Debian package.
func findFieldClients(ctx context.Context, env *fieldEnv) (missing []string) {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.CommandContext(ctx, p, "-c", fieldPythonMods).Run() == nil {
			env.python = p
			break
		}
	}
	if env.python == "" {
		missing = append(missing, "python3 with pymysql and MySQLdb (python3-pymysql, python3-mysqldb)")
	}
	if exec.CommandContext(ctx, "perl", "-e", fieldPerlMods).Run() == nil {
		env.perl = "perl"
	} else {
		missing = append(missing, "perl DBD::mysql (libdbd-mysql-perl)")
	}
	for _, c := range []string{"mariadb", "mysql"} {
		if p, err := exec.LookPath(c); err == nil {
			env.client = p
			break
		}
	}
	if env.client == "" {
		missing = append(missing, "the mariadb CLI (mariadb-client)")
	}
	return missing
}

func (env *fieldEnv) writeScripts() error {
	for name, b := range map[string][]byte{"field_clients.py": fieldPython, "field_prepare.pl": fieldPerl} {
		if err := os.WriteFile(filepath.Join(env.dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// runPython runs one condition of field_clients.py with extra settings.
func (env *fieldEnv) runPython(ctx context.Context, cond string, extra map[string]any) ([]ClientRecord, error) {
	if env.python == "" {
		return nil, errClientMissing("python3-pymysql / python3-mysqldb")
	}
	cfg := map[string]any{"host": env.host, "port": env.port, "user": env.user, "password": env.password,
		"user2": env.user2, "password2": env.password2, "ca": env.ca, "tmp": env.dir}
	for k, v := range extra {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return runRecords(ctx, "field_clients.py "+cond, exec.CommandContext(ctx, env.python, filepath.Join(env.dir, "field_clients.py"), cond, string(b)))
}

// runPerl runs the server-side prepared statements of field_prepare.pl.
func (env *fieldEnv) runPerl(ctx context.Context) ([]ClientRecord, error) {
	if env.perl == "" {
		return nil, errClientMissing("libdbd-mysql-perl")
	}
	return runRecords(ctx, "field_prepare.pl", exec.CommandContext(ctx, env.perl, filepath.Join(env.dir, "field_prepare.pl"),
		env.host, strconv.Itoa(env.port), env.user, env.password))
}

type errClientMissing string

func (e errClientMissing) Error() string {
	return "client not installed: " + string(e) + " (scripts/install-deps.sh installs it)"
}

func runRecords(ctx context.Context, what string, cmd *exec.Cmd) ([]ClientRecord, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", what, err, fieldTail(stderr.String(), 2000))
	}
	var recs []ClientRecord
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r ClientRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("a client printed %q: %w", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

func fieldTail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

var (
	cliSecs = regexp.MustCompile(`\((\d+\.\d+) sec\)`)
	cliCell = regexp.MustCompile(`^\|\s*(\d+)\s*\|$`)
)

// runCLI runs one short mariadb CLI connection, `SELECT CONNECTION_ID();
// sql`, with args saying how to connect (TLS, socket), and returns sql's
// record: the connection's id and the time the CLI printed for it (-vvv,
// milliseconds), within the window the process ran.
func (env *fieldEnv) runCLI(ctx context.Context, cond string, args []string, sql, match string) (ClientRecord, error) {
	if env.client == "" {
		return ClientRecord{}, errClientMissing("mariadb-client")
	}
	all := append([]string{"--no-defaults", "-u", env.user, "-p" + env.password, "--skip-column-names", "-vvv",
		"-e", "SELECT CONNECTION_ID(); " + sql}, args...)
	cmd := exec.CommandContext(ctx, env.client, all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	end := time.Now()
	if err != nil {
		return ClientRecord{}, fmt.Errorf("mariadb %s: %w\n%s", strings.Join(args, " "), err, fieldTail(stderr.String(), 2000))
	}
	rec := ClientRecord{Cond: cond, Client: "mariadb CLI", Cmd: "COM_QUERY", Match: match,
		StartUS: start.UnixMicro(), EndUS: end.UnixMicro(), ClientResolutionUS: 1000}
	id, took, ok := parseCLI(string(out))
	if !ok {
		return ClientRecord{}, fmt.Errorf("mariadb %s: no connection id or time in its output:\n%s", strings.Join(args, " "), fieldTail(string(out), 2000))
	}
	rec.ConnID, rec.ClientUS = id, took
	return rec, nil
}

// parseCLI reads the output of `mariadb -vvv --skip-column-names -e
// "SELECT CONNECTION_ID(); sql"`: the first cell is the connection's id,
// the last "(0.100 sec)" the time the CLI measured for sql.
func parseCLI(out string) (connID uint64, clientUS int64, ok bool) {
	for _, line := range strings.Split(out, "\n") {
		if m := cliCell.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			connID, _ = strconv.ParseUint(m[1], 10, 64)
			break
		}
	}
	secs := cliSecs.FindAllStringSubmatch(out, -1)
	if connID == 0 || len(secs) < 2 {
		return 0, 0, false
	}
	f, err := strconv.ParseFloat(secs[len(secs)-1][1], 64)
	if err != nil {
		return 0, 0, false
	}
	return connID, int64(f*1e6 + 0.5), true
}

// makeFieldCerts makes a CA and a server certificate for 127.0.0.1, ::1
// and localhost, so that clients verify the server as applications should.
func makeFieldCerts(ctx context.Context, dir string) error {
	p := func(n string) string { return filepath.Join(dir, n) }
	ext := "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
	if err := os.WriteFile(p("san.ext"), []byte(ext), 0o600); err != nil {
		return err
	}
	steps := [][]string{
		{"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gapscope field lab CA",
			"-keyout", p("ca-key.pem"), "-out", p("ca.pem")},
		{"req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
			"-keyout", p("server-key.pem"), "-out", p("server-req.pem")},
		{"x509", "-req", "-days", "2", "-set_serial", "1", "-in", p("server-req.pem"), "-extfile", p("san.ext"),
			"-CA", p("ca.pem"), "-CAkey", p("ca-key.pem"), "-out", p("server-cert.pem")},
	}
	for _, args := range steps {
		if out, err := exec.CommandContext(ctx, "openssl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("openssl %s: %w\n%s", args[0], err, out)
		}
	}
	return nil
}
