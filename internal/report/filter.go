package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gapscope/gapscope/internal/event"
)

// FilterHelp documents the --filter language for --help texts.
const FilterHelp = `A filter is a boolean expression over each statement's fields:
  comparisons   FIELD OP VALUE, OP one of = != < <= > >=
  combinations  and, or, not, parentheses (also &&, ||, !)
  strings       db, user, host, cmd, digest, text: = and != only; VALUE is a
                word or a quoted string in which * matches any run of
                characters and ? one character (db = 'shop*'); text is
                the digest text (literals as ?), matched like cmd without
                regard to case (text = 'SELECT * FROM orders WHERE id = ?')
  times         query_time (the profile's metric), client_time, server_time,
                lock_time, zero_window: VALUE with a unit (250us, 1.5ms, 2s,
                1m) or a bare number of seconds as in the slow log (0.5)
  numbers       rows_sent, rows_examined, rows_affected, bytes_sent, errno
                (0 when none), tmp_tables, tmp_disk_tables, merge_passes
  yes/no        full_scan, full_join, tmp_table, tmp_table_on_disk, filesort,
                filesort_on_disk, qc_hit: = yes|no (true|false, 1|0)
Example: --filter "db = shop and (query_time > 100ms or full_scan = yes)"
Nothing is evaluated but these comparisons.`

// Filter selects statements by a small expression language (FilterHelp).
type Filter struct {
	root   node
	metric Metric
}

// ParseFilter compiles expr; metric says what query_time means. Errors name
// the column and what was expected.
func ParseFilter(expr string, metric Metric) (*Filter, error) {
	toks, err := lexFilter(expr)
	if err != nil {
		return nil, err
	}
	p := &filterParser{toks: toks}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tkEnd {
		return nil, p.errorf(t, "unexpected %q after a complete expression", t.text)
	}
	return &Filter{root: root, metric: metric}, nil
}

// Match reports whether the statement passes; x may be nil.
func (f *Filter) Match(s *event.Statement, x *Extra) bool {
	if f == nil {
		return true
	}
	return f.root.eval(&filterInput{s: s, x: x, metric: f.metric})
}

type filterInput struct {
	s      *event.Statement
	x      *Extra
	metric Metric
}

type node interface{ eval(in *filterInput) bool }

type andNode struct{ l, r node }
type orNode struct{ l, r node }
type notNode struct{ n node }

func (n andNode) eval(in *filterInput) bool { return n.l.eval(in) && n.r.eval(in) }
func (n orNode) eval(in *filterInput) bool  { return n.l.eval(in) || n.r.eval(in) }
func (n notNode) eval(in *filterInput) bool { return !n.n.eval(in) }

// stringCmp compares a string field with a glob; fold compares without
// case (the glob is lowered once when parsed).
type stringCmp struct {
	get  func(in *filterInput) string
	glob string
	neg  bool
	fold bool
}

func (c stringCmp) eval(in *filterInput) bool {
	v := c.get(in)
	if c.fold {
		v = strings.ToLower(v)
	}
	return globMatch(c.glob, v) != c.neg
}

// numberCmp compares a numeric field (microseconds for times).
type numberCmp struct {
	get func(in *filterInput) int64
	op  string
	v   int64
}

func (c numberCmp) eval(in *filterInput) bool {
	x := c.get(in)
	switch c.op {
	case "=":
		return x == c.v
	case "!=":
		return x != c.v
	case "<":
		return x < c.v
	case "<=":
		return x <= c.v
	case ">":
		return x > c.v
	}
	return x >= c.v
}

type fieldKind int

const (
	kindString fieldKind = iota
	kindTime
	kindNumber
	kindBool
)

type field struct {
	kind fieldKind
	str  func(in *filterInput) string
	num  func(in *filterInput) int64
	// foldCase: the field's case carries no meaning. The digest text is
	// lower-cased by normalisation, so SQL typed as the application writes
	// it ("SELECT * FROM Orders") would otherwise never match; command
	// names are the protocol's, in whatever case the user types them.
	foldCase bool
}

func plan(in *filterInput) *Plan {
	if in.x == nil || in.x.Plan == nil {
		return &Plan{}
	}
	return in.x.Plan
}

