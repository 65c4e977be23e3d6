package collect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedactDSN(t *testing.T) {
	sec := NewSecrets()
	for in, want := range map[string]string{
		"app:s3cret@tcp(db:3306)/shop": "app:xxx@tcp(db:3306)/shop",
		"app@tcp(db:3306)/":            "app@tcp(db:3306)/",
		"app:p@ss:w@rd@tcp(db:3306)/x": "app:xxx@tcp(db:3306)/x",
		"garbage:secret@nonsense(((":   "garbage:xxx@nonsense(((",
	} {
		got := sec.RedactDSN(in)
		if got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(got, "secret") || strings.Contains(got, "p@ss") {
			t.Errorf("password leaked: %q", got)
		}
	}
}

func writeCnf(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "my.cnf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFromDefaultsFile(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	p := writeCnf(t, `
# comment
[mysqld]
user = mysql
[client]
user = "monitor"
password = 'pa ss'   
host = db1.example
port = 3310
[mysql]
database = shop
`)
	cfg, err := sec.Config("", p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "monitor" || cfg.Passwd != "pa ss" || cfg.Net != "tcp" || cfg.Addr != "db1.example:3310" || cfg.DBName != "shop" {
		t.Errorf("cfg = user %q pass %q %s(%s)", cfg.User, cfg.Passwd, cfg.Net, cfg.Addr)
	}
	// The DSN overrides the user but keeps the file's address and password.
	cfg, err = sec.Config("other@/shop", p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "other" || cfg.Passwd != "pa ss" || cfg.Addr != "db1.example:3310" || cfg.DBName != "shop" {
		t.Errorf("merged cfg = user %q pass %q %s db %q", cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName)
	}
}

func TestConfigSocketAndInclude(t *testing.T) {
	sec := NewSecrets()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "extra.cnf"), []byte("[client]\nsocket=/run/mysqld/mysqld.sock\n"), 0o600)
	p := filepath.Join(dir, "my.cnf")
	os.WriteFile(p, []byte("[client]\nuser=root\n!include extra.cnf\n"), 0o600)
	cfg, err := sec.Config("", p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" {
		t.Errorf("socket not used: %s(%s)", cfg.Net, cfg.Addr)
	}
}

func TestConfigPasswordFromEnv(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "fromenv")
	cfg, err := sec.Config("app@tcp(127.0.0.1:3306)/", "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Passwd != "fromenv" {
		t.Errorf("password = %q, want MYSQL_PWD", cfg.Passwd)
	}
	cfg, _ = sec.Config("app:given@tcp(127.0.0.1:3306)/", "")
	if cfg.Passwd != "given" {
		t.Errorf("DSN password must win over MYSQL_PWD, got %q", cfg.Passwd)
	}
}

func TestConfigErrorsHidePassword(t *testing.T) {
	sec := NewSecrets()
	_, err := sec.Config("app:topsecret@tcp(127.0.0.1:3306)/?timeout=notaduration", "")
	if err == nil {
		t.Fatal("DSN with a bad timeout accepted")
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error leaks the password: %v", err)
	}
	if _, err := sec.Config("", "/nonexistent/my.cnf"); err == nil {
		t.Error("missing defaults file accepted")
	}
}

func TestParseVersionAndFlavor(t *testing.T) {
	for _, tc := range []struct {
		v, comment, flavor string
		maj, min, patch    int
	}{
		{"10.11.19-MariaDB-0+deb12u1", "Debian 12", "mariadb", 10, 11, 19},
		{"5.5.5-10.6.12-MariaDB", "", "mariadb", 10, 6, 12},
		{"8.0.36", "MySQL Community Server - GPL", "mysql", 8, 0, 36},
		{"8.0.35-27", "Percona Server (GPL), Release 27", "percona", 8, 0, 35},
		{"garbage", "", "mysql", 0, 0, 0},
	} {
		a, b, c := parseVersion(tc.v)
		if f := flavorOf(tc.v, tc.comment); f != tc.flavor || a != tc.maj || b != tc.min || c != tc.patch {
			t.Errorf("%q: %s %d.%d.%d", tc.v, f, a, b, c)
		}
	}
	s := ServerInfo{Major: 8, Minor: 0, Patch: 28}
	if !s.AtLeast(8, 0, 28) || s.AtLeast(8, 0, 29) || !s.AtLeast(5, 7, 44) || s.AtLeast(8, 4, 0) {
		t.Error("AtLeast wrong")
	}
}

func TestIsLocalHost(t *testing.T) {
	for host, want := range map[string]bool{"localhost": true, "127.0.0.1": true, "127.0.0.2": true, "::1": true,
		"10.0.0.1": false, "db1": false, "": false} {
		if got := IsLocalHost(host); got != want {
			t.Errorf("IsLocalHost(%q) = %v", host, got)
		}
	}
}

// Values are read as my_print_defaults prints them: '#' starts a comment
// anywhere outside quotes, and a quoted value may be followed by one.
func TestDefaultsFileCommentsLikeMysqlClient(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	cfg, err := sec.Config("", writeCnf(t, "[client]\npassword=ab#cd\nuser=x # who\nsocket='/tmp/a b.sock' # the socket\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Passwd != "ab" || cfg.User != "x" || cfg.Addr != "/tmp/a b.sock" {
		t.Errorf("password %q user %q addr %q, want ab, x, /tmp/a b.sock", cfg.Passwd, cfg.User, cfg.Addr)
	}
}
