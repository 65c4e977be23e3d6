// Package sandbox starts private MariaDB (or MySQL) server instances for
// tests and labs: a fresh datadir from mariadb-install-db in a temp dir, a
// free 127.0.0.1 port and its own socket, any server options, always cleaned
// up. It is to gapscope what httptest is to net/http.
package sandbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNoServer is returned when no mariadbd/mysqld binary can be found.
var ErrNoServer = errors.New("sandbox: no mariadbd or mysqld binary found (install mariadb-server)")

// Options configure a sandbox instance.
type Options struct {
	// ServerArgs are extra mariadbd options, e.g. "--performance-schema=ON".
	ServerArgs []string
	// Dir is where the datadir goes; a new temp dir when empty.
	Dir string
	// StartTimeout bounds how long to wait for the server to accept connections.
	StartTimeout time.Duration
	// Port to listen on; a free one when zero.
	Port int
	// ExtraPort, when non-zero, asks for a thread-pool extra port (outside the
	// pool); use -1 to pick a free one. MariaDB only.
	ExtraPort int
	// Flavor picks the server: "" (MariaDB if installed, else MySQL),
	// "mariadb" or "mysql". ErrNoServer when that flavour is not installed.
	Flavor string
	// Persistent leaves the server running after this process exits (for
	// `gapscope lab up`): it is not killed with its parent, and its state is
	// saved in Dir so that StopDir can stop it later.
	Persistent bool
	// NetNS runs the server inside this network namespace (`ip netns
	// exec`), listening on BindAddress there; the sandbox reaches it
	// through its socket file, which namespaces do not separate.
	NetNS       string
	BindAddress string
	// Nice, when non-zero, runs the server at this nice value (negative
	// needs root): every thread inherits it, so a lab measuring something
	// else is not disturbed by the host's other load.
	Nice int
}

// Instance is a running private server.
type Instance struct {
	Dir       string
	DataDir   string
	Socket    string
	Port      int
	ExtraPort int
	PIDFile   string
	ErrorLog  string
	Flavor    string // "mariadb" or "mysql"
	Host      string // address the server listens on (127.0.0.1 unless Options.BindAddress)
	NetNS     string // network namespace the server runs in ("" for this one)
	Nice      int    // the server's nice value (Options.Nice; kept by Restart)
	PID       int
	cmd       *exec.Cmd
	done      chan error
	ownDir    bool
}

// FindServer returns the path of mariadbd or mysqld.
func FindServer() (string, error) {
	path, _, err := FindServerFlavor("")
	return path, err
}

// FindServerFlavor returns the path and flavour ("mariadb" or "mysql") of an
// installed server of the wanted flavour ("" for any, MariaDB first).
// Debian's mariadb-server installs mysqld as a link to mariadbd, so the
// flavour is read from --version, not from the name.
func FindServerFlavor(want string) (string, string, error) {
	for _, name := range []string{"mariadbd", "mysqld"} {
		p := lookServer(name)
		if p == "" {
			continue
		}
		flavor := serverFlavor(p)
		if want == "" || want == flavor {
			return p, flavor, nil
		}
	}
	if want != "" {
		return "", "", fmt.Errorf("%w: no %s server installed", ErrNoServer, want)
	}
	return "", "", ErrNoServer
}

func lookServer(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/libexec", "/usr/local/mysql/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

func serverFlavor(path string) string {
	out, _ := exec.Command(path, "--version").CombinedOutput()
	if strings.Contains(strings.ToLower(string(out)), "mariadb") || strings.HasSuffix(path, "mariadbd") {
		return "mariadb"
	}
	return "mysql"
}

// Available reports whether a sandbox can be started on this machine.
func Available() bool {
	_, err := FindServer()
	return err == nil
}

// Start creates a datadir, starts the server and waits until it answers.
// When ctx ends before the server is ready (Ctrl-C), everything started so
// far is stopped and removed.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	server, flavor, err := FindServerFlavor(opts.Flavor)
	if err != nil {
		return nil, err
	}
	inst, err := prepareDirs(opts)
	if err != nil {
		return nil, err
	}
	inst.Flavor = flavor
	if err := inst.initDataDir(ctx, server); err != nil {
		inst.removeDir()
		return nil, err
	}
	if err := inst.launch(server, opts); err != nil {
		inst.removeDir()
		return nil, err
	}
	if err := inst.waitReady(ctx, startTimeout(opts)); err != nil {
		inst.Stop()
		return nil, err
	}
	if opts.Persistent {
		if err := inst.saveState(); err != nil {
			inst.Stop()
			return nil, err
		}
	}
	return inst, nil
}

func startTimeout(opts Options) time.Duration {
	if opts.StartTimeout == 0 {
		return 30 * time.Second
	}
	return opts.StartTimeout
}

