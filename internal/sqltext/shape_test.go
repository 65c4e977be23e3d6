package sqltext

import (
	"bytes"
	"testing"
)

// otherLiterals rewrites raw's digits and the letters inside its single
// quotes, as another call of the same statement would send them. Digits
// inside names change too: then the shape differs, which is right.
func otherLiterals(raw []byte) []byte {
	out := bytes.Clone(raw)
	inQuote := false
	for i, c := range out {
		switch {
		case c == '\'':
			inQuote = !inQuote
		case isDigit(c):
			out[i] = '0' + (c-'0'+7)%10
		case inQuote && c >= 'a' && c <= 'z':
			out[i] = 'a' + (c-'a'+5)%26
		}
	}
	return out
}

// checkShapeSafe fails when raw and its rewrite share a shape but not a
// digest text: the shape cache would then answer one with the other's.
func checkShapeSafe(t *testing.T, raw []byte) (shared bool) {
	t.Helper()
	other := otherLiterals(raw)
	a, _, okA := appendShape(nil, raw)
	b, _, okB := appendShape(nil, other)
	if !okA || !okB || !bytes.Equal(a, b) {
		return false
	}
	textA, _ := NewNormalizer(1).Normalize(raw)
	textB, _ := NewNormalizer(1).Normalize(other)
	if textA != textB {
		t.Fatalf("one shape, two digest texts:\n %q -> %q\n %q -> %q", raw, textA, other, textB)
	}
	return true
}

func TestShapeJoinsOnlyOneDigestText(t *testing.T) {
	shared := 0
	for _, c := range normalizeCases {
		if checkShapeSafe(t, []byte(c.in)) {
			shared++
		}
	}
	if shared < 10 {
		t.Errorf("only %d of %d cases have a shape shared with other literals", shared, len(normalizeCases))
	}
}

func TestShapeKeepsWhatIsNotALiteral(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		share bool
	}{
		{"SELECT c FROM t WHERE id=5023", "SELECT c FROM t WHERE id=17", true},
		{"SELECT 'it''s', 1", "SELECT 'x', 22", true},
		{"SELECT N'a', _utf8mb4'b', X'1F'", "SELECT N'zz', _utf8mb4'', X'00'", true},
		{"SELECT x FROM t WHERE a=.5", "SELECT x FROM t WHERE a=.75", true},
		{"SELECT 1col FROM t", "SELECT 2col FROM t", false}, // names that start with a digit
		{"SELECT @1, @@x1", "SELECT @2, @@x1", false},
		{"SELECT 1.5", "SELECT 2.5", false},
		{"SELECT 1e5", "SELECT 2e5", false},
		{"SELECT 0x1F", "SELECT 0x2F", false},
		{"SELECT c FROM sbtest1", "SELECT c FROM sbtest2", false},
		{"SELECT c FROM t1 WHERE id=1", "SELECT c FROM t2 WHERE id=1", false},
	} {
		a, na, okA := appendShape(nil, []byte(c.a))
		b, _, okB := appendShape(nil, []byte(c.b))
		if !okA || !okB {
			t.Errorf("%q / %q: no shape", c.a, c.b)
			continue
		}
		if got := bytes.Equal(a, b); got != c.share {
			t.Errorf("%q and %q share a shape: %v, want %v", c.a, c.b, got, c.share)
		}
		if c.share && na == 0 {
			t.Errorf("%q: no literal counted", c.a)
		}
		if c.share {
			ta, _ := NewNormalizer(1).Normalize([]byte(c.a))
			tb, _ := NewNormalizer(1).Normalize([]byte(c.b))
			if ta != tb {
				t.Errorf("%q -> %q, %q -> %q", c.a, ta, c.b, tb)
			}
		}
	}
}

// Texts whose lexing depends on more than the shape keeps have none.
func TestShapeGivesUp(t *testing.T) {
	for _, s := range []string{
		"SELECT 1 /* c */", "SELECT 1 -- c", "SELECT 1 # c", "SELECT /*!50000 1 */",
		`SELECT "a"`, "SELECT `a b`", `SELECT 'a\'b'`, "SELECT 1\x00",
	} {
		if _, _, ok := appendShape(nil, []byte(s)); ok {
			t.Errorf("%q has a shape", s)
		}
	}
}

// A normalizer answering from a shape gives what a fresh one computes.
func TestNormalizeByShapeMatchesFresh(t *testing.T) {
	n := NewNormalizer(0)
	for _, c := range normalizeCases {
		raw := []byte(c.in)
		n.Normalize(raw)
		other := otherLiterals(raw)
		got, gotDigest := n.Normalize(other)
		want, wantDigest := NewNormalizer(1).Normalize(other)
		if got != want || gotDigest != wantDigest {
			t.Errorf("%q after %q: %q %s, fresh %q %s", other, raw, got, gotDigest, want, wantDigest)
		}
	}
}

// FuzzShape checks that a shape never joins two different digest texts.
func FuzzShape(f *testing.F) {
	for _, c := range normalizeCases {
		f.Add([]byte(c.in))
	}
	for _, s := range []string{"1col", "@1", "1.5", "1e-5", ".5", "t.5", "0x1F", "0b01", "N'a'", "x'1f'", "'a''b'", "'unterminated", "5.", "-5", "in (1, 2)", "values (1, 'a')"} {
		f.Add([]byte("SELECT " + s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkShapeSafe(t, raw)
	})
}
