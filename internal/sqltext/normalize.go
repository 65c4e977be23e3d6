// Package sqltext turns MySQL/MariaDB statement text into a digest text and
// a digest, so that statements differing only in their literals group
// together. It is a hand-written lexer, not a parser, and it is built for the
// hot path: a statement seen before costs one hash and one map lookup and
// allocates nothing.
//
// Rules of the digest text (close to pt-query-digest's fingerprint):
//   - string, number, hex (0x1F, X'1F'), bit (0b01, b'01') and introduced
//     (_utf8mb4'x', N'x') literals become ?; a unary sign goes with its number;
//     NULL, TRUE and FALSE stay keywords, because "IS NULL" and "= ?" are
//     different statements to the optimizer;
//   - comments (#, "-- ", /* */ and optimizer hints /*+ */) are dropped; the
//     content of executable comments /*! ... */ and /*M! ... */ is kept
//     without its markers and version, since the server runs it;
//   - unquoted words (keywords, names, @variables) are lower-cased; `name`
//     in backticks becomes name when it could be written unquoted;
//   - whitespace is canonical: one space between tokens, none inside
//     "f(a, b)", "t.c", "(x)"; a trailing ";" is dropped;
//   - IN (1, 2, 3) and IN ((1, 2), (3, 4)) become "in (...)", and the rows of
//     VALUES (the keyword, not the VALUES(col) function of ON DUPLICATE KEY
//     UPDATE) become "values (...)" however many there are; LIMIT ? stays;
//   - "USE db" becomes "use ?".
//
// Normalizing a digest text again yields the same text. Digest texts longer
// than MaxDigestText are cut at a token boundary.
package sqltext

import (
	"bytes"
	"hash/maphash"
)

// Marker is the comment every gapscope query carries, so that gapscope can
// leave its own statements out of what it reports.
const Marker = "/* gapscope */"

// MaxDigestText bounds a digest text (and so the cache's memory per entry).
const MaxDigestText = 8 << 10

// DefaultCacheSize is the cache bound NewNormalizer uses for maxCache <= 0.
const DefaultCacheSize = 10_000

// IsOwn reports whether a statement is gapscope's own: every statement
// gapscope sends starts with its marker comment. Only the start is looked
// at: the capture asks this of every statement it decodes, and a search
// through each statement's whole text was a measurable part of its cost.
func IsOwn(raw []byte) bool { return isOwn(raw) }

// IsOwnText is IsOwn for a text (a server row's SQL_TEXT, a processlist INFO).
func IsOwnText(sql string) bool { return isOwn(sql) }

func isOwn[T string | []byte](s T) bool {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n') {
		i++
	}
	return len(s)-i >= len(Marker) && string(s[i:i+len(Marker)]) == Marker
}

type cached struct {
	rawLen       int // length of the key: guards against a 64-bit hash collision between lengths
	text, digest string
}

// Normalizer normalizes statement text and caches the result by a hash of
// the raw text, up to a fixed number of entries (oldest evicted first). It is
// not safe for concurrent use; give each goroutine its own.
type Normalizer struct {
	seed maphash.Seed
	// shapeSeed hashes shapes (shape.go), so that a shape and a raw text
	// of the same bytes never share a key.
	shapeSeed maphash.Seed
	shape     []byte
	max       int
	cache     map[uint64]cached
	ring      []uint64 // insertion order of cache keys, for FIFO eviction
	next      int
	// texts interns digest texts, so that a new raw text of a known shape
	// (other literals) allocates nothing.
	texts map[string]cached

	toks  []token
	match []int32 // index of the matching ")" for each "(" token, or -1
	stack []int32
	out   []byte
}

// NewNormalizer returns a Normalizer caching at most maxCache statements
// (DefaultCacheSize if maxCache <= 0).
func NewNormalizer(maxCache int) *Normalizer {
	if maxCache <= 0 {
		maxCache = DefaultCacheSize
	}
	return &Normalizer{
		seed:      maphash.MakeSeed(),
		shapeSeed: maphash.MakeSeed(),
		max:       maxCache,
		cache:     make(map[uint64]cached, maxCache),
		ring:      make([]uint64, 0, maxCache),
		texts:     make(map[string]cached),
	}
}

// Normalize returns the digest text of raw and its digest, 16 hex digits of
// a 64-bit FNV-1a hash of the digest text (stable across runs and hosts).
//
// The cache is keyed by the raw text's shape (its literals left out) when
// it has literals, otherwise by the raw text itself: a text repeated as it
// is costs one hash, a text with new literals one pass over its bytes.
func (n *Normalizer) Normalize(raw []byte) (digestText, digest string) {
	h := maphash.Bytes(n.seed, raw)
	if c, ok := n.cache[h]; ok && c.rawLen == len(raw) {
		return c.text, c.digest // a text seen before (a prepared statement's)
	}
	key := raw
	if shape, literals, ok := n.appendShape(raw); ok && literals > 0 {
		key, h = shape, maphash.Bytes(n.shapeSeed, shape)
		if c, ok := n.cache[h]; ok && c.rawLen == len(key) {
			return c.text, c.digest // other literals in a known shape
		}
	}
	n.out = n.render(n.out[:0], raw)
	c, ok := n.texts[string(n.out)]
	if !ok {
		text := string(n.out)
		c = cached{text: text, digest: Digest(text)}
		n.intern(c)
	}
	c.rawLen = len(key)
	n.remember(h, c)
	n.shrink()
	return c.text, c.digest
}

