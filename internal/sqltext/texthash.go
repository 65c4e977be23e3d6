package sqltext

import (
	"hash/maphash"
	"strings"
)

// textSeed seeds TextHash: the hashes are compared within one process.
var textSeed = maphash.MakeSeed()

// maxHashedText: a longer text may come back from performance_schema cut
// at its SQL text length (1,024 by default), so it is not hashed.
const maxHashedText = 1000

// TextHash identifies one statement's exact text, as the client sent it
// and as performance_schema's SQL_TEXT holds it: the server trims
// surrounding white space and trailing semicolons before it records the
// text, so both sides are trimmed alike. 0 means no evidence: an empty or
// long text, or one holding a semicolon (a multi-statement request, whose
// statements the server records one by one).
func TextHash(text []byte) uint64 {
	// The conversion does not copy: the string does not outlive the call.
	return TextHashString(unsafeString(text))
}

// TextHashString is TextHash of a string (a server row's SQL_TEXT).
func TextHashString(text string) uint64 {
	text = strings.TrimRight(strings.TrimSpace(text), "; \t\r\n")
	if len(text) == 0 || len(text) > maxHashedText || strings.IndexByte(text, ';') >= 0 {
		return 0
	}
	return maphash.String(textSeed, text)
}
