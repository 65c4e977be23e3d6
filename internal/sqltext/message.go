package sqltext

import "strings"

// RedactMessage redacts a server error message the way statement text is
// redacted: quoted values ('...' and "...", which in MariaDB and MySQL
// messages carry row values, key names and the SQL near a syntax error) and
// numbers become ?. Back-quoted identifiers and words are kept, so the
// message still says what went wrong: "Duplicate entry '1' for key
// 'PRIMARY'" becomes "Duplicate entry ? for key ?". A quote left open (a
// message cut short) redacts the rest.
func RedactMessage(msg string) string {
	var b strings.Builder
	b.Grow(len(msg))
	for i := 0; i < len(msg); {
		c := msg[i]
		switch {
		case (c == '\'' || c == '"') && (i == 0 || !isIdent(msg[i-1])): // not an apostrophe (doesn't)
			i = skipQuoted(msg, i)
			b.WriteByte('?')
		case isDigit(c) && (i == 0 || !isIdent(msg[i-1])):
			for i < len(msg) && (isIdent(msg[i]) || msg[i] == '.' && i+1 < len(msg) && isDigit(msg[i+1])) {
				i++
			}
			b.WriteByte('?')
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// skipQuoted returns the index just past the quoted value starting at i.
// Servers print values unescaped ('O'Brien'), so a quote closes the value
// only where a word does not go on after it; a doubled quote or a
// backslash escape stays inside it.
func skipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case q:
			if j+1 < len(s) && (s[j+1] == q || isIdent(s[j+1])) {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}