func prepareDirs(opts Options) (*Instance, error) {
	dir, own := opts.Dir, false
	if dir == "" {
		d, err := os.MkdirTemp("", "gapscope-sandbox-")
		if err != nil {
			return nil, fmt.Errorf("sandbox: creating temp dir: %w", err)
		}
		dir, own = d, true
	} else {
		// mariadb-install-db resolves a relative datadir against the
		// server's basedir (/usr), not the working directory.
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %s: %w", dir, err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("sandbox: creating %s: %w", abs, err)
		}
		dir = abs
	}
	inst := &Instance{
		Dir:      dir,
		DataDir:  filepath.Join(dir, "data"),
		Socket:   filepath.Join(dir, "mysqld.sock"),
		PIDFile:  filepath.Join(dir, "mysqld.pid"),
		ErrorLog: filepath.Join(dir, "error.log"),
		ownDir:   own,
		Host:     "127.0.0.1",
		NetNS:    opts.NetNS,
	}
	if opts.BindAddress != "" {
		inst.Host = opts.BindAddress
	}
	port, err := pickPort(opts.Port)
	if err != nil {
		return nil, err
	}
	inst.Port = port
	if opts.ExtraPort != 0 {
		if inst.ExtraPort, err = pickPort(max(opts.ExtraPort, 0)); err != nil {
			return nil, err
		}
	}
	return inst, nil
}

func pickPort(want int) (int, error) {
	if want > 0 {
		return want, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sandbox: finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (inst *Instance) initDataDir(ctx context.Context, server string) error {
	if inst.Flavor == "mysql" {
		// MySQL 5.7+ initialises with the server itself; root gets no password.
		cmd := exec.CommandContext(ctx, server, "--no-defaults", "--initialize-insecure",
			"--datadir="+inst.DataDir, "--user=root")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sandbox: %s --initialize-insecure failed: %w\n%s", server, err, tail(string(out), 2000))
		}
		return nil
	}
	return installDB(ctx, inst.DataDir, inst.tmpDir())
}

// tmpDir is the instance's own temp dir: other processes sweeping /tmp must
// not pull the server's temporary tables from under it (seen here:
// "Could not remove temporary table '/tmp/#sql-temptable-…'").
func (inst *Instance) tmpDir() string { return filepath.Join(inst.Dir, "tmp") }

func installDB(ctx context.Context, datadir, tmpdir string) error {
	if err := os.MkdirAll(tmpdir, 0o700); err != nil {
		return fmt.Errorf("sandbox: creating %s: %w", tmpdir, err)
	}
	bin := "mariadb-install-db"
	if _, err := exec.LookPath(bin); err != nil {
		bin = "mysql_install_db"
	}
	cmd := exec.CommandContext(ctx, bin, "--no-defaults", "--datadir="+datadir, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--tmpdir="+tmpdir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("sandbox: %s failed: %w\n%s", bin, err, tail(string(out), 2000))
	}
	return nil
}

func (inst *Instance) launch(server string, opts Options) error {
	if err := os.MkdirAll(inst.tmpDir(), 0o700); err != nil {
		return fmt.Errorf("sandbox: creating %s: %w", inst.tmpDir(), err)
	}
	args := []string{"--no-defaults", "--datadir=" + inst.DataDir, "--socket=" + inst.Socket,
		fmt.Sprintf("--port=%d", inst.Port), "--bind-address=" + inst.Host, "--user=root",
		"--pid-file=" + inst.PIDFile, "--log-error=" + inst.ErrorLog,
		"--innodb-buffer-pool-size=64M", "--skip-name-resolve", "--tmpdir=" + inst.tmpDir()}
	if inst.Flavor == "mysql" {
		// No X plugin port (33060 may be taken); MySQL has no --extra-port.
		args = append(args, "--mysqlx=OFF")
	} else {
		args = append(args, "--innodb-log-file-size=32M")
		if inst.ExtraPort > 0 {
			// extra_max_connections defaults to 1: a monitor that reconnects
			// before the server has seen its last close would get error 1040.
			args = append(args, fmt.Sprintf("--extra-port=%d", inst.ExtraPort), "--extra-max-connections=8")
		}
	}
	args = append(args, opts.ServerArgs...)
	cmd := exec.Command(server, args...)
	if opts.Nice == 0 {
		opts.Nice = inst.Nice // a restart keeps the priority
	}
	inst.Nice = opts.Nice
	if adj := opts.Nice - ownNice(); opts.Nice != 0 && adj != 0 {
		// nice(1) execs the server: same pid, every thread at that nice.
		// Its -n is relative to the nice it inherits from us.
		cmd = exec.Command("nice", append([]string{"-n", fmt.Sprint(adj), server}, args...)...)
	}
	if inst.NetNS != "" {
		// ip(8) enters the namespace and execs the server: same pid.
		cmd = exec.Command("ip", append([]string{"netns", "exec", inst.NetNS}, cmd.Args...)...)
	}
	// Own process group so that a Ctrl-C to gapscope reaches us first and we
	// stop the server in order, instead of the terminal killing it mid-write.
	// A test's server dies with the test binary; a lab's outlives gapscope.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !opts.Persistent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: starting %s: %w", server, err)
	}
	inst.cmd = cmd
	inst.PID = cmd.Process.Pid
	inst.done = make(chan error, 1)
	go func() { inst.done <- cmd.Wait() }()
	return nil
}

