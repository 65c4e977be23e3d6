package sqltext

import (
	"os"
	"strings"
	"testing"
)

// TestFingerprintMatchesPt compares Fingerprint with pt-query-digest's own
// fingerprints of the same statements (testdata/gen/ptfingerprint.sh wrote
// them with pt-query-digest 3.2.1).
func TestFingerprintMatchesPt(t *testing.T) {
	queries := readFixture(t, "testdata/fingerprint/queries.sql")
	want := strings.Split(strings.TrimSuffix(readFixture(t, "testdata/fingerprint/queries.expect"), "\n"), "\n")
	stmts := strings.Split(queries, ";\n")
	stmts = stmts[:len(stmts)-1] // after the last ";\n"
	if len(stmts) != len(want) {
		t.Fatalf("%d statements, %d expected fingerprints: regenerate with testdata/gen/ptfingerprint.sh", len(stmts), len(want))
	}
	for i, q := range stmts {
		if got := Fingerprint(q); got != want[i] {
			t.Errorf("statement %d %q:\n got %q\nwant %q", i+1, q, got, want[i])
		}
	}
}

func readFixture(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestQueryID(t *testing.T) {
	// echo -n begin | md5sum: 8d589afa4dfaeeed85fff5aa78e5ff6a
	if got, want := QueryID("begin"), "8D589AFA4DFAEEED85FFF5AA78E5FF6A"; got != want {
		t.Errorf("QueryID(begin) = %s, want %s", got, want)
	}
}

// Class gives the same class, sharing its strings, for statements that
// differ in literals; whole-statement rules have their own class.
func TestFingerprinterClass(t *testing.T) {
	var f Fingerprinter
	a := f.Class([]byte("SELECT c FROM sbtest1 WHERE id=5021"))
	b := f.Class([]byte("select c from sbtest2 where id=7"))
	if a != b || a.Fingerprint != "select c from sbtest? where id=?" || a.ID != QueryID(a.Fingerprint) {
		t.Errorf("classes %+v and %+v", a, b)
	}
	if allocs := testing.AllocsPerRun(100, func() { f.Class([]byte("SELECT c FROM sbtest3 WHERE id=99")) }); allocs != 0 {
		t.Errorf("a known class costs %.0f allocations", allocs)
	}
	if c := f.Class([]byte("CALL p(1)")); c.Fingerprint != "call p" || c.ID != QueryID("call p") {
		t.Errorf("call: %+v", c)
	}
	if got := f.Fingerprint("use db1"); got != "use ?" {
		t.Errorf("use: %q", got)
	}
}

// The shape cache must never change a class: a statement of a cached shape
// gets the class Fingerprint gives it. Each pair is a statement that fills
// the cache and one of the same shape (other digits and string contents)
// that must still be fingerprinted apart where the fingerprint reads the
// strings' bytes.
func TestFingerprinterShapeCacheKeepsClasses(t *testing.T) {
	pairs := [][2]string{
		{"SELECT c FROM sbtest1 WHERE id=5021", "SELECT c FROM sbtest1 WHERE id=7"},
		{"SELECT c FROM t WHERE k IN (1, 2, 3)", "SELECT c FROM t WHERE k IN (14, 2222, 3)"},
		{"SELECT 'ab' FROM t", "SELECT 'a''b' FROM t"},                                          // one string or two
		{"SELECT 'ab' FROM t", "SELECT 'a\"b' FROM t"},                                          // a double quote
		{"SELECT 'x', 'y' FROM t", "SELECT 'x\"', '\"y' FROM t"},                                // double quotes pair up
		{"SELECT 'ab' FROM t", "SELECT 'a--b' FROM t"},                                          // a line comment
		{"SELECT 'ab' FROM t", "SELECT 'a#b' FROM t"},                                           // a line comment
		{"SELECT 'ab', 'cd' FROM t", "SELECT 'a/*b', 'c*/d' FROM t"},                            // a block comment
		{"INSERT INTO t VALUES ('a', 1), ('b', 2)", "INSERT INTO t VALUES ('a)', 1), ('b', 2)"}, // the first row's end
		{"INSERT INTO t VALUES ('a', 1),('b', 2)", "INSERT INTO t VALUES ('a,(', 1),('b', 2)"},
		{"SELECT 'ab' FROM t", "SELECT 'ab FROM t"},     // unterminated
		{"SELECT 'a b' FROM t", "SELECT 'a\nb' FROM t"}, // a newline
		{"SELECT * FROM t LIMIT 10, 20", "SELECT * FROM t LIMIT 1, 2"},
		{"SELECT * FROM t WHERE a = -5 AND b = 0", "SELECT * FROM t WHERE a = -55 AND b = 123456789"},
		{"SELECT * FROM t WHERE a = 'null' OR b = 'true'", "SELECT * FROM t WHERE a = 'x' OR b = 'y'"},
		{"USE db1", "USE db2"},
	}
	for _, p := range pairs {
		var f Fingerprinter
		for _, q := range p {
			if got, want := f.Class([]byte(q)), Fingerprint(q); got.Fingerprint != want || got.ID != QueryID(want) {
				t.Errorf("after %q, %q: class %+v, want fingerprint %q", p[0], q, got, want)
			}
		}
	}
}

// The same over pt-query-digest's reference statements, each seen after a
// copy of itself with other digits and string contents, in one
// Fingerprinter (the classes of all statements before it cached).
func TestFingerprinterShapeCacheOnPtStatements(t *testing.T) {
	stmts := strings.Split(readFixture(t, "testdata/fingerprint/queries.sql"), ";\n")
	var f Fingerprinter
	shared := 0
	for _, q := range stmts[:len(stmts)-1] {
		for _, v := range []string{longerLiterals(q), q} {
			if got, want := f.Class([]byte(v)), Fingerprint(v); got.Fingerprint != want || got.ID != QueryID(want) {
				t.Errorf("%q: class %+v, want fingerprint %q", v, got, want)
			}
		}
		if _, _, ok := f.shapeKey([]byte(q)); ok {
			shared++
		}
	}
	if shared < 10 {
		t.Errorf("only %d statements have a shape to cache by: the test no longer tests the cache", shared)
	}
}

// longerLiterals rewrites every digit to another one (a 0 to 99) and doubles
// the letters of single-quoted strings: the shape stays, literals change
// and grow.
func longerLiterals(q string) string {
	b := []byte(q)
	in := false
	var out []byte
	for _, c := range b {
		switch {
		case c == '\'':
			in = !in
		case isDigit(c):
			c = '0' + (c-'0'+3)%10
			if c == '0' {
				out = append(out, '9') // a longer run too
			}
		case in && c >= 'a' && c <= 'z':
			out = append(out, c)
		}
		out = append(out, c)
	}
	return string(out)
}

// FuzzFingerprinterClass: whatever the statement, the cached class of a
// statement seen after one of its shape is its fingerprint's.
func FuzzFingerprinterClass(f *testing.F) {
	for _, q := range fingerprintInputs {
		f.Add(q)
	}
	f.Add("INSERT INTO t VALUES ('a)', 1), ('b', 2)")
	f.Add("SELECT 'a''b', 'c\"d' FROM t -- x")
	f.Fuzz(func(t *testing.T, q string) {
		var fp Fingerprinter
		fp.Class([]byte(longerLiterals(q)))
		if got, want := fp.Class([]byte(q)), Fingerprint(q); got.Fingerprint != want {
			t.Errorf("%q: class %q, want %q", q, got.Fingerprint, want)
		}
	})
}
