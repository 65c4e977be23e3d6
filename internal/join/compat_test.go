package join

import "testing"

// TestLeadingKeyword pins the verb the joiner compares: blanks, opening
// parentheses and comments before it are skipped.
func TestLeadingKeyword(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"SELECT c FROM t", "SELECT"},
		{" \t\r\n((select 1))", "select"},
		{"/* app=x */ UPDATE t SET a=1", "UPDATE"},
		{"-- note\n# other\n  DELETE FROM t", "DELETE"},
		{"/* unterminated", ""},
		{"-- no newline", ""},
		{"", ""},
		{"  ;", ""},
	} {
		if got := leadingKeyword(c.in); got != c.want {
			t.Errorf("leadingKeyword(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestTextCompatible: the verbs must agree, case aside; either text
// missing (a prepared statement's row has none) is no evidence.
func TestTextCompatible(t *testing.T) {
	agree := [][2]string{ // wire, server
		{"SELECT c FROM t WHERE id=?", "select c from t where id=5"},
		{"SELECT c FROM t WHERE id=?", ""},
		{"", "UPDATE t SET c=1"},
		{"/* x */ (SELECT 1)", "SELECT 1"},
	}
	for _, p := range agree {
		if !textCompatible(p[0], p[1]) {
			t.Errorf("%q and %q: not compatible, want compatible", p[0], p[1])
		}
	}
	if textCompatible("SELECT c FROM t WHERE id=?", "UPDATE t SET c=1") {
		t.Error("a SELECT compatible with an UPDATE")
	}
}
