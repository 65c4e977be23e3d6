package collect

import (
	"strings"
	"testing"
)

// What performance_schema shows of a text it cut at a 64-byte bound
// (MariaDB 10.11, performance_schema_max_sql_text_length=64): 61 bytes and
// "...", or fewer when a character straddles the cut.
func TestCutByServer(t *testing.T) {
	for _, tc := range []struct {
		text string
		max  int
		want bool
	}{
		{"SELECT 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...", 64, true},
		{"SELECT 'é€éééééééééééééééééééééé...", 64, true},
		{"SELECT 'wait...'", 64, false}, // ends in dots, far from the bound
		{"SELECT 1 /* and so on... */", 1024, false},
		{strings.Repeat("x", 1021) + "...", 1024, true},
		{strings.Repeat("x", 1024), 1024, false}, // no marker: whole
	} {
		if got := cutByServer(tc.text, tc.max); got != tc.want {
			t.Errorf("cutByServer(%q, %d) = %v, want %v", tc.text, tc.max, got, tc.want)
		}
	}
}

// LEFT(SQL_TEXT, n) counts characters: a text of n characters may be cut,
// whatever its length in bytes.
func TestCutByRead(t *testing.T) {
	for _, tc := range []struct {
		text   string
		prefix int
		want   bool
	}{
		{strings.Repeat("a", 128), 128, true},
		{strings.Repeat("a", 127), 128, false},
		{strings.Repeat("é", 100), 128, false}, // 200 bytes, 100 characters
		{strings.Repeat("é", 128), 128, true},
		{strings.Repeat("a", 500), 0, false}, // read whole
	} {
		if got := cutByRead(tc.text, tc.prefix); got != tc.want {
			t.Errorf("cutByRead(%d bytes, %d) = %v, want %v", len(tc.text), tc.prefix, got, tc.want)
		}
	}
}
