package sqltext

// The lexer splits MySQL/MariaDB statement text into the few token classes
// the normalizer needs. It is not a parser: it knows literals, quoting,
// comments and operators, and nothing of the grammar. It never fails: any
// byte it does not recognise becomes a one-byte operator token, and an
// unterminated string or comment runs to the end of the input.

type kind uint8

const (
	kWord     kind = iota // unquoted identifier or keyword; also simple `quoted` identifiers and @variables
	kQuoted               // backtick identifier kept verbatim (not a simple name)
	kLiteral              // string, number, hex/bit literal: printed as ?
	kParam                // ? placeholder
	kEllipsis             // ... (a collapsed list in already-normalized text)
	kOp                   // operator or punctuation
)

// token is a half-open byte range of the source. For kWord from a backtick
// identifier the range excludes the backticks and ticked is set. exec marks
// a token inside an executable comment.
type token struct {
	kind         kind
	exec, ticked bool
	start, end   int
}

type lexer struct {
	src  []byte
	pos  int
	toks []token
	// inExec is set inside a /*! ... */ or /*M! ... */ executable comment,
	// whose closing */ must be skipped rather than lexed.
	inExec bool
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

// isIdent reports whether c may appear in an unquoted identifier. Bytes of
// multi-byte UTF-8 sequences count, as MySQL allows them in names.
func isIdent(c byte) bool {
	return c >= 0x80 || isDigit(c) || c == '_' || c == '$' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// lex appends the tokens of src to toks (comments dropped) and returns them.
func lex(toks []token, src []byte) []token {
	l := lexer{src: src, toks: toks[:0]}
	for l.pos < len(l.src) {
		l.step()
	}
	return l.toks
}

func (l *lexer) emit(k kind, start, end int) {
	l.toks = append(l.toks, token{kind: k, exec: l.inExec, start: start, end: end})
}

// step consumes one token, comment or run of whitespace.
func (l *lexer) step() {
	s, i := l.src, l.pos
	c := s[i]
	switch {
	case isSpace(c):
		l.pos++
	case c == '#':
		l.pos = lineEnd(s, i)
	case c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' '):
		// "-- " starts a comment only when followed by whitespace or a
		// control character; "--1" is minus minus one.
		l.pos = lineEnd(s, i)
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		l.comment()
	case c == '*' && l.inExec && i+1 < len(s) && s[i+1] == '/':
		l.inExec = false
		l.pos += 2
	case c == '\'' || c == '"':
		l.pos = quoteEnd(s, i+1, c, true)
		l.emit(kLiteral, i, l.pos)
	case c == '`':
		l.backtick()
	case c == '?':
		l.pos++
		l.emit(kParam, i, l.pos)
	case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1]) && !l.afterName()):
		l.number()
	case c == '.' && i+2 < len(s) && s[i+1] == '.' && s[i+2] == '.':
		l.pos += 3
		l.emit(kEllipsis, i, l.pos)
	case c == '@' && i+1 < len(s) && (isIdent(s[i+1]) || s[i+1] == '@'):
		l.variable()
	case isIdent(c):
		l.word()
	default:
		l.operator()
	}
}

func lineEnd(s []byte, i int) int {
	for i < len(s) && s[i] != '\n' {
		i++
	}
	return i
}

