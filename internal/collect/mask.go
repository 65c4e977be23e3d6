package collect

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// Secrets are the passwords a command has been given (in a DSN, typos
// included, in a defaults file or in MYSQL_PWD). Every message that can carry
// connection details passes through Mask, which replaces each of them, so a
// password cannot leave through a path nobody thought of (a driver error that
// echoes a mistyped DSN as a network name, say). A command owns one and
// connects through it, so the passwords it learns are those it masks; a
// process running several commands (a lab, a test) keeps them apart.
type Secrets struct {
	mu   sync.Mutex
	list []string // longest first, so that a password containing another is replaced whole
}

// NewSecrets returns a registry that knows no password yet.
func NewSecrets() *Secrets { return &Secrets{} }

// remember adds a password to those Mask replaces.
func (r *Secrets) remember(s string) {
	if s == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, have := range r.list {
		if have == s {
			return
		}
	}
	r.list = append(r.list, s)
	sort.Slice(r.list, func(i, j int) bool { return len(r.list[i]) > len(r.list[j]) })
}

// passwordShaped finds "user:password@net(" and "scheme://user:password@" in
// free text, for a password that was never handed to Config, and the network
// name the driver echoes when it cut a DSN at a '/' inside the password
// ("network 'user:start-of-password'"), which no remembered secret matches
// whole.
var passwordShaped = []*regexp.Regexp{
	regexp.MustCompile(`([\w.$-]+):[^\s@]*@((?:tcp[46]?|unix)\()`),
	regexp.MustCompile(`(://[^:/\s@]*):[^\s@]*@`),
	regexp.MustCompile(`(network ['"][^'":]*):[^'"]*(['"])`),
}

// Mask returns s with every password r has been given, and anything shaped
// like the password of a DSN, replaced by "xxx".
func (r *Secrets) Mask(s string) string {
	r.mu.Lock()
	list := r.list
	r.mu.Unlock()
	for _, p := range list {
		s = strings.ReplaceAll(s, p, "xxx")
	}
	s = passwordShaped[0].ReplaceAllString(s, "$1:xxx@$2")
	s = passwordShaped[1].ReplaceAllString(s, "$1:xxx@")
	return passwordShaped[2].ReplaceAllString(s, "$1:xxx$2")
}

// maskedError is an error whose text went through Mask; errors.Is and As
// still see the original chain.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// MaskError returns err with its text masked (nil stays nil).
func (r *Secrets) MaskError(err error) error {
	if err == nil {
		return nil
	}
	var m *maskedError
	if errors.As(err, &m) && m == err {
		return err
	}
	return &maskedError{msg: r.Mask(err.Error()), err: err}
}

// dsnSecrets are the strings of a DSN, as typed, that may be its password:
// what lies between the first ':' and the last '@' of the credentials part;
// with no '@' at all (a typo: '/' or nothing typed for '@'), what follows the
// first ':' up to the network name before '(', or, when no network name can
// be seen, each of: up to the next '/' or '(', up to the last '/', all of
// it. A ':' inside the address's parentheses starts no password.
func dsnSecrets(dsn string) []string {
	if i := strings.Index(dsn, "://"); i >= 0 {
		return urlSecrets(dsn[i+3:])
	}
	colon := strings.Index(dsn, ":")
	if colon < 0 {
		return nil
	}
	if paren := strings.Index(dsn, "("); paren >= 0 && paren < colon {
		return nil
	}
	rest := dsn[colon+1:]
	if at := credentialsEnd(rest); at >= 0 {
		return nonEmpty(rest[:at])
	}
	if pw, ok := beforeNetwork(rest); ok {
		return nonEmpty(pw)
	}
	var out []string
	if end := strings.IndexAny(rest, "/("); end >= 0 {
		out = append(out, rest[:end])
	}
	if end := strings.LastIndex(rest, "/"); end >= 0 {
		out = append(out, rest[:end])
	}
	return nonEmpty(append(out, rest)...)
}

// beforeNetwork is what precedes "net(" when the '@' before the network
// is missing or mistyped ("pw/tcp(", "pwtcp("): the password, with the
// mistyped character, masked whole so the address stays readable.
func beforeNetwork(rest string) (string, bool) {
	paren := strings.Index(rest, "(")
	if paren < 0 {
		return "", false
	}
	for _, network := range []string{"tcp4", "tcp6", "tcp", "unix"} {
		if pw, ok := strings.CutSuffix(rest[:paren], network); ok {
			return pw, true
		}
	}
	return "", false
}

// credentialsEnd is the index in s of the '@' that ends the credentials: the
// last '@' before the database name, as the driver parses it.
func credentialsEnd(s string) int {
	if slash := strings.LastIndex(s, "/"); slash >= 0 {
		if at := strings.LastIndex(s[:slash], "@"); at >= 0 {
			return at
		}
	}
	return strings.LastIndex(s, "@")
}

// urlSecrets is the password of "user:password@host..." (a URL's authority).
func urlSecrets(s string) []string {
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return nil
	}
	if _, pw, ok := strings.Cut(s[:at], ":"); ok {
		return nonEmpty(pw)
	}
	return nil
}

func nonEmpty(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// driverLog is the MySQL driver's logger: its messages go through Mask
// like every other, and the one it writes when the pool drops a
// connection the server closed while idle is left out (the pool retries
// on a new connection: nothing was lost, and the line looked like a
// failure in the middle of watch's output).
type driverLog struct {
	w       io.Writer
	secrets *Secrets
}

func (l driverLog) Print(v ...any) {
	msg := fmt.Sprint(v...)
	if strings.Contains(msg, "closing bad idle connection") {
		return
	}
	fmt.Fprintf(l.w, "gapscope: mysql driver: %s\n", l.secrets.Mask(strings.TrimSpace(msg)))
}

// LogDriverTo makes the MySQL driver write its messages to w, masked by r.
// The driver has one logger for the whole process, so the program sets it
// once, at start, with the registry its command line fills.
func LogDriverTo(w io.Writer, r *Secrets) error {
	return mysql.SetLogger(driverLog{w, r})
}
