package sqltext

import "strings"

// TokenKind is what a Token is, for callers that judge a statement by its
// words (internal/plans decides from them whether a statement is safe to
// EXPLAIN).
type TokenKind uint8

const (
	Word   TokenKind = iota // keyword, unquoted identifier or @variable
	Name                    // `quoted` identifier; Text is the name, unquoted
	Quoted                  // string or number literal: its content cannot change what the statement does
	Param                   // ? placeholder
	Op                      // operator or punctuation, "..." included
)

// Token is one token of statement text, comments left out. For a Quoted
// token Text is only its first byte (a quote, a digit, a literal's prefix
// letter): a literal's content is not given out. Exec marks a token inside an
// executable comment (/*! ... */, /*M! ... */), which the server runs.
type Token struct {
	Text string
	Kind TokenKind
	Exec bool
}

// Tokens splits sql as the normalizer does (the same lexer: quoting,
// comments, executable comments, operators). It never fails: an
// unterminated string or comment runs to the end of the input.
func Tokens(sql string) []Token {
	toks := lex(nil, []byte(sql))
	out := make([]Token, 0, len(toks))
	for _, t := range toks {
		k := Token{Text: sql[t.start:t.end], Exec: t.exec}
		switch {
		case t.ticked:
			k.Kind = Name // a simple `name`, its range without the backticks
		case t.kind == kWord:
			k.Kind = Word
		case t.kind == kQuoted:
			k.Kind, k.Text = Name, strings.ReplaceAll(strings.TrimSuffix(k.Text[1:], "`"), "``", "`")
		case t.kind == kLiteral:
			k.Kind, k.Text = Quoted, sql[t.start:t.start+1]
		case t.kind == kParam:
			k.Kind = Param
		default:
			k.Kind = Op
		}
		out = append(out, k)
	}
	return out
}
