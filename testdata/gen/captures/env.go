package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/go-sql-driver/mysql"
)

// env is the sandbox and work directory shared by all scenarios.
type env struct {
	cfg  config
	work string // raw captures, certificates, input files
	inst *sandbox.Instance
	db   *sql.DB // setup connection; never used while a capture runs
	// truth is each made scenario's ground truth, for derived ones.
	truth map[string]map[string]any
}

func checkTools() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: tcpdump captures on lo")
	}
	for _, t := range []string{"tcpdump", "tshark", "editcap", "mariadb", "mariadb-admin", "sysbench", "openssl", "chrt"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found (make deps installs it): %w", t, err)
		}
	}
	return nil
}

// newEnv makes a TLS-capable sandbox that accepts 64 MB packets and LOAD
// DATA LOCAL, and fills the tables every scenario reads.
func newEnv(ctx context.Context, cfg config) (*env, error) {
	work, err := os.MkdirTemp("", "gapscope-capgen-")
	if err != nil {
		return nil, fmt.Errorf("creating work dir: %w", err)
	}
	e := &env{cfg: cfg, work: work, truth: map[string]map[string]any{}}
	if err := makeCerts(ctx, work); err != nil {
		e.close()
		return nil, err
	}
	e.inst, err = sandbox.Start(ctx, sandbox.Options{
		Dir: filepath.Join(work, "server"),
		ServerArgs: []string{
			"--max-allowed-packet=64M", "--local-infile=1",
			"--ssl-ca=" + filepath.Join(work, "ca.pem"),
			"--ssl-cert=" + filepath.Join(work, "server-cert.pem"),
			"--ssl-key=" + filepath.Join(work, "server-key.pem"),
		},
	})
	if err != nil {
		e.close()
		return nil, err
	}
	// Setup goes over the Unix socket: an idle TCP connection on the
	// server port would put keepalive probes into the captures.
	sock := mysql.NewConfig()
	sock.User, sock.Net, sock.Addr = "root", "unix", e.inst.Socket
	if e.db, err = sql.Open("mysql", sock.FormatDSN()); err != nil {
		e.close()
		return nil, err
	}
	if err := e.prepare(ctx); err != nil {
		e.close()
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "captures: sandbox on port %d, work dir %s\n", e.inst.Port, work)
	return e, nil
}

func (e *env) close() {
	if e.db != nil {
		e.db.Close()
	}
	if e.cfg.keep {
		fmt.Fprintf(os.Stderr, "captures: keeping %s (server stopped)\n", e.work)
	}
	if e.inst != nil {
		e.inst.Stop()
	}
	if !e.cfg.keep {
		os.RemoveAll(e.work)
	}
}

// Rows of fx.big are ~110 bytes on the wire, like FACTS' slow-client table,
// so that 100k of them overflow the socket buffers (~11 MB).
var setupSQL = []string{
	"CREATE DATABASE sbtest",
	"CREATE DATABASE fx",
	`CREATE TABLE fx.big (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(60) NOT NULL, pad CHAR(40) NOT NULL)`,
	`INSERT INTO fx.big SELECT seq, seq MOD 1000, CONCAT('row-', LPAD(seq, 8, '0'), '-', REPEAT('c', 47)),
	        REPEAT(CHAR(97 + seq MOD 26), 40) FROM fx.seq_1_to_100000`,
	"CREATE TABLE fx.kv (id INT PRIMARY KEY, v VARCHAR(64) NOT NULL)",
	"CREATE TABLE fx.loaded (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, amount DECIMAL(10,2) NOT NULL)",
	"CREATE TABLE fx.blobs (id INT PRIMARY KEY, b LONGBLOB NOT NULL)",
	`CREATE TABLE fx.types (id INT AUTO_INCREMENT PRIMARY KEY, i BIGINT, f DOUBLE, s VARCHAR(255),
	        b MEDIUMBLOB, t DATETIME(6), flag TINYINT, n INT)`,
	`CREATE PROCEDURE fx.two_sets(IN lim INT)
	 BEGIN
	   SELECT id, c FROM fx.big WHERE id <= lim ORDER BY id;
	   SELECT COUNT(*) AS n, MAX(id) AS top FROM fx.big;
	 END`,
}

func (e *env) prepare(ctx context.Context) error {
	for _, q := range setupSQL {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("setup %q: %w", firstLine(q), err)
		}
	}
	// sysbench's tables are prepared here, outside any capture.
	out, err := exec.CommandContext(ctx, "sysbench", e.sysbenchArgs("oltp_read_write", "prepare")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysbench prepare: %w\n%s", err, out)
	}
	return nil
}

// sysbenchArgs are the common options: 2 tables of 10k rows.
func (e *env) sysbenchArgs(extra ...string) []string {
	args := []string{"--db-driver=mysql", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", e.inst.Port),
		"--mysql-user=root", "--mysql-password=", "--mysql-db=sbtest", "--mysql-ssl=off",
		"--tables=2", "--table-size=10000"}
	return append(args, extra...)
}

// cli runs the mariadb client with script on stdin; TLS is off unless the
// caller's options turn it on.
func (e *env) cli(ctx context.Context, opts []string, script string) ([]byte, error) {
	args := append([]string{"--no-defaults", "-h127.0.0.1", fmt.Sprintf("-P%d", e.inst.Port), "-uroot", "--batch"}, opts...)
	if !hasPrefix(opts, "--ssl") {
		args = append(args, "--skip-ssl")
	}
	cmd := exec.CommandContext(ctx, "mariadb", args...)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		return out, fmt.Errorf("mariadb %s: %w: %s", strings.Join(opts, " "), err, msg)
	}
	return out, nil
}

// dsn is a go-sql-driver DSN for the sandbox with extra parameters.
func (e *env) dsn(params string) string {
	d := e.inst.DSN("fx")
	if strings.Contains(d, "?") {
		return d + "&" + params
	}
	return d + "?" + params
}

func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
