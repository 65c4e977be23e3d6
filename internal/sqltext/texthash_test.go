package sqltext

import "testing"

// TextHash names a statement's exact text, literals included, as the wire
// and performance_schema give it; where the two may differ it says nothing.
func TestTextHash(t *testing.T) {
	a := TextHash([]byte("SELECT v FROM t WHERE id = 17"))
	if a == 0 {
		t.Fatal("no hash for a plain statement")
	}
	if b := TextHashString("  SELECT v FROM t WHERE id = 17 ;\n"); b != a {
		t.Errorf("trimmed as the server trims: %x != %x", b, a)
	}
	if b := TextHashString("SELECT v FROM t WHERE id = 18"); b == a || SameText(a, b) {
		t.Error("another literal, the same text")
	}
	if !SameText(a, a) || !SameText(a, 0) || !SameText(0, a) {
		t.Error("the same text, or no evidence, said to differ")
	}
	// performance_schema_max_sql_text_length=16: the server keeps a prefix.
	if cut := TextHashString("SELECT v FROM t W"); !SameText(a, cut) {
		t.Error("a text the server cut short said to differ")
	}
	if longer := TextHashString("SELECT v FROM t WHERE id = 170"); SameText(a, longer) {
		t.Error("a longer row said to be the same text")
	}
	for _, s := range []string{"", "  ;", "SELECT 1; SELECT 2", string(make([]byte, maxHashedText+1)), "SELECT 'caf\xe9'", "SELECT 'café'", "SELECT 'é' FROM t WHERE x = 1"} {
		if h := TextHashString(s); h != 0 {
			t.Errorf("%.20q: hash %x, want none", s, h)
		}
	}
}

// Hashing costs no allocation: the capture hashes every query's text.
func TestTextHashAllocatesNothing(t *testing.T) {
	b := []byte(" SELECT v FROM t WHERE id = 17;")
	s := string(b)
	if n := testing.AllocsPerRun(100, func() { TextHash(b); TextHashString(s) }); n != 0 {
		t.Errorf("%v allocations per hash", n)
	}
}