// appendShape computes raw's shape in the Normalizer's scratch buffer.
func (n *Normalizer) appendShape(raw []byte) ([]byte, int, bool) {
	shape, literals, ok := appendShape(n.shape[:0], raw)
	if cap(shape) <= 4*MaxDigestText {
		n.shape = shape
	}
	return shape, literals, ok
}

// keepTokens bounds the scratch buffers kept between calls, so that one
// 16 MB statement does not pin its token list for the Normalizer's life.
const keepTokens = 1 << 16

func (n *Normalizer) shrink() {
	if cap(n.toks) > keepTokens {
		n.toks, n.match, n.stack = nil, nil, nil
	}
	if cap(n.out) > 4*MaxDigestText {
		n.out = nil
	}
}

// Len returns the number of cached statements.
func (n *Normalizer) Len() int { return len(n.cache) }

func (n *Normalizer) intern(c cached) {
	if len(n.texts) >= n.max {
		clear(n.texts) // only an allocation saver: dropping it all is fine
	}
	n.texts[c.text] = c
}

func (n *Normalizer) remember(h uint64, c cached) {
	if _, ok := n.cache[h]; !ok {
		if len(n.ring) < n.max {
			n.ring = append(n.ring, h)
		} else {
			delete(n.cache, n.ring[n.next])
			n.ring[n.next] = h
			n.next = (n.next + 1) % n.max
		}
	}
	n.cache[h] = c
}

// Digest returns the 16-hex-digit FNV-1a 64 hash of a digest text.
func Digest(text string) string {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := range len(text) {
		h ^= uint64(text[i])
		h *= prime
	}
	const hexDigits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = hexDigits[h&15]
		h >>= 4
	}
	return string(b[:])
}

// render appends the digest text of raw to dst.
func (n *Normalizer) render(dst, raw []byte) []byte {
	n.toks = lex(n.toks, raw)
	toks := trimSemicolons(raw, n.toks)
	n.matchParens(raw, toks)
	w := writer{src: raw, out: dst}
	if isUse(raw, toks) {
		w.put(toks[0])
		w.synth(kParam, "?")
		return w.out
	}
	for i := 0; i < len(toks) && !w.full; i++ {
		i = n.collapse(&w, toks, i)
	}
	return w.trimmed()
}

func trimSemicolons(src []byte, toks []token) []token {
	for len(toks) > 0 && isOp(src, toks[len(toks)-1], ';') {
		toks = toks[:len(toks)-1]
	}
	return toks
}

func isUse(src []byte, toks []token) bool {
	return len(toks) == 2 && toks[0].kind == kWord && equalFold(src[toks[0].start:toks[0].end], "use")
}

func isOp(src []byte, t token, c byte) bool {
	return t.kind == kOp && t.end-t.start == 1 && src[t.start] == c
}

// matchParens records, for each "(" token, the index of its ")".
func (n *Normalizer) matchParens(src []byte, toks []token) {
	n.match = n.match[:0]
	n.stack = n.stack[:0]
	for i, t := range toks {
		n.match = append(n.match, -1)
		switch {
		case isOp(src, t, '('):
			n.stack = append(n.stack, int32(i))
		case isOp(src, t, ')') && len(n.stack) > 0:
			n.match[n.stack[len(n.stack)-1]] = int32(i)
			n.stack = n.stack[:len(n.stack)-1]
		}
	}
}

// collapse writes toks[i], or a collapsed IN list or VALUES rows starting
// there, and returns the index of the last token consumed.
func (n *Normalizer) collapse(w *writer, toks []token, i int) int {
	t := toks[i]
	if t.kind == kWord && i+1 < len(toks) && isOp(w.src, toks[i+1], '(') {
		word := w.src[t.start:t.end]
		end := -1
		switch {
		case equalFold(word, "in"):
			end = valueList(w.src, toks, i+1, 0)
		case isValuesWord(word) && !w.afterOperator():
			end = n.rows(w.src, toks, i+1)
		}
		if end > 0 {
			w.collapsed(t)
			return end
		}
	}
	w.put(t)
	return i
}

// valueList returns the index of the ")" closing the list of literals (or
// of parenthesized lists of literals) that opens at toks[i], or -1.
func valueList(src []byte, toks []token, i, depth int) int {
	if depth > 3 {
		return -1
	}
	for j := i + 1; j < len(toks); j++ {
		switch t := toks[j]; {
		case isValue(src, t):
		case isOp(src, t, '('):
			if j = valueList(src, toks, j, depth+1); j < 0 {
				return -1
			}
		default:
			return -1
		}
		if j+1 >= len(toks) {
			return -1
		}
		j++
		if isOp(src, toks[j], ')') {
			return j
		}
		if !isOp(src, toks[j], ',') {
			return -1
		}
	}
	return -1
}

