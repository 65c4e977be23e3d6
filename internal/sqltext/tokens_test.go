package sqltext

import (
	"fmt"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	got := func(sql string) string {
		var b []string
		for _, k := range Tokens(sql) {
			s := fmt.Sprintf("%d:%s", k.Kind, k.Text)
			if k.Exec {
				s += "!"
			}
			b = append(b, s)
		}
		return strings.Join(b, " ")
	}
	for sql, want := range map[string]string{
		// A literal's content is never given out; names are, unquoted.
		"SELECT `update`, `a``b` FROM t WHERE c = 'secret' AND d = 42": "0:SELECT 1:update 4:, 1:a`b 0:FROM 0:t 0:WHERE 0:c 4:= 2:' 0:AND 0:d 4:= 2:4",
		// The content of an executable comment is lexed and marked.
		"SELECT /*! 1; DELETE */ @a := ? -- x": "0:SELECT 2:1! 4:;! 0:DELETE! 0:@a 4::= 3:?",
		"`a`into `b`":                          "1:a 0:into 1:b",
	} {
		if g := got(sql); g != want {
			t.Errorf("Tokens(%q)\n got %s\nwant %s", sql, g, want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"select 1", 8, "select 1"}, {"select 12", 8, "select …"}, {"ünïcödé", 4, "ünï…"}} {
		if got := Clip(c.s, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