var filterFields = map[string]field{
	"db":     {kind: kindString, str: func(in *filterInput) string { return in.s.DB }},
	"user":   {kind: kindString, str: func(in *filterInput) string { return in.s.User }},
	"host":   {kind: kindString, str: func(in *filterInput) string { return hostOf(in) }},
	"cmd":    {kind: kindString, str: func(in *filterInput) string { return in.s.Cmd }, foldCase: true},
	"digest": {kind: kindString, str: func(in *filterInput) string { return in.s.Digest }},
	"text":   {kind: kindString, str: func(in *filterInput) string { return in.s.DigestText }, foldCase: true},
	"query_time": {kind: kindTime, num: func(in *filterInput) int64 {
		if in.metric == ServerLatency {
			return in.s.ServerUS
		}
		return in.s.ClientUS
	}},
	"client_time":       {kind: kindTime, num: func(in *filterInput) int64 { return in.s.ClientUS }},
	"server_time":       {kind: kindTime, num: func(in *filterInput) int64 { return in.s.ServerUS }},
	"lock_time":         {kind: kindTime, num: func(in *filterInput) int64 { return in.s.LockUS }},
	"zero_window":       {kind: kindTime, num: func(in *filterInput) int64 { return in.s.ZeroWindowUS }},
	"rows_sent":         {kind: kindNumber, num: func(in *filterInput) int64 { return in.s.Rows }},
	"rows_examined":     {kind: kindNumber, num: func(in *filterInput) int64 { return in.s.RowsExamined }},
	"rows_affected":     {kind: kindNumber, num: func(in *filterInput) int64 { return rowsAffected(in) }},
	"bytes_sent":        {kind: kindNumber, num: func(in *filterInput) int64 { return in.s.RespBytes }},
	"errno":             {kind: kindNumber, num: errnoOf},
	"tmp_tables":        {kind: kindNumber, num: func(in *filterInput) int64 { return plan(in).TmpTables }},
	"tmp_disk_tables":   {kind: kindNumber, num: func(in *filterInput) int64 { return plan(in).TmpDiskTables }},
	"merge_passes":      {kind: kindNumber, num: func(in *filterInput) int64 { return plan(in).MergePasses }},
	"full_scan":         {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).FullScan }},
	"full_join":         {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).FullJoin }},
	"tmp_table":         {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).TmpTable }},
	"tmp_table_on_disk": {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).TmpTableOnDisk }},
	"filesort":          {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).Filesort }},
	"filesort_on_disk":  {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).FilesortOnDisk }},
	"qc_hit":            {kind: kindBool, num: func(in *filterInput) int64 { return plan(in).QCHit }},
}

func hostOf(in *filterInput) string {
	if in.x != nil {
		return in.x.Host
	}
	return ""
}

func rowsAffected(in *filterInput) int64 {
	if in.x != nil {
		return in.x.RowsAffected
	}
	return 0
}

func errnoOf(in *filterInput) int64 {
	if in.s.Error != nil {
		return int64(in.s.Error.Code)
	}
	return 0
}

