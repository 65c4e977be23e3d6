package mysqlproto

// InterpolateParams appends sql to dst with each '?' placeholder replaced
// by the next rendered param. Placeholders inside quoted strings, quoted
// identifiers and comments are left alone, as are placeholders beyond the
// last param.
func InterpolateParams(dst, sql []byte, params [][]byte) []byte {
	next := 0
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '?' && next < len(params):
			dst = append(dst, params[next]...)
			next++
			i++
		case c == '\'' || c == '"' || c == '`':
			j := skipQuoted(sql, i)
			dst = append(dst, sql[i:j]...)
			i = j
		case c == '#' || (c == '-' && i+2 < len(sql) && sql[i+1] == '-' && isSpace(sql[i+2])):
			j := skipLine(sql, i)
			dst = append(dst, sql[i:j]...)
			i = j
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			j := skipBlock(sql, i)
			dst = append(dst, sql[i:j]...)
			i = j
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// skipQuoted returns the index after the quoted run starting at i; a
// backslash escapes (except in identifiers) and a doubled quote is a quote.
func skipQuoted(s []byte, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j++
		case s[j] == q:
			return j + 1
		}
	}
	return len(s)
}

func skipLine(s []byte, i int) int {
	for j := i; j < len(s); j++ {
		if s[j] == '\n' {
			return j + 1
		}
	}
	return len(s)
}

func skipBlock(s []byte, i int) int {
	for j := i + 2; j+1 < len(s); j++ {
		if s[j] == '*' && s[j+1] == '/' {
			return j + 2
		}
	}
	return len(s)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
