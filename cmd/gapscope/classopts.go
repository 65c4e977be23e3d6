package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// classFlags are the report options digest and analyze share: which
// statements count, how they group, how classes rank and how many show.
type classFlags struct {
	groupBy string
	orderBy string
	limit   string
	filter  string
	since   string
	until   string
	width   int
}

func (f *classFlags) register(cmd *cobra.Command, groupBy bool) {
	fl := cmd.Flags()
	if groupBy {
		fl.StringVar(&f.groupBy, "group-by", "digest", "classes: digest (literals out, names kept) or fingerprint (pt-query-digest's classes and Query IDs)")
	}
	fl.StringVar(&f.orderBy, "order-by", "query_time:sum", "rank classes by ATTRIBUTE:sum|max|cnt (query_time, lock_time, rows_sent, rows_examined, rows_affected, bytes_sent, errors, zero_window)")
	fl.StringVar(&f.limit, "limit", "", "classes to report: N, N% (those making N% of the ranking total) or N%:M; overrides --top, applies to JSON too")
	fl.StringVar(&f.filter, "filter", "", "only statements matching this expression (see --help)")
	fl.StringVar(&f.since, "since", "", "only statements started at or after this time: 2024-05-06T07:08:09Z, '2024-05-06 07:08:09', 2024-05-06, or a duration (30m, 2h, 1d) before the input's end")
	fl.StringVar(&f.until, "until", "", "only statements started before this time (same forms as --since)")
	fl.IntVar(&f.width, "width", 0, "text line width (0: the terminal's, from COLUMNS or the tty; 120 when not a terminal)")
}

// classOptions are classFlags validated.
type classOptions struct {
	fingerprint bool
	order       report.OrderBy
	limit       *report.Limit
	filter      *report.Filter
	since       report.TimeBound
	until       report.TimeBound
	width       int
}

func (f *classFlags) options(metric report.Metric, loc *time.Location) (classOptions, error) {
	var o classOptions
	var err error
	switch f.groupBy {
	case "", "digest":
	case "fingerprint":
		o.fingerprint = true
	default:
		return o, usagef("--group-by must be digest or fingerprint, not %q", f.groupBy)
	}
	if o.order, err = report.ParseOrderBy(f.orderBy); err != nil {
		return o, usageError{err}
	}
	if f.limit != "" {
		l, err := report.ParseLimit(f.limit)
		if err != nil {
			return o, usageError{err}
		}
		o.limit = &l
	}
	if strings.TrimSpace(f.filter) != "" {
		if o.filter, err = report.ParseFilter(f.filter, metric); err != nil {
			return o, usageError{err}
		}
	}
	if o.since, err = report.ParseTimeBound("--since", f.since, loc); err != nil {
		return o, usageError{err}
	}
	if o.until, err = report.ParseTimeBound("--until", f.until, loc); err != nil {
		return o, usageError{err}
	}
	if report.EmptyWindow(o.since, o.until) {
		return o, usagef("--since is not before --until (%s, %s): no statement could be reported", f.since, f.until)
	}
	if f.width < 0 || (f.width > 0 && f.width < 60) {
		return o, usagef("--width must be 0 (the terminal's) or at least 60, not %d", f.width)
	}
	o.width = f.width
	return o, nil
}

// relative reports whether a bound needs the input's end.
func (o *classOptions) relative() bool { return o.since.Relative || o.until.Relative }

// selector keeps the statements --filter, --since and --until select, for
// an input ending at endUS.
func (o *classOptions) selector(endUS int64) *report.Selector {
	return report.NewSelector(o.filter, o.since, o.until, endUS)
}

// rank orders and cuts the result: --order-by, then --limit (or, in text
// output without --limit, --top).
func (o *classOptions) rank(r *report.ProfileResult, text bool, top int) {
	r.Sort(o.order)
	switch {
	case o.limit != nil:
		o.limit.Apply(r, o.order)
	case text && top > 0:
		report.Limit{N: top}.Apply(r, o.order)
	}
}

// writeClassText writes the class report at the terminal's width.
func (o *classOptions) writeClassText(w io.Writer, r *report.ProfileResult) error {
	heading := "digest"
	if o.fingerprint {
		heading = "fingerprint"
	}
	heading += ", ranked by " + o.order.String()
	return report.WriteClassReport(w, r, report.ClassTextOptions{Width: textWidth(o.width, w), Details: -1, Heading: heading})
}

// textWidth is --width, else COLUMNS, else the terminal's width when w is
// one, else report.DefaultWidth: piped output keeps a stable width.
func textWidth(flag int, w io.Writer) int {
	if flag > 0 {
		return flag
	}
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c >= 60 {
		return c
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 60 {
			return cols
		}
	}
	return report.DefaultWidth
}
