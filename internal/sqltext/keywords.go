package sqltext

// The normalizer needs only two small keyword classes; everything else is a
// word printed in lower case. Lookups compare case-insensitively without
// allocating.

// operandKeywords expect an operand next, so a sign after them is unary
// ("SELECT -1", "LIMIT -1", "WHEN -2").
var operandKeywords = []string{
	"select", "where", "and", "or", "not", "xor", "when", "then", "else", "return",
	"between", "like", "in", "is", "limit", "offset", "by", "having", "on", "set",
	"values", "value", "interval", "case", "distinct", "all", "any", "some", "div",
	"mod", "regexp", "rlike", "escape", "if", "elseif", "default", "exists",
}

// parenKeywords are followed by a space before "(" ("IN (", "FROM (SELECT");
// after any other word "(" is a call or column list and follows directly
// ("count(*)", "t(a, b)"). This makes spacing canonical whatever the input's.
var parenKeywords = []string{
	"in", "values", "value", "from", "join", "where", "and", "or", "not", "xor", "on",
	"as", "exists", "select", "union", "intersect", "except", "all", "any", "some",
	"distinct", "using", "into", "when", "then", "else", "by", "like", "between",
	"is", "with", "set", "having", "return", "returns", "key", "index", "unique",
	"table", "lateral", "recursive", "over", "case", "div", "mod", "regexp", "rlike",
}

const (
	operand = 1 << iota
	paren
)

// keywordClass maps each keyword above to its classes; built once, read only.
var keywordClass = func() map[string]uint8 {
	m := map[string]uint8{}
	for _, k := range operandKeywords {
		m[k] |= operand
	}
	for _, k := range parenKeywords {
		m[k] |= paren
	}
	return m
}()

func operandKeyword(w []byte) bool { return classOf(w)&operand != 0 }

func parenKeyword(w []byte) bool { return classOf(w)&paren != 0 }

// classOf lower-cases w into a stack buffer for the lookup (a map index by
// string(bytes) does not allocate).
func classOf(w []byte) uint8 {
	var buf [10]byte
	if len(w) > len(buf) || len(w) < 2 {
		return 0
	}
	for i, c := range w {
		buf[i] = lower(c)
	}
	return keywordClass[string(buf[:len(w)])]
}

// equalFold compares ASCII case-insensitively; k must be lower case.
func equalFold(w []byte, k string) bool {
	if len(w) != len(k) {
		return false
	}
	for i := range len(w) {
		if lower(w[i]) != k[i] {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
