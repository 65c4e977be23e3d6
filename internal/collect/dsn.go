package collect

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Config builds a driver configuration from a go-sql-driver DSN and/or a
// my.cnf defaults file. Fields set in the DSN win over the file; the password
// falls back to MYSQL_PWD as the mysql client does.
func Config(dsn, defaultsFile string) (*mysql.Config, error) {
	cfg := mysql.NewConfig()
	if defaultsFile != "" {
		opts, err := ReadDefaultsFile(defaultsFile)
		if err != nil {
			return nil, err
		}
		applyClientOptions(cfg, opts)
	}
	if dsn != "" {
		d, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("parsing DSN %s: %w", RedactDSN(dsn), err)
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

// ReadDefaultsFile returns the options of the [client] and [gapscope]
// groups of a my.cnf file (later groups win), following !include and
// !includedir as the mysql client does.
func ReadDefaultsFile(path string) (map[string]string, error) {
	out := map[string]string{}
	if err := readCnf(path, out, 0); err != nil {
		return nil, err
	}
	return out, nil
}

func readCnf(path string, out map[string]string, depth int) error {
	if depth > 8 {
		return fmt.Errorf("reading %s: !include nested too deep", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading defaults file: %w", err)
	}
	defer f.Close()
	group := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "!include "):
			inc := strings.TrimSpace(strings.TrimPrefix(line, "!include "))
			if err := readCnf(relTo(path, inc), out, depth+1); err != nil {
				return err
			}
		case strings.HasPrefix(line, "!includedir "):
			dir := relTo(path, strings.TrimSpace(strings.TrimPrefix(line, "!includedir ")))
			files, _ := filepath.Glob(filepath.Join(dir, "*.cnf"))
			for _, inc := range files {
				if err := readCnf(inc, out, depth+1); err != nil {
					return err
				}
			}
		case line[0] == '[':
			group = strings.ToLower(strings.Trim(line, "[] \t"))
		case group == "client" || group == "gapscope":
			k, v := splitOption(line)
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

func relTo(base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(base), p)
}

// splitOption parses "key = value" (value optionally quoted); option names
// use - and _ interchangeably.
func splitOption(line string) (string, string) {
	k, v, _ := strings.Cut(line, "=")
	k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "-", "_")
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
	} else if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return k, v
}

func applyClientOptions(cfg *mysql.Config, o map[string]string) {
	cfg.User = o["user"]
	cfg.Passwd = o["password"]
	cfg.DBName = o["database"]
	host, port, socket := o["host"], o["port"], o["socket"]
	switch {
	case socket != "" && (host == "" || host == "localhost"):
		cfg.Net, cfg.Addr = "unix", socket
	default:
		if host == "" || host == "localhost" {
			host = "127.0.0.1"
		}
		if _, err := strconv.Atoi(port); err != nil {
			port = "3306"
		}
		cfg.Net, cfg.Addr = "tcp", host+":"+port
	}
}

// Open connects with Config(dsn, defaultsFile) and checks the server
// answers. Errors never contain the password.
func Open(dsn, defaultsFile string) (*sql.DB, error) {
	cfg, err := Config(dsn, defaultsFile)
	if err != nil {
		return nil, err
	}
	return OpenConfig(context.Background(), cfg)
}

// OpenConfig connects with cfg and pings the server.
func OpenConfig(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("configuring connection: %w", err)
	}
	db := sql.OpenDB(conn)
	// A monitor needs few connections; each one is a server thread.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s as %s: %w (is the server running and the DSN right? try: mariadb -h HOST -P PORT -u USER -p)",
			cfg.Net+"("+cfg.Addr+")", cfg.User, err)
	}
	return db, nil
}

var passwordInDSN = regexp.MustCompile(`^([^:@/]*):[^@]*@`)

// RedactDSN returns dsn with its password replaced by "xxx", for messages.
func RedactDSN(dsn string) string {
	if cfg, err := mysql.ParseDSN(dsn); err == nil {
		if cfg.Passwd != "" {
			cfg.Passwd = "xxx"
		}
		return cfg.FormatDSN()
	}
	// Unparsable: still never echo what looks like a password. The
	// password may contain '@', so cut at the last '@' before the address.
	if at := strings.LastIndex(dsn, "@"); at > 0 {
		if colon := strings.Index(dsn[:at], ":"); colon >= 0 {
			return dsn[:colon] + ":xxx" + dsn[at:]
		}
	}
	return passwordInDSN.ReplaceAllString(dsn, "$1:xxx@")
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
