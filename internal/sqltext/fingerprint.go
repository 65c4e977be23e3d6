package sqltext

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"hash/maphash"
	"strings"
	"unsafe"
)

// Fingerprint returns pt-query-digest's fingerprint of a statement, so that
// gapscope's classes and IDs can be matched with pt-query-digest's (and the
// tools that use its IDs). It follows pt-query-digest's rules in their order,
// quirks included, because a class that differs by one byte has another ID:
//   - mysqldump's "SELECT /*!40001 SQL_NO_CACHE */ * FROM `" queries are one
//     class, "mysqldump"; statements carrying a Percona Toolkit marker
//     comment are "percona-toolkit"; "administrator command: X" stays as it
//     is; "CALL proc(" is "call proc";
//   - a multi-row INSERT/REPLACE is cut after its first row;
//   - /* */ comments (not /*! */) and -- / # comments are dropped; "use db"
//     is "use ?";
//   - quoted strings, TRUE/FALSE, NULL and anything that starts with a digit,
//   - or - (digits inside names too: sbtest1 is sbtest?) become ?;
//   - whitespace collapses to one space and the text is lower-cased;
//   - IN (...) and VALUES (...) lists become "in(?+)" and "values(?+)", a
//     repeated UNION of the same SELECT is written once, "limit ?, ?" is
//     "limit ?", and ASC after ORDER BY is dropped.
//
// Unlike the digest text it does not need a tokenizer, and it is not meant
// to be read back: it is the key pt-query-digest groups by.
func Fingerprint(query string) string {
	var f Fingerprinter
	return f.Fingerprint(query)
}

// Fingerprinter computes fingerprints reusing two buffers, so that a
// stream of statements costs no allocation but the result. It is not safe
// for concurrent use.
type Fingerprinter struct {
	cur, other []byte
	classes    map[string]Class

	// shapes caches classes by a hash of the raw text's shape (see
	// shapeKey): a statement sent as text has new literals at nearly every
	// call, so its raw text rarely repeats but its shape does.
	shapes map[uint64]keyedClass
	// raws caches the classes of statements without a shape by a hash of
	// their raw text: logs repeat some byte for byte.
	raws  map[uint64]keyedClass
	seed  maphash.Seed
	shape []byte
}

// keyedClass is a class cached by a hash; keyLen guards against a 64-bit
// hash collision between keys of different lengths.
type keyedClass struct {
	keyLen int
	class  Class
}

// Class is a pt-query-digest class: its Query ID and fingerprint.
type Class struct{ ID, Fingerprint string }

// maxClasses bounds Fingerprinter's class cache; it only saves work.
const maxClasses = 10_000

// Class returns the class of a statement. A statement whose shape was seen
// before costs one pass over its bytes; a fingerprint seen before costs no
// allocation and no MD5: statements of one class share its strings.
func (f *Fingerprinter) Class(query []byte) Class {
	h, n, ok := f.shapeKey(query)
	cache := &f.shapes
	if !ok { // no shape to share: only the same text again hits
		h, n, cache = maphash.Bytes(f.seed, query), len(query), &f.raws
	}
	if c, hit := (*cache)[h]; hit && c.keyLen == n {
		return c.class
	}
	c := f.classOf(query)
	if *cache == nil || len(*cache) >= maxClasses {
		*cache = make(map[uint64]keyedClass)
	}
	(*cache)[h] = keyedClass{n, c}
	return c
}