func isValuesWord(w []byte) bool { return equalFold(w, "values") || equalFold(w, "value") }

func isValue(src []byte, t token) bool {
	switch t.kind {
	case kLiteral, kParam, kEllipsis:
		return true
	case kWord:
		w := src[t.start:t.end]
		return equalFold(w, "null") || equalFold(w, "true") || equalFold(w, "false")
	}
	return false
}

// rows returns the index of the last ")" of the comma-separated row groups
// that start at toks[i], or -1 when the first group is unbalanced.
func (n *Normalizer) rows(src []byte, toks []token, i int) int {
	end := -1
	for i < len(toks) && isOp(src, toks[i], '(') && n.match[i] > 0 {
		end = int(n.match[i])
		if end+2 >= len(toks) || !isOp(src, toks[end+1], ',') || !isOp(src, toks[end+2], '(') {
			break
		}
		i = end + 2
	}
	return end
}

// writer appends tokens with canonical spacing.
type writer struct {
	src  []byte
	out  []byte
	full bool // MaxDigestText reached: nothing more is written
	// prev describes the last token written, for spacing decisions.
	prevKind  kind
	prevOp    byte // the operator's byte when it is one byte long
	prevParen bool // a word after which "(" takes a space
}

func (w *writer) put(t token) {
	text := w.src[t.start:t.end]
	switch t.kind {
	case kLiteral, kParam:
		w.synth(kParam, "?")
	case kWord:
		w.word(text)
	default:
		w.raw(t.kind, text)
	}
}

// collapsed writes "in (...)" or "values (...)" as one unit.
func (w *writer) collapsed(kw token) {
	if len(w.out)+len(" values (...)")+kw.end-kw.start > MaxDigestText {
		w.full = true
		return
	}
	w.word(w.src[kw.start:kw.end])
	w.synth(kOp, "(")
	w.synth(kEllipsis, "...")
	w.synth(kOp, ")")
}

func (w *writer) synth(k kind, s string) {
	if w.begin(k, s[0], len(s), false) {
		w.out = append(w.out, s...)
	}
}

func (w *writer) raw(k kind, b []byte) {
	if w.begin(k, b[0], len(b), false) {
		w.out = append(w.out, b...)
	}
}

func (w *writer) word(b []byte) {
	// VALUES after an operator is the VALUES(col) function: no space.
	paren := parenKeyword(b) && !(isValuesWord(b) && w.afterOperator())
	if !w.begin(kWord, b[0], len(b), paren) {
		return
	}
	if isDigit(b[0]) {
		// 0X1F is a name in MySQL, 0x1f a number: keep case.
		w.out = append(w.out, b...)
		return
	}
	for _, c := range b {
		w.out = append(w.out, lower(c))
	}
}

// begin writes the space that goes before a token of kind k (first byte c,
// n bytes) and records it as the previous token. It returns false, and
// writes nothing more ever, once the token would not fit.
func (w *writer) begin(k kind, c byte, n int, paren bool) bool {
	if w.full {
		return false
	}
	sp := len(w.out) > 0 && w.spaced(k, c, n)
	extra := n
	if sp {
		extra++
	}
	if len(w.out)+extra > MaxDigestText {
		w.full = true
		return false
	}
	if sp {
		w.out = append(w.out, ' ')
	}
	w.prevKind, w.prevParen = k, paren
	w.prevOp = 0
	if k == kOp && n == 1 {
		w.prevOp = c
	}
	return true
}

// spaced decides whether a space separates the previous token from the next
// one (kind k, first byte c, length n). Besides looking canonical, the
// spacing must lex back into the same tokens: "." never touches another "."
// or a digit (". . ." is not "...", ". 1a" is not ".1"), and "@" touches only
// a ? ("?@?" for 'user'@'host'; "@ x" is not the variable @x).
func (w *writer) spaced(k kind, c byte, n int) bool {
	single := k == kOp && n == 1
	dot := (single && c == '.') || k == kEllipsis
	switch {
	case w.prevOp == '.' && (dot || isDigit(c)):
		return true
	case single && c == '.' && w.prevKind == kEllipsis:
		return true
	case w.prevOp == '@':
		return k != kParam
	case single && (c == ',' || c == ')' || c == ';' || c == '.' || c == '@'):
		return false
	case w.prevOp == '(' || w.prevOp == '.':
		return false
	case single && c == '(':
		return !(w.prevKind == kQuoted || (w.prevKind == kWord && !w.prevParen))
	}
	return true
}

// afterOperator reports whether the last token written is an operator other
// than ")": VALUES there is the VALUES(col) function, not a row list.
func (w *writer) afterOperator() bool {
	return len(w.out) > 0 && w.prevKind == kOp && w.prevOp != ')'
}

// trimmed returns the output; a text cut at MaxDigestText loses a trailing
// ";" so that normalizing it again gives the same text.
func (w *writer) trimmed() []byte {
	for w.full && len(w.out) > 0 && w.out[len(w.out)-1] == ';' {
		w.out = bytes.TrimRight(w.out[:len(w.out)-1], " ")
	}
	return w.out
}
