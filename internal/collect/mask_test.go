package collect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// malformedDSNs are DSNs as users mistype them; each holds the password
// "S3cret%d!" with its row number, so that one row's leak is not hidden by
// another row's secret being remembered.
var malformedDSNs = []string{
	"mon:S3cret0!/tcp(127.0.0.1:1)/",    // '/' typed for '@'
	"mon:S3cret1!tcp(127.0.0.1:1)/",     // '@' missing
	"mon:S3cret2!@127.0.0.1:1/",         // no tcp(...)
	"mon:S3cret3!@tcp(127.0.0.1:1",      // unterminated address
	"mysql://mon:S3cret4!@127.0.0.1:1/", // URL form
	"mon:S3cret5!@tcp(127.0.0.1:1)/?timeout=soon",
	"mon:S3c@r/et6!@tcp(127.0.0.1:1)/", // '@' and '/' in the password
	"mon:S3cret7!@tcp(127.0.0.1:1)",    // no trailing slash
	"mon:S3cret8!@udp(127.0.0.1:1)/",   // unknown network
	"mon:S3cret9!",                     // nothing but credentials
}

func secretOf(i int) string { return strings.Replace("S3cret%d!", "%d", string(rune('0'+i)), 1) }

func TestMaskedConfigErrors(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	for i, dsn := range malformedDSNs {
		secret := secretOf(i)
		if i == 6 {
			secret = "S3c@r/et6!"
		}
		cfg, err := sec.Config(dsn, "")
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("%d: %T is not a ConfigError: %v", i, err, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%d: error shows the password: %v", i, err)
			}
			continue
		}
		if strings.Contains(sec.Target(cfg), secret) {
			t.Errorf("%d: target shows the password: %s", i, sec.Target(cfg))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = sec.OpenConfig(ctx, cfg)
		cancel()
		if err == nil {
			t.Errorf("%d: %q connected to port 1", i, dsn)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%d: connect error shows the password: %v", i, err)
		}
		if got := sec.RedactDSN(dsn); strings.Contains(got, secret) {
			t.Errorf("%d: RedactDSN = %q", i, got)
		}
	}
}

func TestTypoDSNRefused(t *testing.T) {
	sec := NewSecrets()
	for _, dsn := range []string{"mon:pw/tcp(127.0.0.1:1)/", "mon:pwtcp(127.0.0.1:1)/", "mysql://mon@db1/shop"} {
		if _, err := sec.Config(dsn, ""); err == nil {
			t.Errorf("%q accepted", dsn)
		}
	}
	// The password is masked, the address the user typed stays readable.
	_, err := sec.Config("mon:Typo-Pw/tcp(127.0.0.1:1)/", "")
	if err == nil || strings.Contains(err.Error(), "Typo-Pw") || !strings.Contains(err.Error(), "tcp(127.0.0.1:1)") {
		t.Errorf("'/' for '@': %v", err)
	}
	_, err = sec.Config("mysql://mon:pw@db1/shop", "")
	if err == nil || !strings.Contains(err.Error(), "'mon@tcp(db1:3306)/shop'") {
		t.Errorf("URL: %v", err)
	}
}

func TestMaskFreeText(t *testing.T) {
	sec := NewSecrets()
	sec.remember("hunter2-remembered")
	for in, want := range map[string]string{
		"dial app:pw@tcp(h:1): refused": "dial app:xxx@tcp(h:1): refused",
		"see mysql://u:pw@h/":           "see mysql://u:xxx@h/",
		"x hunter2-remembered y":        "x xxx y",
		"app@tcp(h:3306)/ at 12:30":     "app@tcp(h:3306)/ at 12:30",
	} {
		if got := sec.Mask(in); got != want {
			t.Errorf("Mask(%q) = %q, want %q", in, got, want)
		}
	}
	err := sec.MaskError(&mysql.MySQLError{Number: 1045, Message: "denied for hunter2-remembered"})
	var me *mysql.MySQLError
	if !errors.As(err, &me) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("MaskError lost the chain or the mask: %v", err)
	}
}

