package sqltext

import "testing"

func TestRedactMessage(t *testing.T) {
	cases := []struct{ in, want string }{
		{"Duplicate entry '1' for key 'PRIMARY'", "Duplicate entry ? for key ?"},
		{"You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near 'SELEC 1' at line 1",
			"You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version for the right syntax to use near ? at line ?"},
		{"Table 'shop.orders' doesn't exist", "Table ? doesn't exist"},
		{"Unknown column 'x' in 'field list'", "Unknown column ? in ?"},
		{`Duplicate entry 'it''s \'42\'' for key "uk"`, "Duplicate entry ? for key ?"},
		{"Data too long for column `name` at row 7", "Data too long for column `name` at row ?"},
		{"Out of range value for column 'n' at row 1.5e3 -12", "Out of range value for column ? at row ? -?"},
		{"Illegal mix of collations (utf8mb4_general_ci,IMPLICIT) and (latin1_swedish_ci,COERCIBLE) for t1", "Illegal mix of collations (utf8mb4_general_ci,IMPLICIT) and (latin1_swedish_ci,COERCIBLE) for t1"},
		{"Duplicate entry 'secret value cut sho", "Duplicate entry ?"},
		{"Lock wait timeout exceeded; try restarting transaction", "Lock wait timeout exceeded; try restarting transaction"},
		{"Wert 'ä' für Schlüssel 0x1F", "Wert ? für Schlüssel ?"},
		{"Duplicate entry 'O'Brien' for key 'name'", "Duplicate entry ? for key ?"},
		{"", ""},
	}
	for _, c := range cases {
		if got := RedactMessage(c.in); got != c.want {
			t.Errorf("RedactMessage(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func FuzzRedactMessage(f *testing.F) {
	f.Add("Duplicate entry '1' for key 'PRIMARY'")
	f.Add(`x "a\`)
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactMessage(s)
		if len(out) > len(s) {
			t.Fatalf("redacted %q grew to %q", s, out)
		}
		for i := 0; i < len(out); i++ {
			if (out[i] == '\'' || out[i] == '"') && (i == 0 || !isIdent(out[i-1]) && out[i-1] != '?') { // a number's ? stands for word bytes
				t.Fatalf("a quote that opens a value survived in %q (from %q)", out, s)
			}
		}
	})
}
