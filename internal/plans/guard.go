package plans

import (
	"strings"

	"github.com/gapscope/gapscope/internal/sqltext"
)

// Verdict is what the guard decided about one statement text.
type Verdict struct {
	// ReadOnly: a single SELECT (or WITH ... SELECT) that changes nothing
	// and takes no locks: no DML, no CALL, no INTO, no FOR UPDATE / FOR
	// SHARE / LOCK IN SHARE MODE, no second statement, no assignment.
	// Only such statements get a live plan (SHOW EXPLAIN FOR).
	ReadOnly bool
	// Explainable: ReadOnly and calls no function that blocks or has an
	// effect of its own (SLEEP, GET_LOCK, NEXTVAL, ...), which the
	// optimizer may evaluate while it plans. Only such statements are
	// EXPLAINed or traced from their text.
	Explainable bool
	// Reason says why a statement was refused ("" when Explainable).
	Reason string
}

// effectFuncs are functions that block or change state; the optimizer may
// evaluate constant expressions (and so these) while it plans an EXPLAIN.
var effectFuncs = map[string]bool{
	"sleep": true, "benchmark": true, "get_lock": true, "release_lock": true, "release_all_locks": true,
	"nextval": true, "setval": true, "lastval": true, "master_pos_wait": true, "master_gtid_wait": true,
	"source_pos_wait": true, "wait_for_executed_gtid_set": true, "wait_until_sql_thread_after_gtids": true,
	"load_file": true, "uuid_short": true,
}

// refusedWords make a statement that starts with SELECT or WITH write,
// lock or export (WITH ... UPDATE/DELETE, INTO OUTFILE, FOR UPDATE, LOCK IN
// SHARE MODE, PROCEDURE ANALYSE). INSERT and REPLACE are also string
// functions, and count only when not followed by "(".
var refusedWords = map[string]bool{
	"insert": true, "update": true, "delete": true, "replace": true, "call": true, "into": true,
	"procedure": true, "handler": true, "lock": true, "truncate": true,
}

// Classify decides whether sql may be planned by gapscope. It is a lexer,
// not a parser, and errs on the side of refusing: a refused SELECT only
// loses its baseline, an accepted write would be a disaster.
func Classify(sql string) Verdict {
	toks := lex(sql)
	if len(toks) == 0 {
		return Verdict{Reason: "empty statement"}
	}
	if r := readOnlyReason(toks); r != "" {
		return Verdict{Reason: r}
	}
	for i, t := range toks {
		if t.word && effectFuncs[t.lower] && i+1 < len(toks) && toks[i+1].text == "(" {
			return Verdict{ReadOnly: true, Reason: "calls " + t.lower + "()"}
		}
		if t.text == "?" {
			// A prepared statement's text: EXPLAIN would only fail.
			return Verdict{ReadOnly: true, Reason: "has placeholders"}
		}
	}
	return Verdict{ReadOnly: true, Explainable: true}
}

// readOnlyReason returns why toks are not a single read-only SELECT.
func readOnlyReason(toks []token) string {
	first := firstWord(toks)
	if first != "select" && first != "with" {
		return "not a SELECT (" + first + ")"
	}
	for i, t := range toks {
		switch {
		case t.text == ";" && i != len(toks)-1:
			return "more than one statement"
		case t.text == ":=":
			return "assigns a variable"
		case t.exec:
			return "executable comment"
		case !t.word:
			continue
		case (t.lower == "insert" || t.lower == "replace") && i+1 < len(toks) && toks[i+1].text == "(":
			continue // the string functions INSERT(s, p, l, n) and REPLACE(s, a, b)
		case refusedWords[t.lower]:
			return "contains " + strings.ToUpper(t.lower)
		case t.lower == "for" && i+1 < len(toks) && (toks[i+1].lower == "share"):
			return "FOR SHARE"
		}
	}
	return ""
}

// firstWord is the first keyword, past any opening parentheses.
func firstWord(toks []token) string {
	for _, t := range toks {
		if t.text == "(" {
			continue
		}
		if t.word {
			return t.lower
		}
		return t.text
	}
	return ""
}

// token is one lexical unit: a word (keyword or unquoted name), or one
// punctuation mark; quoted strings and names stand as their opening quote
// (their content cannot change what the statement does), comments are
// dropped. exec marks the start of an executable comment /*! ... */,
// which the server runs.
type token struct {
	text, lower string
	word, exec  bool
}

// lex splits sql into tokens with sqltext's lexer, the normalizer's. It
// never fails: unterminated strings or comments end the input.
func lex(sql string) []token {
	var out []token
	inExec := false
	for _, t := range sqltext.Tokens(sql) {
		if t.Exec && !inExec {
			out = append(out, token{text: "/*!", exec: true})
		}
		inExec = t.Exec
		switch t.Kind {
		case sqltext.Word:
			out = append(out, token{text: t.Text, lower: strings.ToLower(t.Text), word: true})
		case sqltext.Name:
			out = append(out, token{text: "`"})
		default:
			out = append(out, token{text: t.Text})
		}
	}
	return out
}