// quoteEnd returns the index just past the closing quote q of a string whose
// body starts at i. A doubled quote stands for itself, backslash escapes the
// next byte in strings (not in `identifiers`); an unterminated string ends
// at the end of input.
func quoteEnd(s []byte, i int, q byte, backslash bool) int {
	for i < len(s) {
		switch s[i] {
		case '\\':
			if backslash {
				i += 2
				continue
			}
		case q:
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(s)
}

// comment skips /* ... */. Executable comments (/*! and MariaDB's /*M!,
// with an optional version number) are not skipped: the server runs their
// content, so the normalizer lexes it as ordinary text. Optimizer hints
// (/*+ ... */) and all other comments are dropped.
func (l *lexer) comment() {
	s, i := l.src, l.pos+2
	if i < len(s) && s[i] == '!' {
		l.enterExec(i + 1)
		return
	}
	if i+1 < len(s) && s[i] == 'M' && s[i+1] == '!' {
		l.enterExec(i + 2)
		return
	}
	for i+1 < len(s) && (s[i] != '*' || s[i+1] != '/') {
		i++
	}
	l.pos = min(i+2, len(s))
}

func (l *lexer) enterExec(i int) {
	for i < len(l.src) && isDigit(l.src[i]) {
		i++
	}
	l.pos = i
	l.inExec = true
}

// backtick lexes a `quoted` identifier. A simple name (what could have been
// written unquoted) becomes a plain word so that `users` and users normalize
// alike; anything else is kept verbatim, backticks included.
func (l *lexer) backtick() {
	s, start := l.src, l.pos
	end := quoteEnd(s, start+1, '`', false)
	l.pos = end
	if end-start >= 3 && s[end-1] == '`' && simpleName(s[start+1:end-1]) {
		l.emit(kWord, start+1, end-1)
		l.toks[len(l.toks)-1].ticked = true
		return
	}
	l.emit(kQuoted, start, end)
}

// simpleName reports whether b could be written as an unquoted identifier
// that lexes back to one word: ASCII letters, digits, _ and $, not starting
// with a digit (which could lex as a number).
func simpleName(b []byte) bool {
	if isDigit(b[0]) {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !isIdent(c) {
			return false
		}
	}
	return true
}

// afterName reports whether the previous token ends a name or expression,
// making a following "." a qualifier (t.5) rather than a decimal point.
func (l *lexer) afterName() bool {
	if len(l.toks) == 0 {
		return false
	}
	t := l.toks[len(l.toks)-1]
	return t.kind == kWord || t.kind == kQuoted || (t.kind == kOp && l.src[t.start] == ')')
}

// number lexes 12, 1.5, .5, 1e-5, 0x1F and 0b101. A digit run followed by
// identifier bytes (1abc, 0x1g) is an identifier, as in MySQL.
func (l *lexer) number() {
	s, start := l.src, l.pos
	i := start
	if s[i] == '0' && i+2 < len(s) && (s[i+1] == 'x' || s[i+1] == 'b') {
		j := i + 2
		for j < len(s) && (isHex(s[j]) && (s[i+1] == 'x' || s[j] == '0' || s[j] == '1')) {
			j++
		}
		if j > i+2 && (j == len(s) || !isIdent(s[j])) {
			l.pos = j
			l.literal(start, j)
			return
		}
	}
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	plain := true
	if i < len(s) && s[i] == '.' {
		plain = false
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if j := exponentEnd(s, i); j > i {
		plain, i = false, j
	}
	if plain && i < len(s) && isIdent(s[i]) {
		l.word()
		return
	}
	l.pos = i
	l.literal(start, i)
}

// exponentEnd returns the end of an exponent (e5, E-05) starting at i, or i.
func exponentEnd(s []byte, i int) int {
	if i >= len(s) || s[i]|0x20 != 'e' {
		return i
	}
	j := i + 1
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	if j >= len(s) || !isDigit(s[j]) {
		return i
	}
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	return j
}

// literal emits a number, folding a preceding unary sign into it so that
// "a = -1" and "a = 1" share a digest.
func (l *lexer) literal(start, end int) {
	if n := len(l.toks); n > 0 {
		t := l.toks[n-1]
		if t.kind == kOp && t.end-t.start == 1 && (l.src[t.start] == '-' || l.src[t.start] == '+') && l.unaryAt(n-1) {
			l.toks = l.toks[:n-1]
			start = t.start
		}
	}
	l.emit(kLiteral, start, end)
}

// unaryAt reports whether the sign token at index k is unary: it starts
// the text or follows an operator or a keyword that expects an operand.
func (l *lexer) unaryAt(k int) bool {
	if k == 0 {
		return true
	}
	p := l.toks[k-1]
	switch p.kind {
	case kOp:
		return l.src[p.start] != ')'
	case kWord:
		return operandKeyword(l.src[p.start:p.end])
	}
	return false
}

// word lexes an identifier or keyword; x'..', b'..', n'..' and _charset'..'
// prefixes make it a string literal instead.
func (l *lexer) word() {
	s, start := l.src, l.pos
	i := start
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '\'' || s[i] == '"') && literalPrefix(s[start:i], s[i]) {
		l.pos = quoteEnd(s, i+1, s[i], true)
		l.emit(kLiteral, start, l.pos)
		return
	}
	l.pos = i
	l.emit(kWord, start, i)
}

func literalPrefix(w []byte, q byte) bool {
	if len(w) == 1 {
		c := w[0] | 0x20
		return (c == 'x' || c == 'b') && q == '\'' || c == 'n'
	}
	return w[0] == '_'
}

// variable lexes @user_var, @@system.var and @@session.var as one word.
func (l *lexer) variable() {
	s, start := l.src, l.pos
	i := start + 1
	if s[i] == '@' {
		i++
	}
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	l.pos = i
	l.emit(kWord, start, i)
}

// operator lexes one operator: the multi-byte ones (<=>, ->>, <=, >=, <>,
// !=, <<, >>, :=, ||, &&, ->) whole, anything else as one byte.
func (l *lexer) operator() {
	s, i := l.src, l.pos
	n := 1
	if i+1 < len(s) {
		switch a, b := s[i], s[i+1]; {
		case a == '<' && b == '=' && i+2 < len(s) && s[i+2] == '>',
			a == '-' && b == '>' && i+2 < len(s) && s[i+2] == '>':
			n = 3
		case a == '<' && (b == '=' || b == '>' || b == '<'),
			a == '>' && (b == '=' || b == '>'),
			(a == '!' || a == ':') && b == '=',
			a == '|' && b == '|', a == '&' && b == '&', a == '-' && b == '>':
			n = 2
		}
	}
	l.pos += n
	l.emit(kOp, i, l.pos)
}
