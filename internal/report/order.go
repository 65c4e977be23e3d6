package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// OrderBy ranks classes by an attribute's sum or maximum, or by their call
// count, like pt-query-digest's --order-by (Query_time:sum by default).
type OrderBy struct {
	Attr string // one of OrderAttrs
	Agg  string // sum, max or cnt
}

// OrderAttrs are the attributes classes can be ranked by; pt-query-digest's
// names (Query_time, Lock_time, Rows_sent, ...) are accepted too.
var OrderAttrs = []string{"query_time", "lock_time", "rows_sent", "rows_examined", "rows_affected", "bytes_sent", "errors", "zero_window"}

// DefaultOrder is total time: the statements that cost the most.
var DefaultOrder = OrderBy{Attr: "query_time", Agg: "sum"}

// ParseOrderBy reads "attribute:sum|max|cnt" (the aggregate defaults to sum).
func ParseOrderBy(s string) (OrderBy, error) {
	attr, agg, found := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	if !found {
		agg = "sum"
	}
	if !slices.Contains(OrderAttrs, attr) {
		return OrderBy{}, fmt.Errorf("--order-by %q: unknown attribute %q (one of %s)", s, attr, strings.Join(OrderAttrs, ", "))
	}
	if agg != "sum" && agg != "max" && agg != "cnt" {
		return OrderBy{}, fmt.Errorf("--order-by %q: %q is not sum, max or cnt", s, agg)
	}
	return OrderBy{Attr: attr, Agg: agg}, nil
}

func (o OrderBy) String() string { return o.Attr + ":" + o.Agg }

// value is a class's ranking value.
func (o OrderBy) value(d DigestRow) int64 {
	if o.Agg == "cnt" {
		return d.Calls
	}
	a := o.attr(d)
	if o.Agg == "max" {
		return a.Max
	}
	return a.Sum
}

func (o OrderBy) attr(d DigestRow) Attr {
	switch o.Attr {
	case "lock_time":
		return d.Attributes.LockUS
	case "rows_sent":
		return d.Attributes.RowsSent
	case "rows_examined":
		return d.Attributes.RowsExamined
	case "rows_affected":
		return d.Attributes.RowsAffected
	case "bytes_sent":
		return d.Attributes.BytesSent
	case "errors":
		return Attr{Sum: d.Errors, Max: min(d.Errors, 1)}
	case "zero_window":
		return Attr{Sum: d.ZeroWindowUS, Max: d.ZeroWindowUS}
	}
	return Attr{Sum: d.TotalUS, Max: d.MaxUS}
}

// Sort ranks r's classes by o, highest first; ties by total time, calls,
// then ID, so that the order is deterministic. "(other)" stays last.
func (r *ProfileResult) Sort(o OrderBy) {
	n := len(r.Digests)
	if n > 0 && r.Digests[n-1].DigestText == otherText && r.Digests[n-1].Digest == "" {
		n--
	}
	slices.SortStableFunc(r.Digests[:n], func(a, b DigestRow) int {
		if va, vb := o.value(a), o.value(b); va != vb {
			return cmpDesc(va, vb)
		}
		return byTotal(a, b)
	})
}

// Limit keeps the top classes: N of them, or (Percent > 0) those that
// together reach Percent of the ranking attribute's total, as
// pt-query-digest's --limit 95%. Both may be set ("95%:20"): the smaller
// wins.
type Limit struct {
	N       int
	Percent float64
}

// ParseLimit reads "N", "N%" or "N%:M".
func ParseLimit(s string) (Limit, error) {
	var l Limit
	pctPart, nPart, both := strings.Cut(strings.TrimSpace(s), ":")
	if !both && !strings.HasSuffix(pctPart, "%") {
		pctPart, nPart = "", pctPart
	}
	if pctPart != "" {
		v, err := strconv.ParseFloat(strings.TrimSuffix(pctPart, "%"), 64)
		if !strings.HasSuffix(pctPart, "%") || err != nil || v <= 0 || v > 100 {
			return Limit{}, fmt.Errorf("--limit %q: %q is not a percentage in (0, 100]", s, pctPart)
		}
		l.Percent = v
	}
	if nPart != "" {
		n, err := strconv.Atoi(nPart)
		if err != nil || n < 1 {
			return Limit{}, fmt.Errorf("--limit %q: %q is not a class count of at least 1", s, nPart)
		}
		l.N = n
	}
	return l, nil
}

// Apply cuts r's ranked classes to the limit and says so in a note; the
// header totals still count every class.
func (l Limit) Apply(r *ProfileResult, o OrderBy) {
	keep := len(r.Digests)
	if l.Percent > 0 {
		keep = percentCut(r.Digests, o, l.Percent)
	}
	if l.N > 0 {
		keep = min(keep, l.N)
	}
	if keep >= len(r.Digests) {
		return
	}
	r.Notes = append(r.Notes, fmt.Sprintf("showing %d of %d classes (--limit, ranked by %s)", keep, len(r.Digests), o))
	r.Digests = r.Digests[:keep]
}

// percentCut is how many leading classes reach pct of the ranking total.
func percentCut(rows []DigestRow, o OrderBy, pct float64) int {
	var total int64
	for _, d := range rows {
		total += o.value(d)
	}
	var run int64
	for i, d := range rows {
		run += o.value(d)
		if float64(run) >= pct/100*float64(total) {
			return i + 1
		}
	}
	return len(rows)
}
