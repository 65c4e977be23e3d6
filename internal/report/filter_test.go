package report

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func TestFilterMatches(t *testing.T) {
	s := &event.Statement{DB: "shop_eu", User: "app", Cmd: "COM_QUERY", DigestText: "select * from orders",
		ServerUS: 250_000, Parts: event.Parts{ClientUS: 900}, LockUS: 10, Rows: 5, RowsExamined: 5000, RespBytes: 820,
		Error: &event.Error{Code: 1146}}
	x := &Extra{Host: "web1", RowsAffected: 0, Plan: &Plan{FullScan: 1, TmpTables: 2}}
	for expr, want := range map[string]bool{
		"db = shop_eu":                            true,
		"db = 'shop*'":                            true,
		"db = shop":                               false,
		"db != 'shop?eu'":                         false,
		"user = app and host = web1":              true,
		"query_time > 0.2":                        true, // bare seconds
		"query_time > 250ms":                      false,
		"query_time >= 250ms":                     true,
		"query_time < 1s && rows_examined > 1000": true,
		"not (full_scan = yes)":                   false,
		"full_scan = no or tmp_tables >= 2":       true,
		"!(errno = 1146)":                         false,
		"errno <> 0 and text = '*orders'":         true,
		"lock_time = 10us or (rows_sent < 1)":     true,
		"client_time > 1ms || server_time < 1ms":  false,
		"bytes_sent == 820 and rows_affected = 0": true,
		"cmd = COM_QUERY AND NOT db = 'crm'":      true,
		// the digest text is lower case: SQL typed as written still matches
		"text = 'SELECT * FROM Orders'": true,
		"text != 'SELECT*'":             false,
		"cmd = com_query":               true,
		"db = SHOP_EU":                  false, // names are case-sensitive on the server
	} {
		f, err := ParseFilter(expr, ServerLatency)
		if err != nil {
			t.Errorf("%q: %v", expr, err)
			continue
		}
		if got := f.Match(s, x); got != want {
			t.Errorf("%q matched %v, want %v", expr, got, want)
		}
	}
}

// Precedence: and binds tighter than or; not binds tightest.
func TestFilterPrecedence(t *testing.T) {
	s := &event.Statement{DB: "a", User: "u"}
	for expr, want := range map[string]bool{
		"db = b and user = x or user = u":   true,
		"db = b and (user = x or user = u)": false,
		"not db = b and user = u":           true,
		"not (db = a and user = u)":         false,
	} {
		f, err := ParseFilter(expr, ClientLatency)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if got := f.Match(s, nil); got != want {
			t.Errorf("%q matched %v, want %v", expr, got, want)
		}
	}
}

func TestFilterErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"":                       "column 1: expected a field name, found the end",
		"db":                     "expected a comparison",
		"db =":                   "expected a value after",
		"dbx = a":                `unknown field "dbx"`,
		"db > a":                 "db is a string: only = and !=",
		"query_time > fast":      `"fast" is not a duration`,
		"rows_sent > 1.5":        "not a whole number",
		"full_scan = maybe":      "yes or no",
		"(db = a":                "expected ')'",
		"db = a)":                `unexpected ")"`,
		"db = 'a":                "string not closed",
		"db = a and":             "expected a field name",
		"system('rm -rf /') = 1": "unknown field",
		"db = a or or user = b":  `column 11: unknown field "or"`,
		"cmd = x AND 1 = 1":      `unknown field "1"`,
		"query_time > -1s":       "not a duration",
	} {
		_, err := ParseFilter(expr, ServerLatency)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "--filter: column ") {
			t.Errorf("%q: error %v, want one containing %q", expr, err, want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*", "abc", true}, {"*c", "abc", true}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*b*", "abc", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"é?", "éx", true},
		{"shop", "shop_eu", false}, {"[a]", "[a]", true},
	} {
		if got := globMatch(c.p, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}
