package sqltext

// A statement sent as text carries its literals inline, so the raw text of
// "SELECT c FROM t WHERE id=5023" is new at nearly every call and a cache
// keyed by the raw text misses: each call would lex and render the whole
// statement again. The shape of a raw text is the text with the content of
// every number and quoted string left out. Two raw texts of one shape lex
// into the same tokens, differing only in the literals the digest text
// prints as "?", so they share their digest text: the cache is keyed by the
// shape, and computing it is one pass over the bytes, far cheaper than
// lexing and rendering.
//
// The shape must never join two texts whose digest texts differ, so it
// gives up (ok false: the raw text is its own key) on everything whose
// lexing depends on more than the bytes it keeps: comments (their
// executable forms run), backslashes (escapes differ by sql_mode), double
// quotes and backticks (strings or names by sql_mode), and NUL bytes (its
// markers). A number is only left out as a whole run of digits between
// characters that cannot continue it (1.5, 1e5, 0x1F, 1col are kept as
// written: they may lex as names).

// shapeMark starts the marker of a left-out literal; the byte after it says
// which kind.
const shapeMark = 0

// Byte classes of the shape scan.
const (
	shPlain = iota // kept: spaces, operators, punctuation
	shIdent        // starts a name, keyword or @variable: kept with the name
	shDigit        // starts a number
	shQuote        // starts a string
	shSlash        // a comment when "*" follows
	shDash         // a comment when "-" follows
	shStop         // no safe shape: #, ", `, \, NUL
)

var shapeClass = func() (t [256]uint8) {
	for c := range 256 {
		switch b := byte(c); {
		case isDigit(b):
			t[c] = shDigit
		case isIdent(b) || b == '@':
			t[c] = shIdent
		}
	}
	t['\''], t['/'], t['-'] = shQuote, shSlash, shDash
	for _, b := range []byte{shapeMark, '#', '"', '`', '\\'} {
		t[b] = shStop
	}
	return t
}()

// commentNext is the byte after "/" and after "-" that starts a comment.
var commentNext = [2]byte{'*', '-'}

// appendShape appends raw's shape to dst and counts the literals left out;
// ok is false when raw has no shape that is safe to share (see above).
func appendShape(dst, raw []byte) (shape []byte, literals int, ok bool) {
	from := 0 // raw[from:i] is kept as written, appended in one go
	for i := 0; i < len(raw); {
		switch shapeClass[raw[i]] {
		case shPlain:
			i++
		case shIdent:
			for i++; i < len(raw) && isIdent(raw[i]); i++ {
			}
		case shSlash, shDash: // "/*" and "--" start comments
			if i+1 < len(raw) && raw[i+1] == commentNext[shapeClass[raw[i]]-shSlash] {
				return dst, 0, false
			}
			i++
		case shQuote:
			end, plain := stringEnd(raw, i+1)
			if !plain {
				return dst, 0, false
			}
			dst = append(append(dst, raw[from:i]...), shapeMark, 's')
			from, i, literals = end, end, literals+1
		case shDigit:
			end, whole := numberEnd(raw, i)
			if whole {
				dst = append(append(dst, raw[from:i]...), shapeMark, 'n')
				from, literals = end, literals+1
			}
			i = end
		default:
			return dst, 0, false
		}
	}
	return append(dst, raw[from:]...), literals, true
}

// stringEnd returns the end of the single-quoted string whose content
// starts at i (” is a quote inside it; unterminated: the end of raw, as
// the lexer reads it), and false if the string holds a backslash.
func stringEnd(raw []byte, i int) (int, bool) {
	for i < len(raw) {
		switch raw[i] {
		case '\\':
			return i, false
		case '\'':
			if i+1 < len(raw) && raw[i+1] == '\'' {
				i += 2
				continue
			}
			return i + 1, true
		}
		i++
	}
	return len(raw), true
}

// numberEnd returns the end of the token starting with a digit at i and
// whether it is a run of digits nothing continues (left out of the shape;
// otherwise it is kept as written).
func numberEnd(raw []byte, i int) (int, bool) {
	j := i
	for j < len(raw) && isDigit(raw[j]) {
		j++
	}
	if j == len(raw) || !(isIdent(raw[j]) || raw[j] == '.') {
		return j, true
	}
	for j < len(raw) && (isIdent(raw[j]) || raw[j] == '.') {
		j++
	}
	return j, false
}