// globMatch matches s against a pattern where * is any run and ? one
// character; nothing else is special.
func globMatch(pattern, s string) bool {
	px, sx := 0, 0
	starP, starS := -1, 0
	for sx < len(s) {
		if px < len(pattern) {
			switch c, n := utf8.DecodeRuneInString(pattern[px:]); c {
			case '*':
				starP, starS = px, sx
				px++
				continue
			case '?':
				_, m := utf8.DecodeRuneInString(s[sx:])
				px, sx = px+n, sx+m
				continue
			default:
				if strings.HasPrefix(s[sx:], pattern[px:px+n]) {
					px, sx = px+n, sx+n
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, m := utf8.DecodeRuneInString(s[starS:])
		starS += m
		px, sx = starP+1, starS
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}

// Lexer.

type tokKind int

const (
	tkEnd tokKind = iota
	tkWord
	tkString
	tkOp
	tkLParen
	tkRParen
)

type ftoken struct {
	kind tokKind
	text string
	col  int // 1-based
}

func lexFilter(expr string) ([]ftoken, error) {
	var toks []ftoken
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '(' || c == ')':
			k := tkLParen
			if c == ')' {
				k = tkRParen
			}
			toks = append(toks, ftoken{k, string(c), i + 1})
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(expr[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("--filter: column %d: string not closed (missing %c)", i+1, c)
			}
			toks = append(toks, ftoken{tkString, expr[i+1 : i+1+end], i + 1})
			i += end + 2
		case strings.ContainsRune("=!<>&|", rune(c)):
			n := opLen(expr[i:])
			toks = append(toks, ftoken{tkOp, expr[i : i+n], i + 1})
			i += n
		default:
			j := i
			for j < len(expr) && !strings.ContainsRune(" \t\n()'\"=!<>&|", rune(expr[j])) {
				j++
			}
			toks = append(toks, ftoken{tkWord, expr[i:j], i + 1})
			i = j
		}
	}
	return append(toks, ftoken{kind: tkEnd, col: len(expr) + 1}), nil
}

func opLen(s string) int {
	for _, op := range []string{"==", "!=", "<>", "<=", ">=", "&&", "||"} {
		if strings.HasPrefix(s, op) {
			return 2
		}
	}
	return 1
}

// Parser: or -> and -> unary -> comparison.

type filterParser struct {
	toks []ftoken
	pos  int
}

func (p *filterParser) peek() ftoken { return p.toks[p.pos] }

func (p *filterParser) next() ftoken {
	t := p.toks[p.pos]
	if t.kind != tkEnd {
		p.pos++
	}
	return t
}

func (p *filterParser) errorf(t ftoken, format string, args ...any) error {
	return fmt.Errorf("--filter: column %d: %s", t.col, fmt.Sprintf(format, args...))
}

func isKeyword(t ftoken, words ...string) bool {
	if t.kind == tkWord {
		return slices.Contains(words, strings.ToLower(t.text))
	}
	return t.kind == tkOp && slices.Contains(words, t.text)
}

func (p *filterParser) or() (node, error) {
	l, err := p.and()
	for err == nil && isKeyword(p.peek(), "or", "||") {
		p.next()
		var r node
		if r, err = p.and(); err == nil {
			l = orNode{l, r}
		}
	}
	return l, err
}

func (p *filterParser) and() (node, error) {
	l, err := p.unary()
	for err == nil && isKeyword(p.peek(), "and", "&&") {
		p.next()
		var r node
		if r, err = p.unary(); err == nil {
			l = andNode{l, r}
		}
	}
	return l, err
}

func (p *filterParser) unary() (node, error) {
	t := p.peek()
	switch {
	case isKeyword(t, "not", "!"):
		p.next()
		n, err := p.unary()
		return notNode{n}, err
	case t.kind == tkLParen:
		p.next()
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tkRParen {
			return nil, p.errorf(c, "expected ')' to close the '(' of column %d", t.col)
		}
		return n, nil
	}
	return p.comparison()
}

func (p *filterParser) comparison() (node, error) {
	t := p.next()
	if t.kind != tkWord {
		return nil, p.errorf(t, "expected a field name, found %s", describe(t))
	}
	f, ok := filterFields[strings.ToLower(t.text)]
	if !ok {
		return nil, p.errorf(t, "unknown field %q (fields: %s)", t.text, strings.Join(fieldNames(), ", "))
	}
	opTok := p.next()
	op, ok := comparisonOp(opTok)
	if !ok {
		return nil, p.errorf(opTok, "expected a comparison (= != < <= > >=) after %q, found %s", t.text, describe(opTok))
	}
	v := p.next()
	if v.kind != tkWord && v.kind != tkString {
		return nil, p.errorf(v, "expected a value after %q %s, found %s", t.text, op, describe(v))
	}
	return p.compile(t, f, op, v)
}

func (p *filterParser) compile(name ftoken, f field, op string, v ftoken) (node, error) {
	switch f.kind {
	case kindString:
		if op != "=" && op != "!=" {
			return nil, p.errorf(name, "%s is a string: only = and != compare it", name.text)
		}
		glob := v.text
		if f.foldCase {
			glob = strings.ToLower(glob)
		}
		return stringCmp{get: f.str, glob: glob, neg: op == "!=", fold: f.foldCase}, nil
	case kindBool:
		b, ok := parseYesNo(v.text)
		if !ok || (op != "=" && op != "!=") {
			return nil, p.errorf(v, "%s is yes or no: compare it with = yes or = no", name.text)
		}
		return numberCmp{get: f.num, op: op, v: b}, nil
	case kindTime:
		us, err := parseFilterDuration(v.text)
		if err != nil {
			return nil, p.errorf(v, "%s: %v", name.text, err)
		}
		return numberCmp{get: f.num, op: op, v: us}, nil
	}
	n, err := strconv.ParseInt(v.text, 10, 64)
	if err != nil {
		return nil, p.errorf(v, "%s: %q is not a whole number", name.text, v.text)
	}
	return numberCmp{get: f.num, op: op, v: n}, nil
}

func comparisonOp(t ftoken) (string, bool) {
	if t.kind != tkOp {
		return "", false
	}
	switch t.text {
	case "=", "==":
		return "=", true
	case "!=", "<>":
		return "!=", true
	case "<", "<=", ">", ">=":
		return t.text, true
	}
	return "", false
}

func describe(t ftoken) string {
	if t.kind == tkEnd {
		return "the end of the expression"
	}
	return strconv.Quote(t.text)
}

func fieldNames() []string {
	names := make([]string, 0, len(filterFields))
	for n := range filterFields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func parseYesNo(s string) (int64, bool) {
	switch strings.ToLower(s) {
	case "yes", "true", "1":
		return 1, true
	case "no", "false", "0":
		return 0, true
	}
	return 0, false
}

// parseFilterDuration reads 250us, 1.5ms, 2s, 1m, or bare seconds (0.5).
func parseFilterDuration(s string) (int64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"µs", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}}
	scale, num := 1e6, s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			scale, num = u.us, strings.TrimSuffix(s, u.suffix)
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 1e12 {
		return 0, fmt.Errorf("%q is not a duration (250us, 1.5ms, 2s, 1m or seconds)", s)
	}
	return int64(v*scale + 0.5), nil
}
