package collect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ConfigError is a DSN or defaults file gapscope cannot use: bad usage, not
// a failure of the tool (its UsageError method tells the command line so).
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string    { return e.msg }
func (e *ConfigError) UsageError() bool { return true }

func (r *Secrets) configErrorf(format string, a ...any) error {
	return &ConfigError{msg: r.Mask(fmt.Sprintf(format, a...))}
}

// dsnForm is the form of a DSN, for messages.
const dsnForm = "user[:password]@tcp(host:port)/[db] or user[:password]@unix(/path/to.sock)/"

// Config builds a driver configuration from a go-sql-driver DSN and/or a
// my.cnf defaults file. Fields set in the DSN win over the file; the password
// falls back to MYSQL_PWD as the mysql client does. Every password it sees is
// remembered for Mask before anything can fail.
func (r *Secrets) Config(dsn, defaultsFile string) (*mysql.Config, error) {
	for _, s := range dsnSecrets(dsn) {
		r.remember(s)
	}
	r.remember(os.Getenv("MYSQL_PWD"))
	cfg := mysql.NewConfig()
	if defaultsFile != "" {
		opts, err := r.ReadDefaultsFile(defaultsFile)
		if err != nil {
			return nil, err
		}
		if err := r.applyClientOptions(cfg, opts); err != nil {
			return nil, fmt.Errorf("defaults file %s: %w", defaultsFile, err)
		}
	}
	if dsn != "" {
		d, err := r.parseDSN(dsn)
		if err != nil {
			return nil, err
		}
		mergeDSN(cfg, d, dsn)
	}
	if cfg.Passwd == "" {
		cfg.Passwd = os.Getenv("MYSQL_PWD")
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// parseDSN parses a go-sql-driver DSN and refuses what the driver would
// accept only to fail later with the DSN in its message: a URL, or a network
// that is not tcp or unix (a '/' typed for '@' makes "user:password/tcp" the
// network).
func (r *Secrets) parseDSN(dsn string) (*mysql.Config, error) {
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok {
		return nil, r.configErrorf("DSN %s is a URL (%s://); gapscope takes %s, e.g. %s",
			r.Mask(dsn), scheme, dsnForm, urlAsDSN(rest))
	}
	d, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, r.configErrorf("DSN %s: %v; the form is %s", r.Mask(dsn), err, dsnForm)
	}
	r.remember(d.Passwd)
	r.rememberTypedForColon(d)
	switch d.Net {
	case "tcp", "tcp4", "tcp6", "unix":
	default:
		return nil, r.configErrorf("DSN %s: network %q is neither tcp nor unix (is an '@' missing before it?); the form is %s",
			r.Mask(dsn), d.Net, dsnForm)
	}
	return d, nil
}

// rememberTypedForColon masks what follows the first '@' of a user name when
// no password was given: "mon@pw@tcp(...)" is a ':' typed as '@', and the
// target, the driver and the server's "Access denied for user ..." would all
// show the password as part of the user.
func (r *Secrets) rememberTypedForColon(d *mysql.Config) {
	if d.Passwd != "" {
		return
	}
	if _, typed, ok := strings.Cut(d.User, "@"); ok {
		r.remember(typed)
	}
}

// urlAsDSN rewrites the authority and path of a mysql:// URL as a DSN,
// without its password, to show the user the form gapscope takes.
func urlAsDSN(rest string) string {
	auth, db, _ := strings.Cut(rest, "/")
	user, host := "", auth
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		user, host = auth[:at], auth[at+1:]
		user, _, _ = strings.Cut(user, ":")
		user += "@"
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		host += ":3306"
	}
	return fmt.Sprintf("'%stcp(%s)/%s'", user, host, db)
}

// mergeDSN copies what the DSN set explicitly over the file's values.
func mergeDSN(cfg, d *mysql.Config, dsn string) {
	fileNet, fileAddr := cfg.Net, cfg.Addr
	user, pass := cfg.User, cfg.Passwd
	*cfg = *d
	if d.User == "" {
		cfg.User = user
	}
	if d.Passwd == "" {
		cfg.Passwd = pass
	}
	// ParseDSN defaults a missing address to tcp(127.0.0.1:3306); keep the
	// file's address unless the DSN named one.
	if fileAddr != "" && !dsnHasAddr(dsn) {
		cfg.Net, cfg.Addr = fileNet, fileAddr
	}
}

