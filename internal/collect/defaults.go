package collect

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultSocket is where MariaDB and MySQL packages put the server's socket
// when no socket= is configured: the mysql client's compiled-in default.
const DefaultSocket = "/run/mysqld/mysqld.sock"

// clientGroups are the my.cnf groups the mysql and mariadb clients read, plus
// gapscope's own.
var clientGroups = map[string]bool{
	"client": true, "mysql": true, "client-server": true, "client-mariadb": true,
	"mariadb-client": true, "gapscope": true,
}

// connectionOptions are the options a client group can give that gapscope uses.
var connectionOptions = []string{"user", "password", "host", "port", "socket", "database", "protocol"}

// HomeDefaultsFile is ~/.my.cnf when it exists (the file the mysql client
// reads by default), else "".
func HomeDefaultsFile() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	p := filepath.Join(home, ".my.cnf")
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	return ""
}

// ReadDefaultsFile returns the options of the client groups of a my.cnf file
// ([client], [mysql], [gapscope] and MariaDB's client groups), later lines
// winning as in the mysql client, following !include and !includedir. A file
// that gives none of the connection options is an error: gapscope never
// falls back silently to a server the file did not name.
func (r *Secrets) ReadDefaultsFile(path string) (map[string]string, error) {
	out := map[string]string{}
	groups := map[string]bool{}
	if err := r.readCnf(path, out, groups, 0); err != nil {
		return nil, err
	}
	for _, k := range connectionOptions {
		if _, ok := out[k]; ok {
			r.remember(out["password"])
			return out, nil
		}
	}
	return nil, r.configErrorf("defaults file %s gives no %s in a [client], [mysql] or [gapscope] group (groups in it: %s)",
		path, strings.Join(connectionOptions, ", "), groupList(groups))
}

func groupList(groups map[string]bool) string {
	if len(groups) == 0 {
		return "none"
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, "["+g+"]")
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func (r *Secrets) readCnf(path string, out map[string]string, groups map[string]bool, depth int) error {
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
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if err := r.malformedCnfLine(path, lineNo, line, group); err != nil {
			return err
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "!include "):
			inc := strings.TrimSpace(strings.TrimPrefix(line, "!include "))
			if err := r.readCnf(relTo(path, inc), out, groups, depth+1); err != nil {
				return err
			}
		case strings.HasPrefix(line, "!includedir "):
			dir := relTo(path, strings.TrimSpace(strings.TrimPrefix(line, "!includedir ")))
			files, _ := filepath.Glob(filepath.Join(dir, "*.cnf"))
			for _, inc := range files {
				if err := r.readCnf(inc, out, groups, depth+1); err != nil {
					return err
				}
			}
		case line[0] == '[':
			group = strings.ToLower(strings.Trim(line, "[] \t"))
			groups[group] = true
		case clientGroups[group]:
			k, v := splitOption(line)
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

// malformedCnfLine refuses what the mysql client aborts on: a group header
// without its ']' and an option before any group header. Reading on would
// take options from the wrong group, or none, and connect elsewhere.
func (r *Secrets) malformedCnfLine(path string, lineNo int, line, group string) error {
	switch {
	case line == "" || line[0] == '#' || line[0] == ';' || line[0] == '!':
		return nil
	case line[0] == '[' && !strings.Contains(line, "]"):
		return r.configErrorf("defaults file %s: line %d: group header without its ']' (the mysql client refuses the file too)", path, lineNo)
	case line[0] != '[' && group == "":
		return r.configErrorf("defaults file %s: line %d: option before any [group] header (the mysql client refuses the file too)", path, lineNo)
	}
	return nil
}

func relTo(base, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(base), p)
}

// splitOption parses "key = value"; option names use - and _
// interchangeably.
func splitOption(line string) (string, string) {
	k, v, _ := strings.Cut(line, "=")
	k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "-", "_")
	return k, optionValue(v)
}

// optionValue reads a value as the mysql client does: a quoted value ends
// at its closing quote (a comment may follow); otherwise '#' starts a
// comment wherever it stands, so "password=ab#cd" is "ab" for the client
// and must be for gapscope too.
func optionValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
			return v[1 : 1+end]
		}
	}
	if i := strings.IndexByte(v, '#'); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}
