package export

import (
	"fmt"
	"os"
	"sort"

	toolkit "github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
)

// WebSecurity is what a --web-config file turns on, read once at start to
// check the file and to tell the user; the server itself (exporter-toolkit)
// reads the file again on every connection and request, as every
// Prometheus exporter does, so a renewed certificate or a changed user
// needs no restart.
type WebSecurity struct {
	tls   bool
	users int
}

// LoadWebConfig checks the file as exporter-toolkit will read it (unknown
// keys, unreadable or mismatched certificate and key, a client CA without
// a client_auth_type, a password that is not a bcrypt hash) so that a bad
// file fails before watch starts. "" is plain HTTP.
func LoadWebConfig(path string) (WebSecurity, error) {
	if path == "" {
		return WebSecurity{}, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return WebSecurity{}, fmt.Errorf("--web-config: %w", err)
	}
	var c toolkit.Config
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return WebSecurity{}, fmt.Errorf("--web-config %s: %w", path, err)
	}
	if err := checkBcryptUsers(c.Users); err != nil {
		return WebSecurity{}, fmt.Errorf("--web-config %s: %w", path, err)
	}
	if err := toolkit.Validate(path); err != nil {
		return WebSecurity{}, fmt.Errorf("--web-config %s: %w", path, err)
	}
	return WebSecurity{tls: c.TLSConfig.IsEnabled(), users: len(c.Users)}, nil
}

// checkBcryptUsers names the user whose entry is not a bcrypt hash (the
// toolkit's own check does not), without quoting the entry: a plain
// password put there by mistake is still a password.
func checkBcryptUsers[S ~string](users map[string]S) error {
	names := make([]string, 0, len(users))
	for u := range users {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		if _, err := bcrypt.Cost([]byte(users[u])); err != nil {
			return fmt.Errorf("basic_auth_users: %q's entry is not a bcrypt hash (make one with htpasswd -nBC 10 %s)", u, u)
		}
	}
	return nil
}

// Scheme is the URL scheme the server answers on.
func (s WebSecurity) Scheme() string {
	if s.tls {
		return "https"
	}
	return "http"
}

// Describe is what the startup line adds about authentication; basic auth
// over plain HTTP sends passwords in the clear, and says so.
func (s WebSecurity) Describe() string {
	switch {
	case s.users > 0 && !s.tls:
		return fmt.Sprintf(", basic auth (%d users) WITHOUT TLS: passwords cross the network in the clear", s.users)
	case s.users > 0:
		return fmt.Sprintf(", basic auth (%d users)", s.users)
	}
	return ""
}