// dsnHasAddr reports whether a DSN names net(addr), parsing it as the driver
// does: dbname after the last '/', net(addr) after the last '@' before it.
func dsnHasAddr(dsn string) bool {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		return false
	}
	head := dsn[:slash]
	return head[strings.LastIndex(head, "@")+1:] != ""
}

// applyClientOptions sets the connection the way the mysql client reads the
// same options: no host, or host=localhost, means the Unix socket (socket=
// or the compiled-in default) unless protocol=tcp; the port then does not
// matter.
func (r *Secrets) applyClientOptions(cfg *mysql.Config, o map[string]string) error {
	cfg.User = o["user"]
	cfg.Passwd = o["password"]
	cfg.DBName = o["database"]
	host, port, socket := o["host"], o["port"], o["socket"]
	protocol := strings.ToLower(o["protocol"])
	switch protocol {
	case "", "tcp", "socket":
	default:
		return r.configErrorf("protocol=%s: gapscope connects over tcp or socket", protocol)
	}
	if (host == "" || host == "localhost") && protocol != "tcp" {
		if socket == "" {
			socket = DefaultSocket
		}
		cfg.Net, cfg.Addr = "unix", socket
		return nil
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return r.configErrorf("port=%s is not a TCP port", port)
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	return nil
}

// Target names where cfg connects, without the password: "user@tcp(host:port)"
// or "user@unix(/path/to.sock)", for banners and messages.
func (r *Secrets) Target(cfg *mysql.Config) string {
	return r.Mask(fmt.Sprintf("%s@%s(%s)", cfg.User, cfg.Net, cfg.Addr))
}

// Open connects with Config(dsn, defaultsFile) and checks the server
// answers. Errors never contain the password.
func (r *Secrets) Open(dsn, defaultsFile string) (*sql.DB, error) {
	cfg, err := r.Config(dsn, defaultsFile)
	if err != nil {
		return nil, err
	}
	return r.OpenConfig(context.Background(), cfg)
}

// OpenConfig connects with cfg and pings the server.
func (r *Secrets) OpenConfig(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	return r.openConnector(ctx, cfg, nil)
}

// openConnector connects with cfg, its connector wrapped by wrap (nil:
// as it is), and pings the server.
func (r *Secrets) openConnector(ctx context.Context, cfg *mysql.Config, wrap func(driver.Connector) driver.Connector) (*sql.DB, error) {
	r.remember(cfg.Passwd)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, r.MaskError(fmt.Errorf("configuring connection: %w", err))
	}
	if wrap != nil {
		conn = wrap(conn)
	}
	db := sql.OpenDB(conn)
	// A monitor needs few connections; each one is a server thread.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		if ctx.Err() != nil { // given up, not refused: the driver then says "bad connection"
			return nil, fmt.Errorf("connecting to %s: %w", r.Target(cfg), ctx.Err())
		}
		return nil, r.MaskError(fmt.Errorf("connecting to %s: %w (is the server running and the DSN right? try: mariadb -h HOST -P PORT -u USER -p)",
			r.Target(cfg), err))
	}
	return db, nil
}

// RedactDSN returns dsn with its password replaced by "xxx", for messages.
func (r *Secrets) RedactDSN(dsn string) string {
	for _, s := range dsnSecrets(dsn) {
		r.remember(s)
	}
	if !strings.Contains(dsn, "://") {
		if cfg, err := mysql.ParseDSN(dsn); err == nil {
			if cfg.Passwd != "" {
				cfg.Passwd = "xxx"
			}
			return r.Mask(cfg.FormatDSN())
		}
	}
	return r.Mask(dsn)
}

// IsLocalHost reports whether host (a name or an IP, no port) is this
// machine's loopback: "localhost" or a loopback address.
func IsLocalHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
