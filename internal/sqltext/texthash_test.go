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
	if b := TextHashString("SELECT v FROM t WHERE id = 18"); b == a {
		t.Error("another literal, the same hash")
	}
	for _, s := range []string{"", "  ;", "SELECT 1; SELECT 2", string(make([]byte, maxHashedText+1))} {
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
