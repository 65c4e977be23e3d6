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
	for _, c := range []struct {
		wire, server string
		want         bool
	}{
		{"SELECT c FROM t WHERE id=?", "select c from t where id=5", true},
		{"SELECT c FROM t WHERE id=?", "UPDATE t SET c=1", false},
		{"SELECT c FROM t WHERE id=?", "", true},
		{"", "UPDATE t SET c=1", true},
		{"/* x */ (SELECT 1)", "SELECT 1", true},
	} {
		if got := textCompatible(c.wire, c.server); got != c.want {
			t.Errorf("textCompatible(%q, %q) = %v, want %v", c.wire, c.server, got, c.want)
		}
	}
}
