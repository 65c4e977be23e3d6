package sqltext

import (
	"hash/maphash"
	"strings"
)

// textSeed seeds TextHash: the hashes are compared within one process.
var textSeed = maphash.MakeSeed()

// maxHashedText: a longer text is not hashed (its length must fit the
// hash's low bits, textLenBits).
const maxHashedText = 1000

// textLenBits of a hash hold the trimmed text's length, so that SameText
// can tell a text the server cut short (performance_schema keeps
// performance_schema_max_sql_text_length bytes of it, 1,024 by default but
// often set lower) from a different one.
const (
	textLenBits = 10
	textLenMask = 1<<textLenBits - 1
)

// TextHash identifies one statement's exact text, as the client sent it
// and as performance_schema's SQL_TEXT holds it: the server trims
// surrounding white space and trailing semicolons before it records the
// text, so both sides are trimmed alike. 0 means no evidence: an empty or
// long text, one holding a semicolon (a multi-statement request, whose
// statements the server records one by one), or one beyond ASCII. Compare
// with SameText.
func TextHash(text []byte) uint64 {
	// The conversion does not copy: the string does not outlive the call.
	return TextHashString(unsafeString(text))
}

// TextHashString is TextHash of a string (a server row's SQL_TEXT).
func TextHashString(text string) uint64 {
	text = strings.TrimRight(strings.TrimSpace(text), "; \t\r\n")
	if len(text) == 0 || len(text) > maxHashedText || strings.IndexByte(text, ';') >= 0 || !ascii(text) {
		return 0
	}
	return maphash.String(textSeed, text)&^textLenMask | uint64(len(text))
}

// ascii: a text beyond ASCII may come back from performance_schema in
// another encoding than the client sent it (SQL_TEXT is read as utf8, a
// latin1 client's 'é' is one byte on the wire): no evidence either way.
func ascii(text string) bool {
	for i := range len(text) {
		if text[i] >= 0x80 {
			return false
		}
	}
	return true
}

// SameText reports whether a statement the client sent (wire, its
// TextHash) may be the one the server recorded (row, the TextHash of its
// SQL_TEXT): false only when the texts are known to differ. A row shorter
// than the statement may have been cut by the server, so it says nothing.
func SameText(wire, row uint64) bool {
	if wire == 0 || row == 0 || row&textLenMask < wire&textLenMask {
		return true
	}
	return wire == row
}