// shapeKey hashes the statement's shape (shape.go: the text with the
// content of its numbers and quoted strings left out) when every statement
// of that shape has one fingerprint, and returns ok false otherwise.
//
// The fingerprint replaces a whole run of digits and a quoted string by
// "?" whatever they hold, so texts that differ only there share it, with
// one exception: the rules that run before strings are replaced (comments,
// double quotes, escaped quotes, the first row of an INSERT) read the
// strings' bytes. The shape already gives up on comments, double quotes
// and backslashes outside strings; plainStrings gives up on strings whose
// content those rules could read.
func (f *Fingerprinter) shapeKey(raw []byte) (h uint64, shapeLen int, ok bool) {
	shape, _, ok := appendShape(f.shape[:0], raw)
	if cap(shape) <= 4*MaxDigestText {
		f.shape = shape
	}
	if f.seed == (maphash.Seed{}) {
		f.seed = maphash.MakeSeed()
	}
	if !ok || !plainStrings(raw) {
		return 0, 0, false
	}
	return maphash.Bytes(f.seed, shape), len(shape), true
}

// plainStrings reports whether every single-quoted string in raw is
// terminated and holds only bytes no fingerprint rule reads before strings
// become "?". raw must have a shape: outside strings it has no comment,
// double quote, backtick or backslash, so every quote there opens a string.
func plainStrings(raw []byte) bool {
	for {
		open := bytes.IndexByte(raw, '\'')
		if open < 0 {
			return true
		}
		raw = raw[open+1:]
		end := bytes.IndexByte(raw, '\'')
		if end < 0 || (end+1 < len(raw) && raw[end+1] == '\'') {
			return false // unterminated, or a doubled quote ('it''s' is two strings to the fingerprint)
		}
		if !plainContent(raw[:end]) {
			return false
		}
		raw = raw[end+1:]
	}
}

func plainContent(s []byte) bool {
	for i, c := range s {
		if !plainStringByte[c] || (c == '-' && i+1 < len(s) && s[i+1] == '-') {
			return false // "--" may start a comment for the fingerprint
		}
	}
	return true
}

// plainStringByte: printable ASCII but what starts a comment (/ * # and
// --, checked apart), quotes, backslashes and the parentheses and commas an
// INSERT's first row is cut at.
var plainStringByte = func() (t [256]bool) {
	for c := byte(' '); c <= '~'; c++ {
		t[c] = !strings.ContainsRune(`/*#'"\(),`, rune(c))
	}
	return t
}()

// classOf computes the class of a statement, sharing the strings of a
// fingerprint seen before.
func (f *Fingerprinter) classOf(query []byte) Class {
	fp, ok := f.fingerprint(query)
	if !ok {
		return Class{QueryID(fp), fp} // a whole-statement rule: rare
	}
	if c, hit := f.classes[string(f.cur)]; hit {
		return c
	}
	text := string(f.cur)
	c := Class{QueryID(text), text}
	if f.classes == nil || len(f.classes) >= maxClasses {
		f.classes = make(map[string]Class)
	}
	f.classes[text] = c
	return c
}

// Fingerprint is the package's Fingerprint with f's buffers.
func (f *Fingerprinter) Fingerprint(query string) string {
	if fp, ok := f.fingerprint([]byte(query)); !ok {
		return fp
	}
	return string(f.cur)
}

// fingerprint leaves the fingerprint in f.cur and returns ok, or returns
// the fingerprint of a rule that names the whole statement.
func (f *Fingerprinter) fingerprint(raw []byte) (string, bool) {
	query := unsafeString(raw)
	switch {
	case strings.HasPrefix(query, "SELECT /*!40001 SQL_NO_CACHE */ * FROM `"):
		return "mysqldump", false
	case hasToolkitMarker(query):
		return "percona-toolkit", false
	case strings.HasPrefix(query, "administrator command: "):
		return strings.Clone(query), false
	}
	if call, ok := callName(query); ok {
		return asciiLower(call), false
	}
	f.cur = append(f.cur[:0], raw...)
	f.cur = firstInsertRow(f.cur)
	f.apply(dropBlockComments)
	f.apply(dropLineComments)
	if isUseDB(f.cur) {
		return "use ?", false
	}
	f.apply(dropEscapedQuotes)
	f.apply(func(dst, q []byte) []byte { return replaceQuoted(dst, q, '"') })
	f.apply(func(dst, q []byte) []byte { return replaceQuoted(dst, q, '\'') })
	f.apply(func(dst, q []byte) []byte { return replaceWords(dst, q, "false", "true") })
	f.apply(replaceNumbers)
	f.apply(foldPlaceholderPrefixes)
	f.apply(squeezeSpace)
	lowerASCII(f.cur)
	f.apply(func(dst, q []byte) []byte { return replaceWords(dst, q, "null") })
	f.apply(collapseLists)
	f.apply(collapseUnions)
	f.apply(foldLimit)
	f.cur = dropOrderByAsc(f.cur)
	return "", true
}

