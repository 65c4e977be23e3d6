package sqltext

// FirstKeyword is the first word of a statement's text, lower-cased, when
// it is one of the statement keywords below, else "". It looks past leading
// blanks, opening parentheses and comments (/* */, "-- " and #), as a
// server does; an unterminated comment hides everything. The wire's path
// calls it for every statement, so it allocates nothing: the word is
// compared through a fixed buffer and the result is a constant.
func FirstKeyword[T string | []byte](text T) string {
	text = skipLead(text)
	n := 0
	for n < len(text) && isLetter(text[n]) {
		n++
	}
	if n > len(lowerWord{}) {
		return "" // longer than any keyword
	}
	var w lowerWord
	for i := range n {
		w[i] = text[i] | 0x20
	}
	return statementKeyword(w[:n])
}

// lowerWord holds a lower-cased first word: the longest keyword is eight
// letters ("rollback", "truncate", "optimize").
type lowerWord [8]byte

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// skipLead drops leading blanks, parentheses and comments.
func skipLead[T string | []byte](t T) T {
	for len(t) > 0 {
		switch {
		case t[0] == ' ' || t[0] == '\t' || t[0] == '\n' || t[0] == '\r' || t[0] == '(':
			t = t[1:]
		case len(t) > 1 && t[0] == '/' && t[1] == '*':
			end := commentEnd(t[2:])
			if end < 0 {
				return t[:0]
			}
			t = t[2+end+2:]
		case t[0] == '#' || (len(t) > 2 && t[0] == '-' && t[1] == '-' && (t[2] == ' ' || t[2] == '\t')):
			t = t[newlineAt(t):]
		default:
			return t
		}
	}
	return t
}

// commentEnd is the index of the "*/" that closes a block comment, or -1.
func commentEnd[T string | []byte](t T) int {
	for i := 0; i+1 < len(t); i++ {
		if t[i] == '*' && t[i+1] == '/' {
			return i
		}
	}
	return -1
}

// newlineAt is the index of the newline that ends a line comment, or len(t).
func newlineAt[T string | []byte](t T) int {
	i := 0
	for i < len(t) && t[i] != '\n' {
		i++
	}
	return i
}

// statementKeyword returns the keyword w spells as a constant string, or "".
func statementKeyword(w []byte) string {
	switch string(w) { // the conversion in a switch does not allocate
	case "select":
		return "select"
	case "with":
		return "with"
	case "update":
		return "update"
	case "delete":
		return "delete"
	case "insert":
		return "insert"
	case "replace":
		return "replace"
	case "load":
		return "load"
	case "call":
		return "call"
	case "lock":
		return "lock"
	case "do":
		return "do"
	case "alter":
		return "alter"
	case "create":
		return "create"
	case "drop":
		return "drop"
	case "truncate":
		return "truncate"
	case "rename":
		return "rename"
	case "optimize":
		return "optimize"
	case "repair":
		return "repair"
	case "analyze":
		return "analyze"
	case "begin":
		return "begin"
	case "start":
		return "start"
	case "commit":
		return "commit"
	case "rollback":
		return "rollback"
	}
	return ""
}