func TestDefaultsFileLikeMysqlClient(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	cases := []struct{ cnf, target string }{
		{"[mysql]\nuser=mon\n", "mon@unix(" + DefaultSocket + ")"},
		{"[client]\nhost=localhost\nport=3307\nsocket=/tmp/x.sock\nuser=mon\n", "mon@unix(/tmp/x.sock)"},
		{"[client]\nhost=localhost\nport=3307\nprotocol=TCP\n", "root@tcp(127.0.0.1:3307)"},
		{"[client]\nhost=db1\n[gapscope]\nport=3310\nuser=g\n", "g@tcp(db1:3310)"},
		{"[client-server]\nsocket=/s.sock\n[mysqld]\nport=1\n", "root@unix(/s.sock)"},
	}
	for _, c := range cases {
		cfg, err := sec.Config("", writeCnf(t, c.cnf))
		if err != nil {
			t.Errorf("%q: %v", c.cnf, err)
			continue
		}
		if got := sec.Target(cfg); got != c.target {
			t.Errorf("%q: target %s, want %s", c.cnf, got, c.target)
		}
	}
	for _, bad := range []string{"", "[mysqld]\nuser=mysql\nport=3307\n", "# only a comment\n", "[client]\nhost=db1\nport=99999\n"} {
		_, err := sec.Config("", writeCnf(t, bad))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: want a ConfigError, got %v", bad, err)
		}
	}
}

func TestDefaultsFilePasswordMasked(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	cfg, err := sec.Config("", writeCnf(t, "[client]\nuser=mon\npassword=\"Pw From File\"\nhost=127.0.0.1\nport=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sec.OpenConfig(context.Background(), cfg)
	if err == nil || strings.Contains(err.Error(), "Pw From File") || !strings.Contains(err.Error(), "mon@tcp(127.0.0.1:1)") {
		t.Errorf("connect error: %v", err)
	}
	if got := sec.Mask("password was Pw From File"); got != "password was xxx" {
		t.Errorf("file password not remembered: %q", got)
	}
}

// TestTypoDSNLeaksNoFragment covers typos where the driver's own message
// echoes a piece of the password rather than all of it: with no '/' after the
// address the driver cuts the DSN at a '/' inside the password and names
// "user:start-of-password" as the network; a ':' typed as '@' makes the
// password part of the user name, which the target and the server's
// "Access denied for user ..." both show.
func TestTypoDSNLeaksNoFragment(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	cases := []struct{ dsn, fragment string }{
		{"mon:Fragm3nt/x9@tcp(127.0.0.1:1)", "Fragm3nt"},
		{"mon@AtTyped7@tcp(127.0.0.1:1)/", "AtTyped7"},
	}
	for _, c := range cases {
		cfg, err := sec.Config(c.dsn, "")
		if err != nil {
			if strings.Contains(err.Error(), c.fragment) {
				t.Errorf("%q: error shows part of the password: %v", c.dsn, err)
			}
			continue
		}
		if strings.Contains(sec.Target(cfg), c.fragment) {
			t.Errorf("%q: target shows part of the password: %s", c.dsn, sec.Target(cfg))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err = sec.OpenConfig(ctx, cfg)
		cancel()
		if err == nil || strings.Contains(err.Error(), c.fragment) {
			t.Errorf("%q: connect error shows part of the password: %v", c.dsn, err)
		}
	}
}

// TestDefaultsFileMalformedRefused: the mysql client aborts on a group
// header without its ']' and on an option before any group; reading past
// them would take options from the wrong group (or none) and connect to
// another server than the file names.
func TestDefaultsFileMalformedRefused(t *testing.T) {
	sec := NewSecrets()
	t.Setenv("MYSQL_PWD", "")
	for _, bad := range []string{
		"[client\nuser=x\nsocket=/tmp/x.sock\n",
		"user=x\n[client]\nsocket=/tmp/x.sock\n",
	} {
		_, err := sec.Config("", writeCnf(t, bad))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: want a ConfigError naming line 1, got %v", bad, err)
		}
	}
}

func TestDriverLogMasksAndDropsIdleCloses(t *testing.T) {
	sec := NewSecrets()
	sec.remember("Dr1verPw")
	var b strings.Builder
	l := driverLog{&b, sec}
	l.Print("closing bad idle connection: ", "unexpected read from socket")
	l.Print("net.Error from Dial()': dial tcp mon:Dr1verPw@tcp(10.0.0.1:1): refused")
	out := b.String()
	if strings.Contains(out, "idle") || strings.Contains(out, "Dr1verPw") {
		t.Fatalf("driver log %q: an idle close or a password got through", out)
	}
	if !strings.HasPrefix(out, "gapscope: mysql driver: ") || !strings.Contains(out, "refused") {
		t.Fatalf("driver log %q: the dial error is missing", out)
	}
}

// TestSecretsAreTheirOwn: a password one registry learns is not masked by
// another, so two commands in one process (a lab, a test) keep theirs apart.
func TestSecretsAreTheirOwn(t *testing.T) {
	a, b := NewSecrets(), NewSecrets()
	a.remember("only-in-a")
	b.remember("only-in-b")
	if got := a.Mask("only-in-a only-in-b"); got != "xxx only-in-b" {
		t.Errorf("a masks %q", got)
	}
	if got := b.Mask("only-in-a only-in-b"); got != "only-in-a xxx" {
		t.Errorf("b masks %q", got)
	}
}
