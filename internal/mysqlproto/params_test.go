package mysqlproto

import (
	"encoding/binary"
	"testing"
)

func TestRenderValue(t *testing.T) {
	cases := []struct {
		name  string
		typ   byte
		flags byte
		b     []byte
		want  string
	}{
		{"tiny", typeTiny, 0, []byte{0xfe}, "-2"},
		{"tiny unsigned", typeTiny, 0x80, []byte{0xfe}, "254"},
		{"short", typeShort, 0, []byte{0x00, 0x80}, "-32768"},
		{"year", typeYear, 0, []byte{0xe8, 0x07}, "2024"},
		{"long", typeLong, 0, binary.LittleEndian.AppendUint32(nil, 123456), "123456"},
		{"int24 negative", typeInt24, 0, binary.LittleEndian.AppendUint32(nil, 0xffffffff), "-1"},
		{"decimal", typeNewDecimal, 0, lenencStr([]byte("-12.50")), "-12.50"},
		{"decimal not numeric", typeNewDecimal, 0, lenencStr([]byte("1; DROP")), "'1; DROP'"},
		{"string escapes", typeString, 0, lenencStr([]byte("a'b\\c\nd\x00")), `'a\'b\\c\nd\0'`},
		{"binary blob", typeBlob, 0, lenencStr([]byte{0xff, 0x00}), "X'FF00'"},
		{"bit", typeBit, 0, lenencStr([]byte{0x05}), "X'05'"},
		{"json", typeJSON, 0, lenencStr([]byte(`{"a":1}`)), `'{"a":1}'`},
		{"date", typeDate, 0, []byte{4, 0xe8, 0x07, 2, 29}, "'2024-02-29'"},
		{"datetime zero", typeDateTime, 0, []byte{0}, "'0000-00-00 00:00:00'"},
		{"datetime 7", typeDateTime, 0, []byte{7, 0xe8, 0x07, 2, 29, 23, 59, 58}, "'2024-02-29 23:59:58'"},
		{"time", typeTime, 0, []byte{8, 0, 1, 0, 0, 0, 2, 3, 4}, "'26:03:04'"},
		{"time negative µs", typeTime, 0, []byte{12, 1, 0, 0, 0, 0, 10, 0, 5, 0x40, 0xe2, 0x01, 0}, "'-10:00:05.123456'"},
		{"time zero", typeTime, 0, []byte{0}, "'00:00:00'"},
		{"null", typeNull, 0, nil, "NULL"},
	}
	for _, c := range cases {
		got, pos, ok := renderValue(nil, c.typ, c.flags, c.b, 0)
		if !ok || string(got) != c.want || pos != len(c.b) {
			t.Errorf("%s: got %q pos %d ok %v, want %q pos %d", c.name, got, pos, ok, c.want, len(c.b))
		}
	}
	bad := []struct {
		name string
		typ  byte
		b    []byte
	}{
		{"short long", typeLong, []byte{1, 2}},
		{"string past end", typeString, []byte{5, 'a'}},
		{"date bad length", typeDate, []byte{3, 1, 2, 3}},
		{"unknown type", 0x40, []byte{1}},
	}
	for _, c := range bad {
		if _, _, ok := renderValue(nil, c.typ, 0, c.b, 0); ok {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

func TestInterpolateParams(t *testing.T) {
	params := [][]byte{[]byte("1"), []byte("'x'"), []byte("NULL")}
	cases := []struct{ sql, want string }{
		{"SELECT ?, ?, ?", "SELECT 1, 'x', NULL"},
		{"SELECT '?', ?", "SELECT '?', 1"},
		{`SELECT "a\"?", ?`, `SELECT "a\"?", 1`},
		{"SELECT `?`, ? -- ?\n, ?", "SELECT `?`, 1 -- ?\n, 'x'"},
		{"SELECT /* ? */ ? # ?", "SELECT /* ? */ 1 # ?"},
		{"SELECT ?,?,?,?", "SELECT 1,'x',NULL,?"},
		{"SELECT 'it''s ?', ?", "SELECT 'it''s ?', 1"},
		{"SELECT 'unterminated ?", "SELECT 'unterminated ?"},
	}
	for _, c := range cases {
		if got := string(InterpolateParams(nil, []byte(c.sql), params)); got != c.want {
			t.Errorf("%q: got %q, want %q", c.sql, got, c.want)
		}
	}
}
