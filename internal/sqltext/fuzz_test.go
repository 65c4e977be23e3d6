package sqltext

import (
	"testing"
	"unicode/utf8"
)

// FuzzNormalize checks that no input panics, that normalizing is idempotent
// on the digest text, and that the cache answers as a fresh computation.
func FuzzNormalize(f *testing.F) {
	for _, c := range normalizeCases {
		f.Add([]byte(c.in))
	}
	for _, s := range []string{"'", "`", "\"", "/*", "/*!", "*/", "--", "-- ", "#", "@", "@@", "0x", "1e", ".", "...", "(((", ")))", "in (", "values (", "x'", "_a\""} {
		f.Add([]byte(s))
	}
	cached := NewNormalizer(4)
	f.Fuzz(func(t *testing.T, raw []byte) {
		fresh := NewNormalizer(1)
		text, digest := fresh.Normalize(raw)
		if len(text) > MaxDigestText {
			t.Fatalf("digest text of %d bytes exceeds %d", len(text), MaxDigestText)
		}
		if digest != Digest(text) {
			t.Fatalf("digest %s is not Digest(%q)", digest, text)
		}
		if again, _ := fresh.Normalize([]byte(text)); again != text {
			t.Fatalf("not idempotent:\n raw  %q\n once %q\n twice %q", raw, text, again)
		}
		if utf8.Valid(raw) && !utf8.ValidString(text) {
			t.Fatalf("valid UTF-8 %q gave invalid %q", raw, text)
		}
		for range 2 {
			if got, _ := cached.Normalize(raw); got != text {
				t.Fatalf("cached normalizer gave %q, fresh %q", got, text)
			}
		}
	})
}
