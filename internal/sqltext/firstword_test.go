package sqltext

import "testing"

func TestFirstKeyword(t *testing.T) {
	for text, want := range map[string]string{
		"commit":                              "commit",
		"  /* x */ Commit work":               "commit",
		"-- c\nROLLBACK":                      "rollback",
		"# c\nbegin":                          "begin",
		"START TRANSACTION":                   "start",
		"rollback to savepoint a":             "rollback",
		"\t\r\n((SELECT 1) UNION (SELECT 2))": "select",
		"/* a */ /* b */ (update t set a=1)":  "update",
		"truncate table t":                    "truncate",
		"COMMITTED":                           "", // longer than any keyword
		"truncated":                           "",
		"explain select 1":                    "", // not a keyword it knows
		"--comment\nselect 1":                 "", // "--" without a blank starts no comment
		"/* unterminated select":              "",
		"":                                    "",
		"   ":                                 "",
	} {
		if got := FirstKeyword(text); got != want {
			t.Errorf("%q: got %q, want %q", text, got, want)
		}
		if got := FirstKeyword([]byte(text)); got != want {
			t.Errorf("%q as bytes: got %q, want %q", text, got, want)
		}
	}
}

// BenchmarkFirstKeyword reads the keyword past a comment, as the wire's
// path does for every statement: it must not allocate.
func BenchmarkFirstKeyword(b *testing.B) {
	text := []byte("/* app:checkout */ (SELECT c FROM sbtest1 WHERE id=5023)")
	b.ReportAllocs()
	for b.Loop() {
		if FirstKeyword(text) != "select" {
			b.Fatal("no keyword")
		}
	}
}

func TestFirstKeywordAllocatesNothing(t *testing.T) {
	text := "/* x */ ROLLBACK"
	raw := []byte(text)
	if n := testing.AllocsPerRun(100, func() { FirstKeyword(text); FirstKeyword(raw) }); n != 0 {
		t.Errorf("%v allocations a call", n)
	}
}