// unsafeString views b as a string for the read-only checks above; nothing
// keeps it beyond the call (asciiLower copies).
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// apply runs one rewriting pass from cur into other; a pass that changes
// nothing returns its input, and the buffers stay as they are.
func (f *Fingerprinter) apply(pass func(dst, q []byte) []byte) {
	r := pass(f.other[:0], f.cur)
	if sameArray(r, f.cur) {
		f.cur = r
		return
	}
	f.cur, f.other = r, f.cur
}

func sameArray(a, b []byte) bool {
	return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0]
}

// QueryID is pt-query-digest's ID of a class: the MD5 of its fingerprint in
// upper-case hex (pt-query-digest 3.x); 2.x printed the last 16 digits.
func QueryID(fingerprint string) string {
	sum := md5.Sum([]byte(fingerprint))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// isSpaceRE is Perl's \s: space, \t, \n, \v, \f, \r.
func isSpaceRE(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

// isWordRE is Perl's \w for bytes (ASCII letters, digits, _).
func isWordRE(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// hasToolkitMarker finds /*word.word:D/D*/ (pt-table-checksum's comment).
func hasToolkitMarker(q string) bool {
	for i := strings.Index(q, "/*"); i >= 0; {
		if toolkitMarkerAt(q, i+2) {
			return true
		}
		next := strings.Index(q[i+2:], "/*")
		if next < 0 {
			return false
		}
		i += 2 + next
	}
	return false
}

func toolkitMarkerAt(q string, i int) bool {
	w := wordRun(q, i)
	if w == i || w >= len(q) || q[w] != '.' {
		return false
	}
	w2 := wordRun(q, w+1)
	if w2 == w+1 || len(q) < w2+6 {
		return false
	}
	t := q[w2 : w2+6]
	return t[0] == ':' && isDigit(t[1]) && t[2] == '/' && isDigit(t[3]) && t[4] == '*' && t[5] == '/'
}

func wordRun(q string, i int) int {
	for i < len(q) && isWordRE(q[i]) {
		i++
	}
	return i
}

// callName matches \A\s*(call\s+\S+)\( case-insensitively: \S+ is greedy,
// so the name runs to the last "(" of the first word after CALL.
func callName(q string) (string, bool) {
	i := 0
	for i < len(q) && isSpaceRE(q[i]) {
		i++
	}
	start := i
	if len(q) < i+4 || !strings.EqualFold(q[i:i+4], "call") {
		return "", false
	}
	i += 4
	j := i
	for j < len(q) && isSpaceRE(q[j]) {
		j++
	}
	if j == i {
		return "", false
	}
	k := j
	for k < len(q) && !isSpaceRE(q[k]) {
		k++
	}
	// the "(" must follow at least one \S, within the word or right after it
	for p := min(k, len(q)-1); p > j; p-- {
		if q[p] == '(' {
			return q[start:p], true
		}
	}
	return "", false
}

// firstInsertRow cuts a multi-row INSERT/REPLACE after its first row:
// \A((?:INSERT|REPLACE)(?: IGNORE)?\s+INTO.+?VALUES\s*\(.*?\))\s*,\s*\(
// (case-insensitive, "." matching newlines).
func firstInsertRow(q []byte) []byte {
	i, ok := insertInto(q)
	if !ok {
		return q
	}
	for v := i + 1; v+6 <= len(q); v++ {
		if !bytes.EqualFold(q[v:v+6], []byte("values")) {
			continue
		}
		p := skipSpaceRE(q, v+6)
		if p >= len(q) || q[p] != '(' {
			continue
		}
		for c := p + 1; c < len(q); c++ {
			if q[c] == ')' && nextRowFollows(q, c+1) {
				return q[:c+1]
			}
		}
	}
	return q
}

// insertInto matches (?:INSERT|REPLACE)(?: IGNORE)?\s+INTO at the start and
// returns the index after INTO.
func insertInto(q []byte) (int, bool) {
	var i int
	switch {
	case hasPrefixFold(q, "insert"):
		i = 6
	case hasPrefixFold(q, "replace"):
		i = 7
	default:
		return 0, false
	}
	try := func(i int) (int, bool) {
		j := skipSpaceRE(q, i)
		if j == i || !hasPrefixFold(q[j:], "into") {
			return 0, false
		}
		return j + 4, true
	}
	if hasPrefixFold(q[i:], " ignore") {
		if end, ok := try(i + 7); ok {
			return end, true
		}
	}
	return try(i)
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && bytes.EqualFold(b[:len(p)], []byte(p))
}

func skipSpaceRE(q []byte, i int) int {
	for i < len(q) && isSpaceRE(q[i]) {
		i++
	}
	return i
}

// nextRowFollows matches \s*,\s*\( at i.
func nextRowFollows(q []byte, i int) bool {
	i = skipSpaceRE(q, i)
	if i >= len(q) || q[i] != ',' {
		return false
	}
	i = skipSpaceRE(q, i+1)
	return i < len(q) && q[i] == '('
}

// dropBlockComments removes /\*[^!].*?\*/ (the character after "/*" is
// consumed by [^!], so "/**/" needs a later "*/").
func dropBlockComments(dst, q []byte) []byte {
	if !bytes.Contains(q, []byte("/*")) {
		return q
	}
	out := dst[:0]
	i := 0
	for i < len(q) {
		if q[i] == '/' && i+2 < len(q) && q[i+1] == '*' && q[i+2] != '!' {
			if end := bytes.Index(q[i+3:], []byte("*/")); end >= 0 {
				i += 3 + end + 2
				continue
			}
		}
		out = append(out, q[i])
		i++
	}
	return out
}

// dropLineComments removes (?:--|#)[^'"\r\n]*(?=[\r\n]|\Z): a comment that
// runs into a quote before the line ends is not one.
func dropLineComments(dst, q []byte) []byte {
	if bytes.IndexByte(q, '#') < 0 && !bytes.Contains(q, []byte("--")) {
		return q
	}
	out := dst[:0]
	i := 0
	for i < len(q) {
		if n := lineCommentLen(q, i); n > 0 {
			i += n
			continue
		}
		out = append(out, q[i])
		i++
	}
	return out
}

func lineCommentLen(q []byte, i int) int {
	var j int
	switch {
	case q[i] == '#':
		j = i + 1
	case q[i] == '-' && i+1 < len(q) && q[i+1] == '-':
		j = i + 2
	default:
		return 0
	}
	for j < len(q) && q[j] != '\'' && q[j] != '"' && q[j] != '\r' && q[j] != '\n' {
		j++
	}
	atEnd := j == len(q) || (j == len(q)-1 && q[j] == '\n') // \Z
	if atEnd || q[j] == '\r' || q[j] == '\n' {
		return j - i
	}
	return 0
}

// isUseDB matches \Ause \S+\Z case-insensitively.
func isUseDB(q []byte) bool {
	if !hasPrefixFold(q, "use ") {
		return false
	}
	rest := q[4:]
	if len(rest) > 0 && rest[len(rest)-1] == '\n' {
		rest = rest[:len(rest)-1]
	}
	if len(rest) == 0 {
		return false
	}
	for _, c := range rest {
		if isSpaceRE(c) {
			return false
		}
	}
	return true
}

// dropEscapedQuotes removes \" and \' pairs.
func dropEscapedQuotes(dst, q []byte) []byte {
	if bytes.IndexByte(q, '\\') < 0 {
		return q
	}
	out := dst[:0]
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' && i+1 < len(q) && (q[i+1] == '"' || q[i+1] == '\'') {
			i++
			continue
		}
		out = append(out, q[i])
	}
	return out
}

// replaceQuoted replaces each quote-to-next-quote span with ?; an opening
// quote without a closing one stays.
func replaceQuoted(dst, q []byte, quote byte) []byte {
	if bytes.IndexByte(q, quote) < 0 {
		return q
	}
	out := dst[:0]
	for {
		open := bytes.IndexByte(q, quote)
		if open < 0 {
			return append(out, q...)
		}
		end := bytes.IndexByte(q[open+1:], quote)
		if end < 0 { // an opening quote without a closing one stays
			return append(out, q...)
		}
		out = append(out, q[:open]...)
		out = append(out, '?')
		q = q[open+1+end+1:]
	}
}

// replaceWords replaces \bword\b (case-insensitive) with ?.
func replaceWords(dst, q []byte, words ...string) []byte {
	if !containsWordFold(q, words) {
		return q
	}
	out := dst[:0]
	changed := false
	for i := 0; i < len(q); i++ {
		if w := wordAt(q, i, words); w > 0 {
			out = append(out, '?')
			i += w - 1
			changed = true
			continue
		}
		out = append(out, q[i])
	}
	if !changed {
		return q
	}
	return out
}

func wordAt(q []byte, i int, words []string) int {
	if i > 0 && isWordRE(q[i-1]) {
		return 0
	}
	for _, w := range words {
		end := i + len(w)
		if end <= len(q) && bytes.EqualFold(q[i:end], []byte(w)) && (end == len(q) || !isWordRE(q[end])) {
			return len(w)
		}
	}
	return 0
}

// replaceNumbers replaces [0-9+-][0-9a-f.xb+-]* with ?: case-sensitive (the
// text is not lower-cased yet) and without a word boundary, as
// pt-query-digest does by default.
func replaceNumbers(dst, q []byte) []byte {
	out := dst[:0]
	run := 0 // start of the bytes not yet copied
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(isDigit(c) || c == '+' || c == '-') {
			continue
		}
		out = append(out, q[run:i]...)
		for i+1 < len(q) && numberTail(q[i+1]) {
			i++
		}
		out = append(out, '?')
		run = i + 1
	}
	return append(out, q[run:]...)
}