func (inst *Instance) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-inst.done:
			inst.done <- err
			return fmt.Errorf("sandbox: server exited during start (%v); error log:\n%s", err, inst.errorLogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		db, err := sql.Open("mysql", inst.readyDSN())
		if err != nil {
			return err
		}
		err = db.PingContext(ctx)
		db.Close()
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("sandbox: server not ready after %s; error log:\n%s", timeout, inst.errorLogTail())
}

func (inst *Instance) errorLogTail() string {
	b, _ := os.ReadFile(inst.ErrorLog)
	return tail(string(b), 4000)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// DSN returns a go-sql-driver DSN for root over TCP to database db.
func (inst *Instance) DSN(db string) string {
	return inst.dsnFor(inst.Port, db)
}

// ExtraDSN returns a DSN on the thread pool's extra port (outside the pool).
func (inst *Instance) ExtraDSN(db string) string {
	if inst.ExtraPort == 0 {
		return inst.DSN(db)
	}
	return inst.dsnFor(inst.ExtraPort, db)
}

// readyDSN reaches the server from this process: over TCP, or through
// the socket when it listens in another network namespace.
func (inst *Instance) readyDSN() string {
	if inst.NetNS != "" {
		return inst.SocketDSN("")
	}
	return inst.DSN("")
}

// SocketDSN returns a DSN for root through the server's socket file.
func (inst *Instance) SocketDSN(db string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = inst.Socket
	cfg.DBName = db
	cfg.Params = map[string]string{}
	return cfg.FormatDSN()
}

func (inst *Instance) dsnFor(port int, db string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = net.JoinHostPort(inst.Host, fmt.Sprint(port))
	cfg.DBName = db
	cfg.InterpolateParams = false
	cfg.Params = map[string]string{}
	return cfg.FormatDSN()
}

// Addr returns host:port of the instance.
func (inst *Instance) Addr() string { return net.JoinHostPort(inst.Host, fmt.Sprint(inst.Port)) }

// Open returns a *sql.DB connected to the instance.
func (inst *Instance) Open(db string) (*sql.DB, error) {
	return sql.Open("mysql", inst.DSN(db))
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 10 s) and removes
// the temp dir it created. Safe to call more than once.
func (inst *Instance) Stop() error {
	if inst.cmd != nil && inst.cmd.Process != nil {
		_ = inst.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-inst.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-inst.cmd.Process.Pid, syscall.SIGKILL)
			<-inst.done
		}
		inst.cmd = nil
	} else if inst.PID > 0 {
		stopPID(inst.PID, 10*time.Second)
	}
	inst.PID = 0
	untrack(inst)
	inst.removeDir()
	return nil
}

func (inst *Instance) removeDir() {
	if inst.ownDir {
		_ = os.RemoveAll(inst.Dir)
	}
}

// Kill stops the server with SIGKILL, as a crash would: no shutdown, its
// datadir left for crash recovery. Restart starts it again on the same
// datadir and port.
func (inst *Instance) Kill() error {
	if inst.cmd == nil {
		return errors.New("sandbox: Kill needs a server this process started")
	}
	_ = inst.cmd.Process.Signal(syscall.SIGKILL)
	<-inst.done
	inst.cmd, inst.PID = nil, 0 // Stop must not signal a pid the system may reuse
	return nil
}

// Restart stops the server and starts it again on the same datadir and port
// with new options (static settings such as performance_schema need this);
// a zero opts.Nice keeps the nice value it ran at.
func (inst *Instance) Restart(ctx context.Context, opts Options) error {
	server, _, err := FindServerFlavor(inst.Flavor)
	if err != nil {
		return err
	}
	if inst.cmd != nil {
		_ = inst.cmd.Process.Signal(syscall.SIGTERM)
		<-inst.done
		inst.cmd = nil
	}
	if err := inst.launch(server, opts); err != nil {
		return err
	}
	return inst.waitReady(ctx, startTimeout(opts))
}
