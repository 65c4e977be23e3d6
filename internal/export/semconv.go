package export

import (
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// Operation is db.operation.name: the statement's verb (SELECT, UPDATE,
// CALL...) for text commands, else the protocol command without its COM_
// prefix (PING, STMT_CLOSE).
func Operation(s *event.Statement) string {
	if w := firstWords(queryText(s), 1); len(w) == 1 {
		return strings.ToUpper(w[0])
	}
	return strings.TrimPrefix(s.Cmd, "COM_")
}

// Summary is db.query.summary: the verb and the first table it names
// ("SELECT orders"), low in cardinality, for span names and grouping.
func Summary(s *event.Statement) string {
	op := Operation(s)
	words := firstWords(queryText(s), 64)
	for i, w := range words {
		switch strings.ToLower(w) {
		case "from", "into", "update", "join", "table":
			if i+1 < len(words) && isName(words[i+1]) {
				return op + " " + strings.Trim(words[i+1], "`")
			}
		}
	}
	return op
}

// SpanName follows the conventions: the summary when there is one.
func SpanName(s *event.Statement) string { return Summary(s) }

// Cause names the part that took most of a joined statement's time, or
// "unjoined" when the parts are unknown.
func Cause(s *event.Statement) string {
	if !s.Joined {
		return "unjoined"
	}
	best, at := int64(-1), 0
	for i, us := range PhaseUS(s) {
		if us > best {
			best, at = us, i
		}
	}
	return Phases[at]
}

// queryText is the digest text (no literals, no comments) of a text
// command, "" for the others.
func queryText(s *event.Statement) string {
	switch s.Cmd {
	case "COM_QUERY", "COM_STMT_PREPARE", "COM_STMT_EXECUTE":
		if s.DigestText != "" {
			return s.DigestText
		}
		return s.SQL
	}
	return ""
}

// firstWords returns up to n words of text, split at spaces, commas and
// parentheses, skipping /* */ comments.
func firstWords(text string, n int) []string {
	var out []string
	for text != "" && len(out) < n {
		text = strings.TrimLeft(text, " \t\r\n(),;")
		if strings.HasPrefix(text, "/*") {
			end := strings.Index(text, "*/")
			if end < 0 {
				break
			}
			text = text[end+2:]
			continue
		}
		end := strings.IndexAny(text, " \t\r\n(),;")
		if end < 0 {
			end = len(text)
		}
		if end > 0 {
			out = append(out, text[:end])
		}
		text = text[end:]
	}
	return out
}

// isName reports whether w looks like a table name, not a subquery, a
// placeholder or a keyword-led clause.
func isName(w string) bool {
	if w == "" || w == "?" || strings.HasPrefix(w, "(") {
		return false
	}
	switch strings.ToLower(w) {
	case "select", "dual", "values", "set":
		return false
	}
	return true
}