func numberTail(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || c == '.' || c == 'x' || c == 'b' || c == '+' || c == '-'
}

// foldPlaceholderPrefixes replaces [xb.+-]\? with ? in one pass.
func foldPlaceholderPrefixes(dst, q []byte) []byte {
	if !hasPlaceholderPrefix(q) {
		return q
	}
	out := dst[:0]
	for i := 0; i < len(q); i++ {
		c := q[i]
		if (c == 'x' || c == 'b' || c == '.' || c == '+' || c == '-') && i+1 < len(q) && q[i+1] == '?' {
			out = append(out, '?')
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

// squeezeSpace strips leading \s, chomps one trailing newline, and turns
// runs of space, \n, \t, \r, \f into one space (\v is not among them).
func squeezeSpace(dst, q []byte) []byte {
	if spaceSqueezed(q) {
		return q
	}
	q = q[skipSpaceRE(q, 0):]
	if len(q) > 0 && q[len(q)-1] == '\n' {
		q = q[:len(q)-1]
	}
	out := dst[:0]
	inRun := false
	for _, c := range q {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' {
			if !inRun {
				out = append(out, ' ')
			}
			inRun = true
			continue
		}
		inRun = false
		out = append(out, c)
	}
	return out
}

// lowerASCII lower-cases A-Z in place (Perl's lc on a byte string).
func lowerASCII(q []byte) {
	for i, c := range q {
		if c >= 'A' && c <= 'Z' {
			q[i] = c + 'a' - 'A'
		}
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	lowerASCII(b)
	return string(b)
}

// collapseLists replaces \b(in|values?)(?:[\s,]*\([\s?,]*\))+ with $1(?+).
func collapseLists(dst, q []byte) []byte {
	if bytes.IndexByte(q, '(') < 0 {
		return q // a list needs a parenthesis
	}
	out := dst[:0]
	changed := false
	for i := 0; i < len(q); i++ {
		if kw, end := listAt(q, i); end > 0 {
			out = append(out, kw...)
			out = append(out, "(?+)"...)
			i = end - 1
			changed = true
			continue
		}
		out = append(out, q[i])
	}
	if !changed {
		return q
	}
	return out
}

// listAt matches the list rule at i; end is 0 when it does not.
func listAt(q []byte, i int) (kw []byte, end int) {
	if i > 0 && isWordRE(q[i-1]) {
		return nil, 0
	}
	for _, w := range []string{"values", "value", "in"} {
		if !bytes.HasPrefix(q[i:], []byte(w)) {
			continue
		}
		if e := placeholderGroups(q, i+len(w)); e > 0 {
			return q[i : i+len(w)], e
		}
	}
	return nil, 0
}

// placeholderGroups matches (?:[\s,]*\([\s?,]*\))+ at i and returns its end
// (0 when not even one group matches).
func placeholderGroups(q []byte, i int) int {
	end := 0
	for {
		j := i
		for j < len(q) && (isSpaceRE(q[j]) || q[j] == ',') {
			j++
		}
		if j >= len(q) || q[j] != '(' {
			return end
		}
		j++
		for j < len(q) && (isSpaceRE(q[j]) || q[j] == '?' || q[j] == ',') {
			j++
		}
		if j >= len(q) || q[j] != ')' {
			return end
		}
		end, i = j+1, j+1
	}
}

// collapseUnions replaces \b(select\s.*?)(?:(\sunion(?:\sall)?)\s\1)+ with
// "$1 /*repeat$2*/": a SELECT repeated with UNION is written once.
func collapseUnions(dst, q []byte) []byte {
	if !bytes.Contains(q, []byte("union")) {
		return q
	}
	out := dst[:0]
	changed := false
	for i := 0; i < len(q); i++ {
		if sel, sep, end := unionAt(q, i); end > 0 {
			out = append(out, sel...)
			out = append(out, " /*repeat"...)
			out = append(out, sep...)
			out = append(out, "*/"...)
			i = end - 1
			changed = true
			continue
		}
		out = append(out, q[i])
	}
	if !changed {
		return q
	}
	return out
}

func unionAt(q []byte, i int) (sel, sep []byte, end int) {
	if (i > 0 && isWordRE(q[i-1])) || !bytes.HasPrefix(q[i:], []byte("select")) ||
		i+6 >= len(q) || !isSpaceRE(q[i+6]) {
		return nil, nil, 0
	}
	for e := i + 7; e <= len(q); e++ {
		if e > i+7 && q[e-1] == '\n' {
			break // "." does not match a newline
		}
		sel = q[i:e]
		if sep, end = repeats(q, e, sel); end > 0 {
			return sel, sep, end
		}
	}
	return nil, nil, 0
}

// repeats matches (?:(\sunion(?:\sall)?)\s SEL)+ at i, greedily.
func repeats(q []byte, i int, sel []byte) (sep []byte, end int) {
	for {
		s, e := unionSep(q, i, sel)
		if e == 0 {
			return sep, end
		}
		sep, end, i = s, e, e
	}
}

func unionSep(q []byte, i int, sel []byte) (sep []byte, end int) {
	if i >= len(q) || !isSpaceRE(q[i]) || !bytes.HasPrefix(q[i+1:], []byte("union")) {
		return nil, 0
	}
	u := i + 6
	for _, withAll := range []bool{true, false} {
		s := u
		if withAll {
			if s >= len(q) || !isSpaceRE(q[s]) || !bytes.HasPrefix(q[s+1:], []byte("all")) {
				continue
			}
			s += 4
		}
		if s < len(q) && isSpaceRE(q[s]) && bytes.HasPrefix(q[s+1:], sel) {
			return q[i:s], s + 1 + len(sel)
		}
	}
	return nil, 0
}

// foldLimit replaces the first \blimit \?(?:, ?\?| offset \?)? with "limit ?".
func foldLimit(dst, q []byte) []byte {
	for i := 0; i+7 <= len(q); i++ {
		if (i > 0 && isWordRE(q[i-1])) || !bytes.HasPrefix(q[i:], []byte("limit ?")) {
			continue
		}
		end := i + 7
		switch {
		case bytes.HasPrefix(q[end:], []byte(", ?")):
			end += 3
		case bytes.HasPrefix(q[end:], []byte(",?")):
			end += 2
		case bytes.HasPrefix(q[end:], []byte(" offset ?")):
			end += 9
		}
		out := append(dst[:0], q[:i]...)
		out = append(out, "limit ?"...)
		return append(out, q[end:]...)
	}
	return q
}

// dropOrderByAsc drops each \s+asc that follows the first "order by " in an
// unbroken chain: s/\G(.+?)\s+ASC/$1/gi anchored after ORDER BY, so "asc"
// is dropped even as the start of a longer word, as pt-query-digest does.
func dropOrderByAsc(q []byte) []byte {
	pos := orderByEnd(q)
	if pos < 0 {
		return q
	}
	for {
		k := ascAfter(q, pos)
		if k < 0 {
			return q
		}
		e := k
		for e < len(q) && isSpaceRE(q[e]) {
			e++
		}
		q = append(q[:k], q[e+3:]...)
		pos = k
	}
}

func orderByEnd(q []byte) int {
	for i := 0; i+9 <= len(q); i++ {
		if (i == 0 || !isWordRE(q[i-1])) && bytes.EqualFold(q[i:i+9], []byte("order by ")) {
			return i + 9
		}
	}
	return -1
}

// ascAfter finds the first k > pos where \s+asc matches, with no newline in
// q[pos:k] ("." does not match one).
func ascAfter(q []byte, pos int) int {
	for k := pos + 1; k < len(q); k++ {
		if q[k-1] == '\n' {
			return -1
		}
		if !isSpaceRE(q[k]) {
			continue
		}
		e := k
		for e < len(q) && isSpaceRE(q[e]) {
			e++
		}
		if e+3 <= len(q) && bytes.EqualFold(q[e:e+3], []byte("asc")) {
			return k
		}
	}
	return -1
}

// containsWordFold reports whether some \bword\b of words occurs in q.
func containsWordFold(q []byte, words []string) bool {
	for i, c := range q {
		c |= 0x20
		for _, w := range words {
			if c == w[0] && wordAt(q, i, words) > 0 {
				return true
			}
		}
	}
	return false
}

func hasPlaceholderPrefix(q []byte) bool {
	for i := 1; i < len(q); i++ {
		if q[i] == '?' {
			switch q[i-1] {
			case 'x', 'b', '.', '+', '-':
				return true
			}
		}
	}
	return false
}

// spaceSqueezed reports whether squeezeSpace would leave q as it is: no
// leading \s, no trailing newline, and only single spaces between words.
func spaceSqueezed(q []byte) bool {
	if len(q) > 0 && (isSpaceRE(q[0]) || q[len(q)-1] == '\n') {
		return false
	}
	for i, c := range q {
		switch c {
		case '\n', '\t', '\r', '\f':
			return false
		case ' ':
			if i > 0 && q[i-1] == ' ' {
				return false
			}
		}
	}
	return true
}
